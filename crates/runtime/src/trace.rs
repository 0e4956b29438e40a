//! What one call read, so that a caller can tell whether calling it again
//! could answer anything else: a verifying trace (Mokhov, Mitchell and
//! Peyton Jones, "Build systems à la carte": verifying traces with early
//! cutoff).
//!
//! The host serves every way a guest reaches the world, so it records each
//! one as the guest takes it:
//!
//! - a host function of `nodestatus:plugin/host` (its name, arguments and
//!   a fingerprint of its answer);
//! - a file opened (its metadata, and its text when it is small: every
//!   procfs and sysfs file is), a file or directory stat'ed, a directory
//!   listed (its entries' names and types), and a file of a filtered
//!   `/proc` (the pass's copy of it), each by the host path the kernel
//!   resolved, with a fingerprint of what the guest could see;
//! - the clocks and randomness of WASI: a call that reads either is
//!   [`Unrepeatable`], whatever else it read.
//!
//! [`Plugin::inputs_changed`](crate::Plugin::inputs_changed) asks the
//! same questions again, of the next pass's facts and files: a trace whose
//! every answer is the same says
//! that the call, given the same node, would return the same result. The
//! node, the plugin's code and its settings are the caller's to compare.
//!
//! Fingerprints are 64-bit SipHash with a key drawn once per process, so
//! that no plugin or actor writing the node can aim for a collision.

use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Files up to this size are fingerprinted by their text as well as their
/// metadata (procfs files say 0 bytes, sysfs files 4096): a change that
/// keeps the size and lands within the file system's timestamp tick is
/// still seen.
pub const TEXT_PRINT_BYTES: u64 = 64 << 10;

/// A file opened above [`TEXT_PRINT_BYTES`] and changed this recently
/// (by its mtime or ctime) is not trusted by its metadata alone: two writes
/// within one tick of the file system's clock leave the same times (git's
/// "racily clean" entries). Its call is then not repeated.
pub const RACY_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a call's result cannot stand for the next call, whatever its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Unrepeatable {
    /// It read a WASI clock (the time, or a sleep).
    Clock,
    /// It read WASI's random bytes or numbers (secure or insecure).
    Random,
    /// Its instance is kept between calls (`reuseInstance`): it may carry
    /// state from one call to the next.
    KeptInstance,
    /// It reached something the host does not trace (a path the kernel
    /// could not name, a large file just changed).
    Untraced,
}

impl Unrepeatable {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clock => "clock",
            Self::Random => "random",
            Self::KeptInstance => "kept-instance",
            Self::Untraced => "untraced",
        }
    }
}

/// A host function of `nodestatus:plugin/host` a call asked, with its
/// arguments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum HostRead {
    Config,
    System,
    Interfaces,
    Statvfs(String),
    NodeProblems,
    ContainerRuntime,
}

/// How a call reached a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    /// Opened (and perhaps read): its metadata and, when small, its text.
    Open,
    /// Stat'ed, following a last symlink or not.
    Stat { follow: bool },
    /// A directory listed: its entries' names and types.
    List,
    /// A symlink read: its target.
    Link,
}

/// One thing a call read (its fingerprint is kept beside it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Read {
    Host(HostRead),
    File(PathBuf, Access),
    /// File `index` of [`crate::proc_view::PROC_FILES`] in the pass's
    /// filtered view of the procfs root `from` (a grant's host path).
    Proc(PathBuf, usize),
}

/// What one call read (see the [module docs](self)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Each thing read once, with the fingerprint of what the call saw at
    /// its first read.
    reads: std::collections::HashMap<Read, u64>,
    unrepeatable: Option<Unrepeatable>,
}

impl Trace {
    /// Why the call cannot stand for the next one, if it cannot.
    pub fn unrepeatable(&self) -> Option<Unrepeatable> {
        self.unrepeatable
    }

    /// How many distinct things it read.
    pub fn reads(&self) -> usize {
        self.reads.len()
    }

    /// Marks the call unrepeatable (the first reason stays).
    pub fn mark(&mut self, why: Unrepeatable) {
        self.unrepeatable.get_or_insert(why);
    }

    /// Records `read`, once, with the fingerprint `print` gives (`None`:
    /// it cannot be told, and the call is untraced). Nothing is recorded
    /// once the call is unrepeatable: no one will ask again.
    fn record(&mut self, read: Read, print: impl FnOnce() -> Option<u64>) {
        if self.unrepeatable.is_some() || self.reads.contains_key(&read) {
            return;
        }
        match print() {
            Some(p) => {
                self.reads.insert(read, p);
            }
            None => self.mark(Unrepeatable::Untraced),
        }
    }

    /// Records a host function's answer.
    pub(crate) fn host(&mut self, read: HostRead, answer: &impl std::fmt::Debug) {
        self.record(Read::Host(read), || Some(print_debug(answer)));
    }

    /// Records a file reached at the host path `path`.
    pub(crate) fn file(&mut self, path: PathBuf, access: Access) {
        let at = path.clone();
        self.record(Read::File(path, access), move || print_file(&at, access));
    }

    /// Records file `index` of the filtered view of the procfs root `from`,
    /// whose copy for this pass is at `copy`.
    pub(crate) fn proc_file(&mut self, from: &Path, index: usize, copy: &Path) {
        self.record(Read::Proc(from.to_owned(), index), || {
            print_file(copy, Access::Open)
        });
    }

    /// The first thing the call read that would now read otherwise:
    /// `host` answers a host function as the next call would, `proc_copy`
    /// gives the next pass's copy of a filtered `/proc` file. `None`: every
    /// answer is the same.
    pub(crate) fn first_change(
        &self,
        mut host: impl FnMut(&HostRead) -> u64,
        mut proc_copy: impl FnMut(&Path, usize) -> Option<PathBuf>,
    ) -> Option<String> {
        self.reads.iter().find_map(|(read, print)| match read {
            Read::Host(h) => (host(h) != *print).then(|| format!("host {h:?}")),
            Read::File(path, access) => (print_file(path, *access) != Some(*print))
                .then(|| format!("{access:?} {}", path.display())),
            Read::Proc(from, i) => {
                let same = proc_copy(from, *i)
                    .and_then(|copy| print_file(&copy, Access::Open))
                    .is_some_and(|p| p == *print);
                (!same).then(|| format!("{}/{}", from.display(), crate::proc_view::PROC_FILES[*i]))
            }
        })
    }
}

/// A hasher keyed once per process.
pub fn hasher() -> impl Hasher {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    KEYS.get_or_init(RandomState::new).build_hasher()
}

/// A [`Hasher`] that text can be written into.
struct TextHasher<H>(H);

impl<H: Hasher> std::fmt::Write for TextHasher<H> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

/// The fingerprint of a host function's answer, by its `Debug` text
/// (every field, in order).
pub(crate) fn print_debug(v: &impl std::fmt::Debug) -> u64 {
    let mut h = TextHasher(hasher());
    let _ = write!(h, "{v:?}");
    h.0.finish()
}

/// The fingerprint of what a guest could see of `path` by `access`:
/// `None` when it cannot be told (a large file changed within
/// [`RACY_WINDOW`]). A path that cannot be read has a fingerprint too (its
/// error's kind): a file that appears later changes it.
fn print_file(path: &Path, access: Access) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut h = hasher();
    let meta = match access {
        Access::Stat { follow: false } | Access::Link => std::fs::symlink_metadata(path),
        _ => std::fs::metadata(path),
    };
    let meta = match meta {
        Ok(m) => m,
        Err(e) => {
            h.write_u8(0);
            h.write(format!("{:?}", e.kind()).as_bytes());
            return Some(h.finish());
        }
    };
    h.write_u8(1);
    for v in [
        meta.dev(),
        meta.ino(),
        u64::from(meta.mode()),
        meta.size(),
        meta.nlink(),
        u64::from(meta.uid()),
        u64::from(meta.gid()),
    ] {
        h.write_u64(v);
    }
    for v in [
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ] {
        h.write_i64(v);
    }
    match access {
        Access::Stat { .. } => {}
        Access::Link => {
            use std::os::unix::ffi::OsStrExt;
            if let Ok(target) = std::fs::read_link(path) {
                h.write(target.as_os_str().as_bytes());
            }
        }
        Access::List if meta.is_dir() => {
            let mut names: Vec<(Vec<u8>, Option<u32>)> = std::fs::read_dir(path)
                .ok()?
                .filter_map(Result::ok)
                .map(|e| {
                    use std::os::unix::ffi::OsStrExt;
                    use std::os::unix::fs::FileTypeExt;
                    let kind = e.file_type().ok().map(|t| {
                        u32::from(t.is_dir())
                            | u32::from(t.is_symlink()) << 1
                            | u32::from(t.is_fifo()) << 2
                            | u32::from(t.is_socket()) << 3
                            | u32::from(t.is_char_device()) << 4
                            | u32::from(t.is_block_device()) << 5
                    });
                    (e.file_name().as_bytes().to_vec(), kind)
                })
                .collect();
            names.sort();
            for (name, kind) in names {
                h.write(&name);
                h.write_u8(0);
                h.write_u32(kind.unwrap_or(u32::MAX));
            }
        }
        Access::List => {}
        Access::Open if !meta.is_file() => {}
        Access::Open if meta.size() <= TEXT_PRINT_BYTES => {
            // procfs and sysfs files say 0 or 4096 bytes whatever they
            // hold: read up to the bound and one byte past it.
            let mut text = Vec::with_capacity(meta.size() as usize + 1);
            let file = std::fs::File::open(path).ok()?;
            file.take(TEXT_PRINT_BYTES + 1)
                .read_to_end(&mut text)
                .ok()?;
            if text.len() as u64 > TEXT_PRINT_BYTES {
                return None;
            }
            h.write(&text);
        }
        Access::Open => {
            let now = std::time::SystemTime::now();
            let recent = |secs: i64, nsec: i64| {
                let t = std::time::UNIX_EPOCH
                    + std::time::Duration::new(
                        secs.max(0) as u64,
                        nsec.clamp(0, 999_999_999) as u32,
                    );
                now.duration_since(t).map_or(true, |age| age < RACY_WINDOW)
            };
            if recent(meta.mtime(), meta.mtime_nsec()) || recent(meta.ctime(), meta.ctime_nsec()) {
                return None;
            }
        }
    }
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unchanged(t: &Trace) -> bool {
        t.first_change(|_| unreachable!(), |_, _| None).is_none()
    }

    #[test]
    fn a_small_files_text_change_is_seen_even_with_the_same_times() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("meminfo");
        std::fs::write(&f, "MemTotal: 1 kB\n").unwrap();
        let mut t = Trace::default();
        t.file(f.clone(), Access::Open);
        assert!(unchanged(&t));
        let times = std::fs::metadata(&f).unwrap().modified().unwrap();
        std::fs::write(&f, "MemTotal: 2 kB\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(times)
            .unwrap();
        assert_eq!(
            t.first_change(|_| 0, |_, _| None).as_deref(),
            Some(format!("Open {}", f.display()).as_str())
        );
    }

    #[test]
    fn a_file_that_appears_or_an_entry_added_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("later");
        let mut t = Trace::default();
        t.file(missing.clone(), Access::Open);
        t.file(dir.path().to_owned(), Access::List);
        assert!(unchanged(&t));
        std::fs::write(&missing, "x").unwrap();
        assert!(!unchanged(&t));

        let mut listed = Trace::default();
        listed.file(dir.path().to_owned(), Access::List);
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(!unchanged(&listed));
    }

    #[test]
    fn a_large_file_changed_just_now_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("big");
        std::fs::write(&f, vec![b'x'; TEXT_PRINT_BYTES as usize + 1]).unwrap();
        let mut t = Trace::default();
        t.file(f, Access::Open);
        assert_eq!(t.unrepeatable(), Some(Unrepeatable::Untraced));
    }

    #[test]
    fn a_host_answer_is_compared_and_recorded_once() {
        let mut t = Trace::default();
        t.host(HostRead::Statvfs("/".into()), &42u64);
        t.host(HostRead::Statvfs("/".into()), &43u64);
        assert_eq!(t.reads(), 1);
        assert!(
            t.first_change(|_| print_debug(&42u64), |_, _| None)
                .is_none()
        );
        assert!(
            t.first_change(|_| print_debug(&43u64), |_, _| None)
                .is_some()
        );
    }

    #[test]
    fn nothing_is_recorded_once_the_call_is_unrepeatable() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Trace::default();
        t.file(dir.path().to_owned(), Access::List);
        t.mark(Unrepeatable::Clock);
        t.file(dir.path().join("x"), Access::Open);
        t.host(HostRead::System, &1u8);
        assert_eq!(t.reads(), 1);
    }

    #[test]
    fn the_first_reason_to_call_again_stays() {
        let mut t = Trace::default();
        t.mark(Unrepeatable::Clock);
        t.mark(Unrepeatable::Random);
        assert_eq!(t.unrepeatable(), Some(Unrepeatable::Clock));
    }
}
