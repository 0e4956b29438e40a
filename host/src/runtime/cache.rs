//! The precompile cache: native code for each plugin, keyed by the sha256 of
//! the component and the engine's compatibility hash.
//!
//! Deserializing precompiled code trusts it completely, so the cache lives in
//! a directory the host owns (created `0700`), never in the plugin directory,
//! and entries are written with write-then-rename so that a crash cannot leave
//! a torn file under a valid name.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::{Error, Result};

/// A directory of `.cwasm` files.
#[derive(Debug, Clone)]
pub struct PrecompileCache {
    dir: PathBuf,
    engine_key: String,
}

impl PrecompileCache {
    /// Opens (and creates, owner-only) the cache directory for `engine`.
    pub fn open(dir: PathBuf, engine: &Engine) -> Result<Self> {
        create_private_dir(&dir).map_err(|source| Error::Cache {
            path: dir.clone(),
            source,
        })?;
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(Self {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_key))
    }

    /// Loads the component for `sha256` from the cache, if present and
    /// compatible. A corrupt or incompatible entry is removed and `None` is
    /// returned, so the caller compiles afresh.
    pub fn load(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.entry(sha256);
        if !path.exists() {
            return None;
        }
        // SAFETY: the cache directory is owned by the host and not writable by
        // plugins; entries are only ever written by `store` below from the
        // output of `Engine::precompile_component`, keyed by content hash and
        // engine compatibility.
        match unsafe { Component::deserialize_file(engine, &path) } {
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
        let path = self.entry(sha256);
        let result = (|| -> std::io::Result<()> {
            let mut tmp = tempfile_in(&self.dir)?;
            tmp.1.write_all(code)?;
            tmp.1.sync_all()?;
            std::fs::rename(&tmp.0, &path)
        })();
        if let Err(err) = result {
            tracing::warn!(path = %path.display(), error = %err, "cannot write precompile cache entry");
        }
    }
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
