//! The on-disk cache of pulled plugins: content-addressed, re-hashed on
//! every read, written only by the engine's user.
//!
//! ```text
//! DIR/                          0700, owned by the engine's user
//!   manifests/sha256/<hex>      a manifest as served; its sha256 is <hex>
//!   blobs/sha256/<hex>          a component; its sha256 is <hex>
//!   signatures/sha256/<hex>     the signatures that verified manifest <hex> (JSON)
//!   tags/<sha256 of the ref>    the digest a tag reference last resolved to (JSON)
//! ```
//!
//! A pinned reference is served from `manifests/` and `blobs/` without the
//! network; a tag reference falls back to the digest it last resolved to
//! when the registry is down ([`crate::Fetcher::fetch_cached`]).
//!
//! Whoever can write the cache chooses the code the engine runs, so:
//!
//! - the directory is created `0700`; an existing one must be a real
//!   directory (not a symlink) owned by the engine's user and not writable
//!   by group or others, or it is refused ([`Error::Unsafe`]);
//! - each file is written `0600` to a temporary name and renamed into
//!   place, so a reader never sees half a file;
//! - each file is opened without following a link and read only if it is a
//!   regular file owned by the engine's user, with no permission bits for
//!   group or others and a single link ([`Error::UnsafeEntry`]);
//! - a manifest or blob is hashed again when read, and refused (and
//!   removed) when its sha256 is not its name ([`Error::Tampered`]);
//!   signatures are checked again with the key by the caller.
//!
//! What this does not stop is a process running as the engine's own user.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::artifact::{Artifact, Manifest};
use crate::reference::{Digest, Reference};
use crate::signature::StoredSignature;

/// Why the cache, or one of its files, is refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory could be written by someone other than the engine's
    /// user.
    #[error("the registry cache {} is not safe: {reason}", path.display())]
    Unsafe {
        /// The directory.
        path: PathBuf,
        /// Why, and what to do.
        reason: String,
    },
    /// A file in the cache is not one the engine wrote.
    #[error("the registry cache file {} is refused: {reason}", path.display())]
    UnsafeEntry {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A manifest or blob whose sha256 is not its name: removed.
    #[error("the registry cache file {} was tampered with: its sha256 is {actual}, not {expected}; removed", path.display())]
    Tampered {
        /// The file.
        path: PathBuf,
        /// Its name.
        expected: Digest,
        /// Its content's digest.
        actual: Digest,
    },
    /// A cached file is over the caller's cap.
    #[error("the registry cache file {} is {size} bytes, over the cap of {limit}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// A cached manifest, tag or signature file that does not parse.
    #[error("the registry cache file {} is not what the engine wrote", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
    },
    /// An I/O error.
    #[error("the registry cache: cannot use {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A temporary file older than this at open was left by a crash.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Largest manifest, tag or signature file read.
const MAX_SMALL_FILE: u64 = 1 << 20;

const SUBDIRS: [&str; 4] = [
    "manifests/sha256",
    "blobs/sha256",
    "signatures/sha256",
    "tags",
];

/// The cache directory.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct TagEntry {
    reference: String,
    digest: String,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Checks that only the engine's user can write `dir`
/// ([`nodestatus_files::check_private_dir`]).
fn check_dir(dir: &Path) -> Result<()> {
    nodestatus_files::check_private_dir(dir).map_err(|e| match e {
        nodestatus_files::DirError::Io(source) => io(dir)(source),
        nodestatus_files::DirError::Unsafe(reason) => Error::Unsafe {
            path: dir.to_owned(),
            reason,
        },
    })
}

impl Cache {
    /// Opens (and creates, `0700`) the cache at `dir`; refuses a directory
    /// others could write. Removes temporary files a crash left behind.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io(&dir))?;
        check_dir(&dir)?;
        for sub in SUBDIRS {
            let sub = dir.join(sub);
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&sub)
                .map_err(io(&sub))?;
            check_dir(&sub)?;
            nodestatus_files::remove_stale_tmp(&sub, STALE_TMP);
        }
        Ok(Self { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn manifest_path(&self, digest: &Digest) -> PathBuf {
        self.dir.join("manifests/sha256").join(digest.hex())
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.dir.join("blobs/sha256").join(digest.hex())
    }

    fn signatures_path(&self, digest: &Digest) -> PathBuf {
        self.dir.join("signatures/sha256").join(digest.hex())
    }

    fn tag_path(&self, reference: &Reference) -> PathBuf {
        self.dir
            .join("tags")
            .join(Digest::of(reference.to_string().as_bytes()).hex())
    }

    /// Stores a pulled artifact (its manifest and its component).
    pub fn put(&self, artifact: &Artifact) -> Result<()> {
        write_atomic(&self.blob_path(&artifact.layer_digest), &artifact.bytes)?;
        write_atomic(&self.manifest_path(&artifact.digest), &artifact.manifest)
    }

    /// The artifact with manifest `digest`, if cached, as `reference` (the
    /// reference it is served for). Both files are hashed again; one that
    /// does not match its name is removed and refused. A component over
    /// `max_bytes` is refused without being read.
    pub fn get(
        &self,
        reference: &Reference,
        digest: &Digest,
        max_bytes: u64,
    ) -> Result<Option<Artifact>> {
        let manifest_path = self.manifest_path(digest);
        let Some(manifest_bytes) = read_checked(&manifest_path, MAX_SMALL_FILE)? else {
            return Ok(None);
        };
        check_digest(&manifest_path, digest, &manifest_bytes)?;
        let corrupt = || Error::Corrupt {
            path: manifest_path.clone(),
        };
        let manifest = Manifest::parse(&manifest_bytes)
            .ok()
            .and_then(Result::ok)
            .ok_or_else(corrupt)?;
        let (layout, layer) = manifest.component_layer().map_err(|_| corrupt())?;
        let layer_digest = layer.digest().map_err(|_| corrupt())?;
        let blob_path = self.blob_path(&layer_digest);
        let Some(bytes) = read_checked(&blob_path, max_bytes)? else {
            return Ok(None);
        };
        check_digest(&blob_path, &layer_digest, &bytes)?;
        Ok(Some(Artifact {
            reference: reference.clone(),
            digest: digest.clone(),
            layer_digest,
            layout,
            annotations: manifest.annotations.clone().unwrap_or_default(),
            bytes,
            manifest: manifest_bytes,
        }))
    }

    /// Records that the tag `reference` resolved to `digest`.
    pub fn put_tag(&self, reference: &Reference, digest: &Digest) -> Result<()> {
        let entry = TagEntry {
            reference: reference.to_string(),
            digest: digest.to_string(),
        };
        write_atomic(
            &self.tag_path(reference),
            &serde_json::to_vec(&entry).expect("json always serializes"),
        )
    }

    /// The digest the tag `reference` last resolved to, if recorded.
    pub fn tag(&self, reference: &Reference) -> Result<Option<Digest>> {
        let path = self.tag_path(reference);
        let Some(bytes) = read_checked(&path, MAX_SMALL_FILE)? else {
            return Ok(None);
        };
        match serde_json::from_slice::<TagEntry>(&bytes) {
            Ok(entry) if entry.reference == reference.to_string() => entry
                .digest
                .parse()
                .map(Some)
                .map_err(|_| Error::Corrupt { path }),
            _ => Err(Error::Corrupt { path }),
        }
    }

    /// Adds a signature that verified `digest` (kept once).
    pub fn put_signature(&self, digest: &Digest, signature: &StoredSignature) -> Result<()> {
        let mut all = self.signatures(digest)?;
        if all.contains(signature) {
            return Ok(());
        }
        all.push(signature.clone());
        write_atomic(
            &self.signatures_path(digest),
            &serde_json::to_vec(&all).expect("json always serializes"),
        )
    }

    /// The signatures that verified `digest` before (to be checked again
    /// with the key: the cache is not trusted for that).
    pub fn signatures(&self, digest: &Digest) -> Result<Vec<StoredSignature>> {
        let path = self.signatures_path(digest);
        match read_checked(&path, MAX_SMALL_FILE)? {
            None => Ok(Vec::new()),
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|_| Error::Corrupt { path }),
        }
    }
}

fn check_digest(path: &Path, expected: &Digest, bytes: &[u8]) -> Result<()> {
    let actual = Digest::of(bytes);
    if actual == *expected {
        return Ok(());
    }
    let _ = std::fs::remove_file(path);
    tracing::warn!(path = %path.display(), %expected, %actual, "removed a tampered registry cache file");
    Err(Error::Tampered {
        path: path.to_owned(),
        expected: expected.clone(),
        actual,
    })
}

/// Reads a cache file if it exists and passes the checks of
/// [`nodestatus_files::read_private`]: not a link, a regular file of the
/// engine's user, no permission for group or others, one link, at most
/// `max` bytes.
fn read_checked(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    use nodestatus_files::FileError;
    nodestatus_files::read_private(path, max).map_err(|e| match e {
        FileError::Io(source) => io(path)(source),
        FileError::TooLarge { size, limit } => Error::TooLarge {
            path: path.to_owned(),
            size,
            limit,
        },
        other => Error::UnsafeEntry {
            path: path.to_owned(),
            reason: other.to_string(),
        },
    })
}

/// Writes `bytes` to `path` (`0600`), atomically and durably
/// ([`nodestatus_files::write_atomic`]).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    nodestatus_files::write_atomic(path, bytes).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    use super::*;
    use crate::artifact::{CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE, Descriptor, Layout};

    fn artifact(bytes: &[u8]) -> Artifact {
        let manifest = Manifest {
            schema_version: 2,
            media_type: None,
            config: Descriptor::new(CNCF_CONFIG_MEDIA_TYPE, b"{}"),
            layers: vec![Descriptor::new(CNCF_LAYER_MEDIA_TYPE, bytes)],
            annotations: Some([("k".to_owned(), "v".to_owned())].into()),
        }
        .to_bytes();
        Artifact {
            reference: Reference::parse("localhost/gpu:1").unwrap(),
            digest: Digest::of(&manifest),
            layer_digest: Digest::of(bytes),
            layout: Layout::Cncf,
            annotations: [("k".to_owned(), "v".to_owned())].into(),
            bytes: bytes.to_vec(),
            manifest,
        }
    }

    #[test]
    fn an_artifact_and_a_tag_come_back_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path().join("c")).unwrap();
        let a = artifact(b"\0asm component");
        let r = a.reference.clone();
        assert!(cache.get(&r, &a.digest, 1 << 20).unwrap().is_none());
        cache.put(&a).unwrap();
        let got = cache.get(&r, &a.digest, 1 << 20).unwrap().unwrap();
        assert_eq!(
            (got.bytes, got.layer_digest, got.annotations),
            (
                a.bytes.clone(),
                a.layer_digest.clone(),
                a.annotations.clone()
            )
        );
        assert!(cache.tag(&r).unwrap().is_none());
        cache.put_tag(&r, &a.digest).unwrap();
        assert_eq!(cache.tag(&r).unwrap(), Some(a.digest.clone()));
        // The cap applies to the cache too.
        assert!(matches!(
            cache.get(&r, &a.digest, 4),
            Err(Error::TooLarge { .. })
        ));
        let mode = std::fs::metadata(dir.path().join("c/blobs/sha256").join(a.layer_digest.hex()))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_tampered_blob_or_manifest_is_refused_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let a = artifact(b"\0asm component");
        cache.put(&a).unwrap();
        let blob = dir.path().join("blobs/sha256").join(a.layer_digest.hex());
        std::fs::write(&blob, b"\0asm evil-code!").unwrap();
        let err = cache.get(&a.reference, &a.digest, 1 << 20).unwrap_err();
        assert!(matches!(err, Error::Tampered { .. }), "{err}");
        assert!(
            err.to_string().contains(&a.layer_digest.hex()[..12]),
            "{err}"
        );
        assert!(!blob.exists());
        cache.put(&a).unwrap();
        let manifest = dir.path().join("manifests/sha256").join(a.digest.hex());
        std::fs::write(&manifest, b"{}").unwrap();
        assert!(matches!(
            cache.get(&a.reference, &a.digest, 1 << 20),
            Err(Error::Tampered { .. })
        ));
    }

    #[test]
    fn a_directory_others_can_write_and_foreign_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("c");
        Cache::open(&c).unwrap();
        std::fs::set_permissions(&c, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = Cache::open(&c).unwrap_err();
        assert!(err.to_string().contains("chmod 700"), "{err}");
        std::fs::set_permissions(&c, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&c, &link).unwrap();
        assert!(matches!(Cache::open(&link), Err(Error::Unsafe { .. })));

        let cache = Cache::open(&c).unwrap();
        let a = artifact(b"\0asm component");
        cache.put(&a).unwrap();
        let blob = c.join("blobs/sha256").join(a.layer_digest.hex());
        std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            cache.get(&a.reference, &a.digest, 1 << 20),
            Err(Error::UnsafeEntry { .. })
        ));
        std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::hard_link(&blob, dir.path().join("second-link")).unwrap();
        assert!(matches!(
            cache.get(&a.reference, &a.digest, 1 << 20),
            Err(Error::UnsafeEntry { .. })
        ));
    }
}
