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

use std::hash::Hasher;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

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

/// A directory of `.cwasm` files.
#[derive(Debug, Clone)]
pub struct PrecompileCache {
    dir: PathBuf,
    engine_key: String,
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
    /// Opens (and creates, owner-only) the cache directory for `engine`.
    /// Refuses a directory that others could write ([`Error::CacheUnsafe`]).
    pub fn open(dir: PathBuf, engine: &Engine) -> Result<Self> {
        create_private_dir(&dir).map_err(|source| Error::Cache {
            path: dir.clone(),
            source,
        })?;
        check_dir(&dir)?;
        let mut hasher = ShaHasher(Sha256::new());
        std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
        let key = hex::encode(hasher.0.finalize());
        Ok(Self {
            dir,
            engine_key: key[..16].to_owned(),
        })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
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
            Ok(None) => return None,
            Err(reason) => {
                tracing::warn!(path = %path.display(), "refusing precompile cache entry: {reason}; compiling the component instead");
                let _ = std::fs::remove_file(&path);
                return None;
            }
        };
        // SAFETY: the bytes come from a file that only the engine's user
        // could write (checked above: directory and file ownership and
        // modes), whose header binds them to this component's sha256 and
        // whose code hash matches; entries are only written by `store`
        // below from `Engine::precompile_component`.
        match unsafe { Component::deserialize(engine, &code[HEADER..]) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "discarding unusable precompile cache entry");
                let _ = std::fs::remove_file(&path);
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
        if let Err(err) = result {
            tracing::warn!(path = %path.display(), error = %err, "cannot write precompile cache entry");
        }
    }
}

/// Reads and checks an entry: `Ok(None)` when there is none, `Err(why)`
/// when there is one that must not be used.
fn read_entry(path: &Path, sha256: &str) -> Result<Option<Vec<u8>>, String> {
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
    if meta.len() > MAX_ENTRY_BYTES {
        return Err(format!("it is {} bytes", meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_ENTRY_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
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
