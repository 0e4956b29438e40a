//! The precompile cache: native code for each plugin, keyed by the sha256 of
//! the component and of the engine's compatibility hash.
//!
//! Deserializing precompiled code trusts it completely: whoever can write an
//! entry can run native code in the engine. So the cache is only used when
//! nobody but the engine's own user can write it, and each entry is bound to
//! the component it was compiled from:
//!
//! - the directory is created `0700`; an existing one must be a real
//!   directory (not a symlink) owned by the engine's user and not writable
//!   by group or others, or the cache is disabled with a warning
//!   ([`Error::CacheUnsafe`]);
//! - an entry is written `0600` by write-then-rename, and read back only if
//!   it is a regular file owned by the engine's user, with no permission
//!   bits for group or others and a single link;
//! - an entry starts with a header that records the sha256 of the component
//!   it was compiled from and the sha256 of the code that follows; the
//!   loader checks both against the component being loaded and the bytes it
//!   read, and deserializes from those same bytes (no second open). An entry
//!   renamed, copied or planted under another component's key, or torn, is
//!   refused, removed and compiled afresh.
//!
//! What this does not stop is a process running as the engine's own user,
//! which could as well write the engine's memory.
//!
//! The cache is bounded: at most `cacheMaxSize` bytes of entries (default
//! [`DEFAULT_MAX_BYTES`]). Each store evicts the least recently used entries
//! (by modification time, which a hit refreshes) until the rest fit, never
//! the entry just written. At open, entries of another engine build (whose
//! compatibility hash differs, so this build can never use them) unused for
//! a day and temporary files left by a crash are removed, and the cap is
//! applied. Hits, misses
//! and evictions are counted ([`CacheStats`]).

use std::hash::Hasher;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::{Error, Result};

/// The first bytes of an entry.
const MAGIC: &[u8; 8] = b"NSCWASM1";
/// Header: magic, sha256 of the component, sha256 of the code.
const HEADER: usize = 8 + 32 + 32;
/// Largest entry read (CPython's is about 100 MB).
const MAX_ENTRY_BYTES: u64 = 1 << 30;

/// The default size cap of the cache (`cacheMaxSize`).
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;

/// A temporary file older than this at open was left by a crash.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// An entry of another engine build unused for this long is removed at open.
/// (Not at once: two builds, such as the tests and the benchmarks, may share
/// a directory; each one's entries count against the cap meanwhile.)
const STALE_OTHER_BUILD: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// What the cache did since the process started.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Loads answered from an entry.
    pub hits: AtomicU64,
    /// Loads that found no usable entry (and compiled).
    pub misses: AtomicU64,
    /// Entries removed to keep under the cap.
    pub evictions: AtomicU64,
    /// Entries of another engine build, or crash leftovers, removed.
    pub stale_removed: AtomicU64,
    /// Bytes of entries after the last store or open.
    pub bytes: AtomicU64,
}

/// A directory of `.cwasm` files.
#[derive(Debug, Clone)]
pub struct PrecompileCache {
    dir: PathBuf,
    engine_key: String,
    max_bytes: u64,
    stats: Arc<CacheStats>,
}

/// Feeds `Hash` output into sha256, so the engine key is stable across
/// builds of the host (unlike `DefaultHasher`).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        // Only the digest is used.
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn unsafe_dir(path: &Path, reason: String) -> Error {
    Error::CacheUnsafe {
        path: path.to_owned(),
        reason,
    }
}

/// Checks that only the engine's user can write `dir`.
fn check_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir).map_err(|source| Error::Cache {
        path: dir.to_owned(),
        source,
    })?;
    if !meta.file_type().is_dir() {
        return Err(unsafe_dir(dir, "it is not a directory (a symlink?)".into()));
    }
    if meta.uid() != euid() {
        return Err(unsafe_dir(
            dir,
            format!(
                "it is owned by uid {}, not by the engine's uid {}; create it as the engine's user",
                meta.uid(),
                euid()
            ),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_dir(
            dir,
            format!(
                "its mode {:o} lets group or others write it; run `chmod 700 {}`",
                meta.mode() & 0o7777,
                dir.display()
            ),
        ));
    }
    Ok(())
}

impl PrecompileCache {
    /// Opens (and creates, owner-only) the cache directory for `engine`,
    /// with at most `max_bytes` of entries. Refuses a directory that others
    /// could write ([`Error::CacheUnsafe`]). Removes the entries no build of
    /// this engine can use, then applies the cap.
    pub fn open(dir: PathBuf, engine: &Engine, max_bytes: u64) -> Result<Self> {
        create_private_dir(&dir).map_err(|source| Error::Cache {
            path: dir.clone(),
            source,
        })?;
        check_dir(&dir)?;
        let mut hasher = ShaHasher(Sha256::new());
        std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
        let key = hex::encode(hasher.0.finalize());
        let cache = Self {
            dir,
            engine_key: key[..16].to_owned(),
            max_bytes,
            stats: Arc::new(CacheStats::default()),
        };
        cache.remove_stale();
        cache.evict(None);
        Ok(cache)
    }

    /// The counters of this cache.
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// The entries: path, size and modification time.
    fn entries(&self) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.filter_map(|e| {
            let e = e.ok()?;
            let path = e.path();
            if path.extension()? != "cwasm" {
                return None;
            }
            let meta = std::fs::symlink_metadata(&path).ok()?;
            meta.file_type().is_file().then(|| {
                (
                    path,
                    meta.len(),
                    meta.modified().unwrap_or(std::time::UNIX_EPOCH),
                )
            })
        })
        .collect()
    }

    /// Removes entries compiled by another engine build (their names end in
    /// another compatibility key: never loadable here) unused for
    /// [`STALE_OTHER_BUILD`], and temporary files that a crash left behind.
    fn remove_stale(&self) {
        let suffix = format!("-{}.cwasm", self.engine_key);
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let older_than = |limit| {
                e.metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > limit))
            };
            let stale = if name.starts_with(".tmp-") {
                older_than(STALE_TMP)
            } else {
                name.ends_with(".cwasm")
                    && !name.ends_with(&suffix)
                    && older_than(STALE_OTHER_BUILD)
            };
            if stale && std::fs::remove_file(e.path()).is_ok() {
                self.stats.stale_removed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(file = %name, "removed a stale precompile cache entry");
            }
        }
    }

    /// Removes the least recently used entries until the rest fit under
    /// the cap; never `keep` (the entry just written).
    fn evict(&self, keep: Option<&Path>) {
        let mut entries = self.entries();
        let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
        entries.sort_by_key(|(_, _, modified)| *modified);
        for (path, len, _) in entries {
            if total <= self.max_bytes {
                break;
            }
            if Some(path.as_path()) == keep {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                self.stats.evictions.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(path = %path.display(), "evicted a precompile cache entry (cacheMaxSize)");
            }
        }
        if total > self.max_bytes {
            tracing::warn!(
                "the precompile cache holds {total} bytes, over cacheMaxSize ({} bytes): one entry is larger than the cap; raise cacheMaxSize",
                self.max_bytes
            );
        }
        self.stats.bytes.store(total, Ordering::Relaxed);
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of the engine build whose code this cache holds (a part of
    /// every entry's name).
    pub(crate) fn engine_key(&self) -> &str {
        &self.engine_key
    }

    /// The file that holds (or would hold) the entry of the component whose
    /// sha256 is `sha256`.
    pub fn entry_path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_key))
    }

    /// Loads the component for `sha256` from the cache, if an entry is
    /// present, safe and bound to that component. Anything else is logged,
    /// removed, and `None` is returned, so the caller compiles afresh.
    pub fn load(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.entry_path(sha256);
        let code = match read_entry(&path, sha256) {
            Ok(Some(code)) => code,
            Ok(None) => {
                self.stats.misses.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Err(reason) => {
                tracing::warn!(path = %path.display(), "refusing precompile cache entry: {reason}; compiling the component instead");
                let _ = std::fs::remove_file(&path);
                self.stats.misses.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        };
        // SAFETY: the bytes come from a file that only the engine's user
        // could write (checked above: directory and file ownership and
        // modes), whose header binds them to this component's sha256 and
        // whose code hash matches; entries are only written by `store`
        // below from `Engine::precompile_component`.
        match unsafe { Component::deserialize(engine, &code[HEADER..]) } {
            Ok(component) => {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                // Recently used: the last to be evicted.
                let _ = std::fs::File::open(&path)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()));
                Some(component)
            }
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "discarding unusable precompile cache entry");
                let _ = std::fs::remove_file(&path);
                self.stats.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Stores precompiled code for `sha256`. Failures are logged, not
    /// returned: the cache only makes the next load faster.
    pub fn store(&self, sha256: &str, code: &[u8]) {
        let path = self.entry_path(sha256);
        let result = (|| -> std::io::Result<()> {
            let component = hex::decode(sha256)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
            let mut tmp = tempfile_in(&self.dir)?;
            tmp.1.write_all(MAGIC)?;
            tmp.1.write_all(&component)?;
            tmp.1.write_all(&Sha256::digest(code))?;
            tmp.1.write_all(code)?;
            tmp.1.sync_all()?;
            std::fs::rename(&tmp.0, &path)
        })();
        match result {
            Ok(()) => self.evict(Some(&path)),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "cannot write precompile cache entry")
            }
        }
    }
}

/// Reads and checks an entry: `Ok(None)` when there is none, `Err(why)`
/// when there is one that must not be used.
/// Reads a file of the cache directory that only the engine's user can
/// have written: `Ok(None)` when there is none, `Err(why)` when there is one
/// that must not be used (not a regular file, another owner, group or
/// others' permission bits, more than one link, larger than `max`).
pub(crate) fn read_private(path: &Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open it: {e}")),
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.uid() != euid() {
        return Err(format!(
            "it is owned by uid {}, not the engine's",
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!("its mode {:o} is not 0600", meta.mode() & 0o7777));
    }
    if meta.nlink() != 1 {
        return Err(format!("it has {} links", meta.nlink()));
    }
    if meta.len() > max {
        return Err(format!("it is {} bytes", meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    Ok(Some(bytes))
}

/// Writes `bytes` to `path` in the cache directory `dir`, owner-only, by
/// write-then-rename.
pub(crate) fn write_private(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = tempfile_in(dir)?;
    tmp.1.write_all(bytes)?;
    tmp.1.sync_all()?;
    std::fs::rename(&tmp.0, path)
}

fn read_entry(path: &Path, sha256: &str) -> Result<Option<Vec<u8>>, String> {
    let Some(bytes) = read_private(path, MAX_ENTRY_BYTES)? else {
        return Ok(None);
    };
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err("it has no nodestatus cache header".into());
    }
    if hex::encode(&bytes[8..40]) != sha256 {
        return Err(format!(
            "it was compiled from component {}, not {sha256}",
            hex::encode(&bytes[8..40])
        ));
    }
    if bytes[40..HEADER] != Sha256::digest(&bytes[HEADER..])[..] {
        return Err("its code does not match the hash in its header".into());
    }
    Ok(Some(bytes))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = format!(".tmp-{}-{}", std::process::id(), rand::random::<u64>());
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    Ok((path, file))
}
