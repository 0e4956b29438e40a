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
//! # Bounded and aged
//!
//! A *version* is a manifest, its component and its signatures. Its last
//! use is its manifest file's modification time, set when it is stored and
//! each time it is served ([`Cache::get`]). [`Cache::collect`] removes the
//! versions the caller does not name as in use: first those unused for
//! longer than [`Limits::max_unused`], then the least recently used until
//! the cache holds at most [`Limits::max_bytes`] (what is in use stays,
//! even past it), and with them the tags that named them and the files
//! no version names (a crash's leftovers, once as old as the expiry).
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

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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

/// Largest manifest, tag or signature file read: the bound of a manifest
/// read from a registry.
const MAX_SMALL_FILE: u64 = crate::client::MAX_MANIFEST_BYTES;

const SUBDIRS: [&str; 4] = [
    "manifests/sha256",
    "blobs/sha256",
    "signatures/sha256",
    "tags",
];

/// The bounds of the cache ([`Cache::collect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes kept (what is in use stays, even past it).
    pub max_bytes: u64,
    /// How long a version not in use stays after its last use.
    pub max_unused: Duration,
}

/// The default [`Limits::max_bytes`]: 1 GiB, sixteen plugins at the
/// plugin file cap.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The default [`Limits::max_unused`]: a week.
pub const DEFAULT_MAX_UNUSED: Duration = Duration::from_secs(7 * 24 * 3600);

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            max_unused: DEFAULT_MAX_UNUSED,
        }
    }
}

/// What [`Cache::collect`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// The versions removed (their manifest digests), oldest use first.
    pub removed: Vec<Digest>,
    /// The bytes freed.
    pub freed: u64,
    /// The bytes the cache holds after.
    pub kept: u64,
}

/// One cached version, as [`Cache::collect`] weighs it.
struct Version {
    digest: Digest,
    last_use: SystemTime,
    /// Its component's digest, when its manifest names one.
    layer: Option<Digest>,
    /// Its manifest's and signatures' bytes (the component counted apart:
    /// two versions may share it).
    own_bytes: u64,
}

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

    /// Stores a pulled artifact (its manifest and its component); its use
    /// is now.
    pub fn put(&self, artifact: &Artifact) -> Result<()> {
        write_atomic(&self.blob_path(&artifact.layer_digest), &artifact.bytes)?;
        write_atomic(&self.manifest_path(&artifact.digest), &artifact.manifest)
    }

    /// Records a use of the version `digest` now (its manifest file's
    /// modification time), for [`Cache::collect`]. A version not cached is
    /// no error.
    pub fn touch(&self, digest: &Digest) {
        let path = self.manifest_path(digest);
        if let Ok(file) = std::fs::File::open(&path)
            && let Err(e) = file.set_modified(SystemTime::now())
        {
            tracing::debug!(path = %path.display(), "cannot record a use of a cached version: {e}");
        }
    }

    /// Removes the versions not in `in_use`: those last used more than
    /// `limits.max_unused` before `now`, then the least recently used until
    /// the cache holds at most `limits.max_bytes`; the tags that named a
    /// removed version; and the components, signatures and manifests no
    /// version names, once unused as long as the expiry. A version in
    /// `in_use` is never removed, whatever the bounds.
    pub fn collect(
        &self,
        in_use: &BTreeSet<Digest>,
        limits: &Limits,
        now: SystemTime,
    ) -> Result<Collected> {
        let expired = |t: SystemTime| now.duration_since(t).unwrap_or_default() > limits.max_unused;
        let mut versions = Vec::new();
        let mut blob_bytes: BTreeMap<Digest, (u64, SystemTime)> = BTreeMap::new();
        for (digest, meta) in self.entries("blobs/sha256")? {
            blob_bytes.insert(digest, (meta.len(), mtime(&meta)));
        }
        let signatures: BTreeMap<Digest, std::fs::Metadata> =
            self.entries("signatures/sha256")?.into_iter().collect();
        for (digest, meta) in self.entries("manifests/sha256")? {
            let path = self.manifest_path(&digest);
            let layer = read_checked(&path, MAX_SMALL_FILE)
                .ok()
                .flatten()
                .and_then(|bytes| Manifest::parse(&bytes).ok()?.ok())
                .and_then(|m| m.component_layer().ok()?.1.digest().ok());
            let own_bytes = meta.len() + signatures.get(&digest).map_or(0, |m| m.len());
            versions.push(Version {
                digest,
                last_use: mtime(&meta),
                layer,
                own_bytes,
            });
        }
        versions.sort_by_key(|v| v.last_use);
        // Each component's users among the versions kept so far.
        let mut users: BTreeMap<Digest, usize> = BTreeMap::new();
        for v in &versions {
            if let Some(l) = &v.layer {
                *users.entry(l.clone()).or_default() += 1;
            }
        }
        let mut total: u64 = versions.iter().map(|v| v.own_bytes).sum::<u64>()
            + blob_bytes
                .iter()
                .filter(|(d, _)| users.contains_key(d))
                .map(|(_, (n, _))| n)
                .sum::<u64>();
        let mut out = Collected::default();
        let mut gone: BTreeSet<Digest> = BTreeSet::new();
        for v in &versions {
            if in_use.contains(&v.digest) || (!expired(v.last_use) && total <= limits.max_bytes) {
                continue;
            }
            let mut freed = v.own_bytes;
            self.remove(&self.manifest_path(&v.digest));
            self.remove(&self.signatures_path(&v.digest));
            if let Some(l) = &v.layer {
                let n = users.get_mut(l).expect("counted");
                *n -= 1;
                if *n == 0 {
                    freed += blob_bytes.get(l).map_or(0, |(n, _)| *n);
                    self.remove(&self.blob_path(l));
                }
            }
            total = total.saturating_sub(freed);
            out.freed += freed;
            out.removed.push(v.digest.clone());
            gone.insert(v.digest.clone());
        }
        // What no version names: a crash between the writes of a pull, a
        // version's files removed by hand. Once as old as the expiry, so
        // that a pull under way keeps its component.
        let named: BTreeSet<&Digest> = versions.iter().map(|v| &v.digest).collect();
        for (d, (n, t)) in &blob_bytes {
            if !users.contains_key(d) && expired(*t) {
                self.remove(&self.blob_path(d));
                out.freed += n;
            }
        }
        for (d, meta) in &signatures {
            if !named.contains(d) && expired(mtime(meta)) {
                self.remove(&self.signatures_path(d));
                out.freed += meta.len();
            }
        }
        // The tags that named a version removed, or none cached once as
        // old as the expiry.
        for (name, meta) in self.entries("tags")? {
            let path = self.dir.join("tags").join(name.hex());
            let digest = read_checked(&path, MAX_SMALL_FILE)
                .ok()
                .flatten()
                .and_then(|b| serde_json::from_slice::<TagEntry>(&b).ok())
                .and_then(|e| e.digest.parse::<Digest>().ok());
            let orphan = digest.as_ref().is_none_or(|d| !named.contains(d));
            if digest.is_some_and(|d| gone.contains(&d)) || (orphan && expired(mtime(&meta))) {
                self.remove(&path);
            }
        }
        out.kept = total;
        Ok(out)
    }

    /// The files of `sub` named by a digest's hex, with their metadata
    /// (not following links; anything else is skipped).
    fn entries(&self, sub: &str) -> Result<Vec<(Digest, std::fs::Metadata)>> {
        Ok(self
            .files(sub)?
            .into_iter()
            .filter_map(|(path, meta)| {
                let name = path.file_name()?.to_str()?;
                let digest = format!("sha256:{name}").parse().ok()?;
                Some((digest, meta))
            })
            .collect())
    }

    /// The regular files of `sub`, with their metadata.
    fn files(&self, sub: &str) -> Result<Vec<(PathBuf, std::fs::Metadata)>> {
        let dir = self.dir.join(sub);
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let entry = entry.map_err(io(&dir))?;
            if let Ok(meta) = entry.metadata()
                && meta.is_file()
            {
                out.push((entry.path(), meta));
            }
        }
        Ok(out)
    }

    fn remove(&self, path: &Path) {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot remove a registry cache file: {e}")
            }
        }
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
        self.touch(digest);
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

fn mtime(meta: &std::fs::Metadata) -> SystemTime {
    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)
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

    /// Sets the last use of the version `digest` to `ago` before now.
    fn used_ago(cache: &Cache, digest: &Digest, ago: Duration) {
        std::fs::File::open(cache.manifest_path(digest))
            .unwrap()
            .set_modified(SystemTime::now() - ago)
            .unwrap();
    }

    fn cached(cache: &Cache, a: &Artifact) -> bool {
        cache
            .get(&a.reference, &a.digest, 1 << 20)
            .unwrap()
            .is_some()
    }

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[test]
    fn a_version_unused_past_the_expiry_goes_unless_it_is_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let (old, running, fresh) = (
            artifact(b"\0asm old"),
            artifact(b"\0asm running"),
            artifact(b"\0asm fresh"),
        );
        for a in [&old, &running, &fresh] {
            cache.put(a).unwrap();
        }
        let tag = Reference::parse("localhost/gpu:old").unwrap();
        cache.put_tag(&tag, &old.digest).unwrap();
        used_ago(&cache, &old.digest, 8 * DAY);
        used_ago(&cache, &running.digest, 30 * DAY);
        used_ago(&cache, &fresh.digest, DAY);
        let in_use = BTreeSet::from([running.digest.clone()]);
        let limits = Limits::default();
        let c = cache.collect(&in_use, &limits, SystemTime::now()).unwrap();
        assert_eq!(c.removed, std::slice::from_ref(&old.digest));
        assert!(c.freed as usize > old.bytes.len(), "{c:?}");
        assert!(!cached(&cache, &old));
        assert!(
            !dir.path()
                .join("blobs/sha256")
                .join(old.layer_digest.hex())
                .exists()
        );
        // The tag that named it goes too: a start offline finds no version.
        assert_eq!(cache.tag(&tag).unwrap(), None);
        assert!(cached(&cache, &running) && cached(&cache, &fresh));
        // Served (get) is used: a read now keeps it another expiry.
        used_ago(&cache, &fresh.digest, 8 * DAY);
        assert!(cached(&cache, &fresh));
        let c = cache
            .collect(&BTreeSet::new(), &limits, SystemTime::now())
            .unwrap();
        assert!(c.removed.is_empty(), "{c:?}");
    }

    #[test]
    fn past_the_size_bound_the_least_recently_used_go_first_and_what_runs_stays() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let big = |seed: u8| {
            let mut bytes = b"\0asm".to_vec();
            bytes.extend(std::iter::repeat_n(seed, 10_000));
            artifact(&bytes)
        };
        let (a, b, c, d) = (big(1), big(2), big(3), big(4));
        for (i, x) in [&a, &b, &c, &d].into_iter().enumerate() {
            cache.put(x).unwrap();
            used_ago(&cache, &x.digest, Duration::from_secs(100 - i as u64 * 10));
        }
        // Room for two versions; `a`, the oldest, runs.
        let limits = Limits {
            max_bytes: 25_000,
            max_unused: DAY,
        };
        let in_use = BTreeSet::from([a.digest.clone()]);
        let out = cache.collect(&in_use, &limits, SystemTime::now()).unwrap();
        assert_eq!(out.removed, [b.digest.clone(), c.digest.clone()]);
        assert!(out.kept <= limits.max_bytes, "{out:?}");
        assert!(cached(&cache, &a) && cached(&cache, &d));
        assert!(!cached(&cache, &b) && !cached(&cache, &c));
        // A bound smaller than what runs: what runs stays.
        let tiny = Limits {
            max_bytes: 1,
            max_unused: DAY,
        };
        let in_use = BTreeSet::from([a.digest.clone(), d.digest.clone()]);
        let out = cache.collect(&in_use, &tiny, SystemTime::now()).unwrap();
        assert!(out.removed.is_empty(), "{out:?}");
        assert!(cached(&cache, &a) && cached(&cache, &d));
    }

    #[test]
    fn a_component_two_versions_share_stays_while_one_of_them_does() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let a = artifact(b"\0asm shared");
        // The same component under another manifest (another annotation).
        let mut b = a.clone();
        b.manifest = Manifest {
            schema_version: 2,
            media_type: None,
            config: Descriptor::new(CNCF_CONFIG_MEDIA_TYPE, b"{}"),
            layers: vec![Descriptor::new(CNCF_LAYER_MEDIA_TYPE, &a.bytes)],
            annotations: None,
        }
        .to_bytes();
        b.digest = Digest::of(&b.manifest);
        cache.put(&a).unwrap();
        cache.put(&b).unwrap();
        used_ago(&cache, &a.digest, 10 * DAY);
        let out = cache
            .collect(&BTreeSet::new(), &Limits::default(), SystemTime::now())
            .unwrap();
        assert_eq!(out.removed, std::slice::from_ref(&a.digest));
        assert!(cached(&cache, &b));
        // Left by a crash: a component no version names, once expired.
        let orphan = dir.path().join("blobs/sha256").join(Digest::of(b"x").hex());
        std::fs::write(&orphan, b"x").unwrap();
        let later = SystemTime::now() + 10 * DAY;
        let out = cache
            .collect(
                &BTreeSet::from([b.digest.clone()]),
                &Limits::default(),
                later,
            )
            .unwrap();
        assert!(out.removed.is_empty());
        assert!(!orphan.exists());
        assert!(cached(&cache, &b));
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
