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
//! - an entry is the code followed by a trailer that records the sha256 of
//!   the component it was compiled from and the sha256 of the code before
//!   it; the loader checks both against the component being loaded and the
//!   file it opened, and maps that same file (the inode it checked, through
//!   `/proc/self/fd`, never the path again). An entry renamed, copied or
//!   planted under another component's key, or torn, is refused, removed
//!   and compiled afresh.
//!
//! # Mapped, not copied
//!
//! A loaded entry's code runs from a read-only mapping of the entry's file
//! ([`Component::deserialize_file`]), and the guest's initial linear memory
//! is mapped copy-on-write from the same file: both are clean pages of the
//! page cache, resident only where they are used and given back by the
//! kernel under memory pressure. A copy (`Component::deserialize` of the
//! bytes read) held all of it as the process's anonymous memory, plus a
//! `memfd` copy of the initial memory: about 50 MB for CPython, 40 MB for
//! SpiderMonkey (docs/deployment.md, "Memory"). That is why the trailer
//! comes after the code: wasmtime maps a file from its first byte. A code
//! just compiled goes to the cache and is mapped from there too
//! ([`PrecompileCache::load_stored`]). Entries are never written in place
//! (write-then-rename), so a mapped entry never changes under the engine;
//! one evicted or replaced while mapped stays readable through its mapping.
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
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::{Error, Result};

/// The last bytes of an entry. (Format 1 had a header in front of the
/// code, which kept it from being mapped as it is.)
const MAGIC: &[u8; 8] = b"NSCWASM2";
/// Trailer after the code: sha256 of the component, sha256 of the code,
/// magic.
const TRAILER: usize = 32 + 32 + 8;
/// Mixed into the engine key, so that a build that writes another entry
/// format never looks at this one's entries (they go as another build's).
const FORMAT: &[u8] = b"nodestatus-cache-format-2";
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

fn unsafe_dir(path: &Path, reason: String) -> Error {
    Error::CacheUnsafe {
        path: path.to_owned(),
        reason,
    }
}

/// Checks that only the engine's user can write `dir`
/// ([`nodestatus_files::check_private_dir`]).
fn check_dir(dir: &Path) -> Result<()> {
    nodestatus_files::check_private_dir(dir).map_err(|e| match e {
        nodestatus_files::DirError::Io(source) => Error::Cache {
            path: dir.to_owned(),
            source,
        },
        nodestatus_files::DirError::Unsafe(reason) => unsafe_dir(dir, reason),
    })
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
        hasher.write(FORMAT);
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
    /// present, safe and bound to that component, its code mapped from the
    /// entry's file. Anything else is logged, removed, and `None` is
    /// returned, so the caller compiles afresh.
    pub fn load(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.entry_path(sha256);
        match self.map_entry(engine, &path, sha256) {
            Ok(Some(component)) => {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                // Recently used: the last to be evicted.
                let _ = std::fs::File::open(&path)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()));
                Some(component)
            }
            Ok(None) => {
                self.stats.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(reason) => {
                tracing::warn!(path = %path.display(), "refusing precompile cache entry: {reason}; compiling the component instead");
                let _ = std::fs::remove_file(&path);
                self.stats.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The component whose code was just compiled and [stored](Self::store)
    /// for `sha256`, mapped from its entry (not counted as a hit): a
    /// compile ends with the same memory as a load from the cache. `None`
    /// when the entry cannot be mapped (the caller keeps its copy).
    pub(crate) fn load_stored(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.entry_path(sha256);
        match self.map_entry(engine, &path, sha256) {
            Ok(component) => component,
            Err(reason) => {
                tracing::debug!(path = %path.display(), "the code just stored cannot be mapped ({reason}); running a copy");
                None
            }
        }
    }

    /// Opens and checks the entry at `path` (`Ok(None)`: none) and
    /// deserializes the component from a mapping of the file checked.
    fn map_entry(
        &self,
        engine: &Engine,
        path: &Path,
        sha256: &str,
    ) -> Result<Option<Component>, String> {
        let Some((file, code_len)) = open_entry(path, sha256)? else {
            return Ok(None);
        };
        // SAFETY: the file is one that only the engine's user could write
        // (checked by `open_entry`: directory and file ownership and modes,
        // one link), whose trailer binds it to this component's sha256 and
        // whose code hash matches; entries are only written by `store`
        // below, from `Engine::precompile_component`'s output, by
        // write-then-rename, so the file mapped never changes while mapped.
        unsafe { deserialize_open(engine, &file, code_len) }
            .map(Some)
            .map_err(|e| format!("cannot deserialize it: {e:#}"))
    }

    /// Stores precompiled code for `sha256`. Failures are logged, not
    /// returned: the cache only makes the next load faster.
    pub fn store(&self, sha256: &str, code: &[u8]) {
        let path = self.entry_path(sha256);
        let result = (|| -> std::io::Result<()> {
            let component = hex::decode(sha256)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
            nodestatus_files::write_atomic_with(&path, |f| {
                f.write_all(code)?;
                f.write_all(&component)?;
                f.write_all(&Sha256::digest(code))?;
                f.write_all(MAGIC)
            })
        })();
        match result {
            Ok(()) => self.evict(Some(&path)),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "cannot write precompile cache entry")
            }
        }
    }
}

/// Reads a file of the cache directory that only the engine's user can
/// have written: `Ok(None)` when there is none, `Err(why)` when there is one
/// that must not be used ([`nodestatus_files::read_private`]).
pub(crate) fn read_private(path: &Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    nodestatus_files::read_private(path, max).map_err(|e| e.to_string())
}

/// Writes `bytes` to `path` in the cache directory, owner-only, atomically
/// and durably ([`nodestatus_files::write_atomic`]).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    nodestatus_files::write_atomic(path, bytes)
}

/// Opens and checks an entry: its file and the length of the code before
/// the trailer, `Ok(None)` when there is none, `Err(why)` when there is one
/// that must not be used. The code is hashed through the file's pages in
/// the page cache, read in pieces: nothing of it is copied into the heap.
fn open_entry(path: &Path, sha256: &str) -> Result<Option<(std::fs::File, usize)>, String> {
    use std::os::unix::fs::FileExt;
    let Some(file) =
        nodestatus_files::open_private(path, MAX_ENTRY_BYTES).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let mut trailer = [0u8; TRAILER];
    if len < TRAILER as u64
        || file
            .read_exact_at(&mut trailer, len - TRAILER as u64)
            .is_err()
        || &trailer[64..] != MAGIC
    {
        return Err("it has no nodestatus cache trailer".into());
    }
    if hex::encode(&trailer[..32]) != sha256 {
        return Err(format!(
            "it was compiled from component {}, not {sha256}",
            hex::encode(&trailer[..32])
        ));
    }
    let code_len = len - TRAILER as u64;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < code_len {
        let n = buf.len().min((code_len - at) as usize);
        file.read_exact_at(&mut buf[..n], at)
            .map_err(|e| e.to_string())?;
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    if trailer[32..64] != hasher.finalize()[..] {
        return Err("its code does not match the hash in its trailer".into());
    }
    Ok(Some((file, code_len as usize)))
}

/// The component in `file`, an entry checked by [`open_entry`] whose code
/// is its first `code_len` bytes: mapped from the file, reopened through
/// `/proc/self/fd` so that it is the inode checked and not whatever the
/// path names now. Where that reopening is not possible (no `/proc`), the
/// code is read from `file` and copied.
///
/// # Safety
///
/// As [`Component::deserialize_file`]: the file holds code that this
/// engine's configuration wrote, and is not changed while it is mapped.
unsafe fn deserialize_open(
    engine: &Engine,
    file: &std::fs::File,
    code_len: usize,
) -> wasmtime::Result<Component> {
    use std::os::unix::fs::{FileExt, MetadataExt};
    use std::os::unix::io::AsRawFd;
    let fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let checked = file.metadata()?;
    let same =
        std::fs::metadata(&fd).is_ok_and(|m| m.dev() == checked.dev() && m.ino() == checked.ino());
    if same {
        // SAFETY: the caller's.
        return unsafe { Component::deserialize_file(engine, &fd) };
    }
    let mut code = vec![0u8; code_len];
    file.read_exact_at(&mut code, 0)?;
    // SAFETY: the caller's.
    unsafe { Component::deserialize(engine, &code) }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tier;

    /// The smallest component: its preamble.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    /// Whether this process maps `path` (a line of /proc/self/maps).
    fn mapped(path: &Path) -> bool {
        let path = path.to_str().unwrap();
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .any(|l| l.ends_with(path))
    }

    fn cache_with_entry() -> (tempfile::TempDir, Engine, PrecompileCache, String) {
        let tmp = tempfile::tempdir().unwrap();
        let engine = Engine::new(&crate::tier::engine_config(Tier::Optimized)).unwrap();
        let cache =
            PrecompileCache::open(tmp.path().join("c"), &engine, DEFAULT_MAX_BYTES).unwrap();
        let sha = crate::sha256_hex(EMPTY_COMPONENT);
        let code = engine.precompile_component(EMPTY_COMPONENT).unwrap();
        cache.store(&sha, &code);
        (tmp, engine, cache, sha)
    }

    #[test]
    fn a_hit_maps_the_entry_instead_of_copying_it() {
        let (_tmp, engine, cache, sha) = cache_with_entry();
        let entry = cache.entry_path(&sha);
        let component = cache.load(&engine, &sha).expect("a hit");
        assert!(
            mapped(&entry),
            "the code of a hit is a copy, not a mapping of {}",
            entry.display()
        );
        // The mapping is the component's, for as long as it lives.
        drop(component);
        assert!(!mapped(&entry));
        // A compile maps what it stored as well.
        let stored = cache.load_stored(&engine, &sha).expect("stored");
        assert!(mapped(&entry));
        drop(stored);
        assert_eq!(cache.stats().hits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_torn_or_rebound_entry_is_refused_and_removed() {
        let (_tmp, engine, cache, sha) = cache_with_entry();
        let entry = cache.entry_path(&sha);
        let good = std::fs::read(&entry).unwrap();
        let write = |bytes: &[u8]| {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&entry)
                .unwrap();
            f.write_all(bytes).unwrap();
        };
        let mut torn = good.clone();
        torn.remove(10);
        let mut other = good.clone();
        let at = good.len() - TRAILER;
        other[at] ^= 1;
        for (what, bytes) in [
            ("torn", torn),
            ("bound to another component", other),
            ("code alone", good[..at].to_vec()),
        ] {
            write(&bytes);
            assert!(cache.load(&engine, &sha).is_none(), "{what}");
            assert!(!entry.exists(), "{what}: not removed");
        }
        write(&good);
        assert!(cache.load(&engine, &sha).is_some());
    }
}
