//! A granted `/proc` is a filtered view, never the host process itself.
//!
//! Preopening `/proc` would hand a plugin `/proc/self` (the engine's own
//! environment, memory maps and file descriptors, where the kubeconfig token
//! lives) and every other process's directory. Instead, a grant whose host
//! directory is the root of a procfs mount is served as:
//!
//! - a snapshot directory holding copies of the system-wide files that
//!   setters read ([`PROC_FILES`]: `meminfo`, `loadavg`, `stat`, `cpuinfo`,
//!   the kernel's build config `config.gz`, ...), shared by the pass's setters (it lives in the pass's
//!   [`Facts`](super::facts::Facts)). A file is copied at its first open in
//!   the pass, by any of the pass's setters, and every later open of it in
//!   the pass sees that copy: one pass sees one text of each file, and a
//!   pass reads only the files its setters open (the default setters open
//!   two of the thirteen). The host sees each open because it serves the
//!   guest's `open-at` itself: `host_api` wraps wasmtime-wasi's, and copies
//!   the file (`Snapshot::copy`) before wasmtime-wasi opens it, beneath
//!   the directory and read-only as before. A plugin whose instance is kept
//!   (`reuseInstance`) may hold a copy open from an earlier pass: the files
//!   it opened before are copied again when its store is readied for the
//!   next pass. The directory itself is kept from pass to pass by the fact
//!   source and refreshed in place, writing only the files whose text
//!   changed, and
//! - the system-wide subdirectories ([`PROC_DIRS`]: `sys`, `pressure`,
//!   `net`) preopened read-only at their own guest paths (`/proc/sys`,
//!   ...). WASI guests resolve a path through the longest preopen that
//!   holds it, so `/proc/sys/kernel/pid_max` is read live. These are the
//!   kernel's own tables: a read of them never waits on a driver or a
//!   device, so the call reads them on its own thread (see
//!   [`ProcGrant::may_block`]).
//!
//! `/proc/self`, `/proc/thread-self`, `/proc/<pid>`, `/proc/*/environ`,
//! `/proc/kcore`, `/proc/mounts` (a link into `self`) and everything else
//! not listed are simply absent. `net` is the engine's network namespace's
//! tables (routes, interfaces: the node's own when the engine runs with the
//! host network), which the node-address setter needs; it holds no process
//! data.
//!
//! A grant of a procfs subdirectory is allowed only below `/proc/sys`,
//! `/proc/pressure` or `/proc/driver` (never `/proc/self` or `/proc/1`): any
//! other is refused. `/proc/driver` is not part of a `/proc` grant: its files
//! are answered by drivers' code, which may wait on a device, so a plugin
//! that reads them (the GPU reporter's `/proc/driver/nvidia`) is granted
//! that directory on its own, and its calls run where a read that never
//! returns cannot hold the pass. A grant of a directory that holds a
//! procfs mount just below it (`/`, `/host`) would reach `/proc/self`
//! through it, so it serves host facts only (`statvfs` inside it) and is not
//! opened for reading; the plugin is told so in its withheld list. The
//! default setters that ask for `/` use it only for `statvfs`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The top-level `/proc` files a filtered view copies.
pub const PROC_FILES: &[&str] = &[
    "config.gz",
    "cpuinfo",
    "diskstats",
    "filesystems",
    "loadavg",
    "meminfo",
    "partitions",
    "stat",
    "swaps",
    "uptime",
    "version",
    "vmstat",
    "zoneinfo",
];

/// The `/proc` subdirectories a filtered view serves live: the kernel's own
/// tables.
pub const PROC_DIRS: &[&str] = &["sys", "pressure", "net"];

/// Largest copy of one `/proc` file in a snapshot (`cpuinfo` on a big
/// machine is a few hundred KiB).
const MAX_PROC_FILE: u64 = 4 << 20;

/// What a granted host directory is, as far as procfs goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcGrant {
    /// Not procfs, and holds no procfs mount just below it: preopen as is.
    Plain,
    /// A sysfs directory at or below `kernel/mm` of its mount
    /// (`/sys/kernel/mm/hugepages`): the kernel's memory-management tables,
    /// which no driver or device answers. Preopen as is.
    KernelMm,
    /// The root of a procfs mount: serve the filtered view.
    Root,
    /// A procfs directory below `/proc/sys` or `/proc/pressure`: preopen as
    /// is.
    Allowed,
    /// A procfs directory below `/proc/driver`: preopen as is.
    Driver,
    /// Holds a procfs mount just below it: host facts only, no preopen.
    HoldsProc,
    /// Refused, with the reason.
    Refused(String),
}

/// Whether `path` is on a file system of type `magic` (`statfs`'s `f_type`).
fn is_fs(path: &Path, magic: i64) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct on success.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == magic
    }
}

fn is_procfs(path: &Path) -> bool {
    is_fs(path, libc::PROC_SUPER_MAGIC)
}

fn is_tmpfs(path: &Path) -> bool {
    is_fs(path, libc::TMPFS_MAGIC)
}

/// Whether `path` is a sysfs directory at or below `kernel/mm` of the sysfs
/// mount that holds it (resolved: a link out of it does not count).
fn is_kernel_mm(path: &Path) -> bool {
    const SYSFS_MAGIC: i64 = 0x6265_6572;
    if !is_fs(path, SYSFS_MAGIC) {
        return false;
    }
    let Ok(real) = path.canonicalize() else {
        return false;
    };
    // The mount's root: the last ancestor still on sysfs.
    let Some(root) = real
        .ancestors()
        .take_while(|a| is_fs(a, SYSFS_MAGIC))
        .last()
    else {
        return false;
    };
    real.strip_prefix(root)
        .is_ok_and(|rest| rest.starts_with("kernel/mm"))
}

/// Where snapshot directories are made: the first of the temp dir
/// (`$TMPDIR`, else `/tmp`; the DaemonSet mounts a memory `emptyDir` there)
/// and `/dev/shm` that is a tmpfs, so that refreshing a snapshot every pass
/// writes to memory, never to a disk; else the temp dir.
fn base_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    [tmp.clone(), PathBuf::from("/dev/shm")]
        .into_iter()
        .find(|d| is_tmpfs(d))
        .unwrap_or(tmp)
}

fn is_proc_root(path: &Path) -> bool {
    is_procfs(path)
        && std::fs::symlink_metadata(path.join("self")).is_ok_and(|m| m.file_type().is_symlink())
        && path.join("meminfo").is_file()
}

impl ProcGrant {
    /// Whether a read inside what it preopens may wait on something other
    /// than the kernel's own tables (a device, a driver, a FIFO, a network
    /// mount), and so may never return.
    pub fn may_block(&self) -> bool {
        match self {
            Self::Plain | Self::Driver => true,
            // A snapshot the host wrote, and the kernel's tables.
            Self::Root | Self::Allowed | Self::KernelMm => false,
            // Nothing preopened.
            Self::HoldsProc | Self::Refused(_) => false,
        }
    }
}

/// Classifies the host directory `from` of a grant.
pub fn classify(from: &Path) -> ProcGrant {
    if !is_procfs(from) {
        if is_proc_root(&from.join("proc")) {
            return ProcGrant::HoldsProc;
        }
        if is_kernel_mm(from) {
            return ProcGrant::KernelMm;
        }
        return ProcGrant::Plain;
    }
    if is_proc_root(from) {
        return ProcGrant::Root;
    }
    let Ok(real) = from.canonicalize() else {
        return ProcGrant::Refused(format!("{} cannot be resolved", from.display()));
    };
    let root = real.ancestors().skip(1).find(|a| is_proc_root(a));
    let first = root
        .and_then(|r| real.strip_prefix(r).ok())
        .and_then(|rest| rest.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    match first.as_deref() {
        Some("sys" | "pressure") => ProcGrant::Allowed,
        Some("driver") => ProcGrant::Driver,
        _ => ProcGrant::Refused(format!(
            "{} (resolved to {}) is not below one of the system-wide /proc directories sys, pressure or driver: process directories are never granted",
            from.display(),
            real.display()
        )),
    }
}

/// The snapshot directories of one fact source (one node's passes), kept
/// from pass to pass: a pass refreshes a directory in place, writing only the
/// files whose text changed, instead of creating a directory and a dozen
/// files and removing them again (which cost more than the rest of the host's
/// work in a pass). Each directory serves one pass at a time. The directories
/// are removed when the pool is dropped.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    idle: Mutex<Vec<Dir>>,
    /// `/proc` files read into the pool's directories, all passes together.
    reads: AtomicU64,
}

/// Idle directories kept per pool (one per procfs root in use, and one for a
/// pass that overlaps another).
const MAX_IDLE: usize = 4;

/// One snapshot directory, with what its files hold now.
#[derive(Debug)]
struct Dir {
    /// The procfs root it copies.
    from: PathBuf,
    path: PathBuf,
    /// The directory's device and inode: how a guest's descriptor of it is
    /// told apart from its other directories.
    id: (u64, u64),
    /// Per entry of [`PROC_FILES`]: the procfs file, kept open and read
    /// again from its start at each refresh.
    sources: Vec<Option<std::fs::File>>,
    /// Per entry of [`PROC_FILES`]: the copy, open for writing, and its text.
    files: Vec<Option<(std::fs::File, Vec<u8>)>>,
}

impl Dir {
    /// A fresh owner-only directory in [`base_dir`] (in the temp dir when
    /// it cannot be made there), with an empty directory for each of
    /// [`PROC_DIRS`] and an empty copy of each of [`PROC_FILES`] that the
    /// procfs root has, so that listing `/proc` shows them before a setter
    /// opens one (an empty size, as procfs itself gives).
    fn create(from: &Path) -> io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let name = format!(
            "nodestatus-proc-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        );
        let make = |base: PathBuf| {
            let path = base.join(&name);
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&path)
                .map(|()| path)
        };
        let base = base_dir();
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep(&base));
        let path = make(base).or_else(|_| make(std::env::temp_dir()))?;
        let meta = std::fs::metadata(&path)?;
        let mut dir = Self {
            from: from.to_owned(),
            id: (meta.dev(), meta.ino()),
            path,
            sources: PROC_FILES.iter().map(|_| None).collect(),
            files: PROC_FILES.iter().map(|_| None).collect(),
        };
        for d in PROC_DIRS {
            std::fs::create_dir(dir.path.join(d))?;
        }
        for (i, name) in PROC_FILES.iter().enumerate() {
            if let Ok(source) = std::fs::File::open(from.join(name)) {
                let copy = std::fs::File::create(dir.path.join(name))?;
                dir.sources[i] = Some(source);
                dir.files[i] = Some((copy, Vec::new()));
            }
        }
        Ok(dir)
    }

    /// Copies the file `i` of [`PROC_FILES`] from the procfs root (at most
    /// [`MAX_PROC_FILE`] bytes), writing the copy only when its text
    /// changed; `text` is scratch space.
    fn refresh(&mut self, i: usize, text: &mut Vec<u8>) -> io::Result<()> {
        use std::io::{Read, Seek};
        use std::os::unix::fs::FileExt;
        let (name, source, slot) = (PROC_FILES[i], &mut self.sources[i], &mut self.files[i]);
        text.clear();
        if source.is_none() {
            *source = std::fs::File::open(self.from.join(name)).ok();
        }
        let read = match source {
            Some(f) => f
                .rewind()
                .and_then(|()| f.take(MAX_PROC_FILE).read_to_end(text)),
            None => Err(io::ErrorKind::NotFound.into()),
        };
        if read.is_err() {
            // Opened again at the next refresh.
            *source = None;
        }
        let to = self.path.join(name);
        match (read, slot.as_mut()) {
            (Err(_), None) => {}
            (Err(_), Some(_)) => {
                // Gone from the host: gone from the view.
                *slot = None;
                std::fs::remove_file(&to)?;
            }
            (Ok(_), Some((_, old))) if old == text => {}
            (Ok(_), Some((file, old))) => {
                file.write_all_at(text, 0)?;
                if text.len() < old.len() {
                    file.set_len(text.len() as u64)?;
                }
                old.clone_from(text);
            }
            (Ok(_), None) => {
                let file = std::fs::File::create(&to)?;
                file.write_all_at(text, 0)?;
                *slot = Some((file, text.clone()));
            }
        }
        Ok(())
    }
}

/// Removes the snapshot directories in `base` that a process no longer
/// running left (one killed before it could remove its own, which on a
/// tmpfs would hold memory until the machine restarts): ours by owner, and
/// never followed through a link.
fn sweep(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("nodestatus-proc-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let ours = std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if ours && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

impl Pool {
    /// A snapshot of the procfs root `from` for one pass, in a directory of
    /// the pool. No file is read yet: each is copied at its first
    /// [`Snapshot::copy`] in the pass.
    pub fn take(self: &Arc<Self>, from: &Path) -> io::Result<Snapshot> {
        let reused = {
            let mut idle = self.idle.lock().expect("proc view pool lock");
            idle.iter()
                .position(|d| d.from == from)
                .map(|i| idle.swap_remove(i))
        };
        let dir = match reused {
            Some(dir) => dir,
            None => Dir::create(from)?,
        };
        let live = PROC_DIRS
            .iter()
            .copied()
            .filter(|d| from.join(d).is_dir())
            .collect();
        Ok(Snapshot {
            path: dir.path.clone(),
            id: dir.id,
            live,
            pass: Mutex::new(Pass {
                dir: Some(dir),
                copied: [false; PROC_FILES.len()],
                text: Vec::new(),
            }),
            pool: self.clone(),
        })
    }

    /// How many `/proc` files the pool's snapshots have read, in all.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

/// The index in [`PROC_FILES`] of the file that `path`, relative to a
/// snapshot's directory, names: lexically, since the directory holds no
/// link (`./meminfo` and `sys/../meminfo` are `meminfo`). `None` for
/// anything else, and for a path that climbs out of the directory (which
/// the sandbox refuses anyway).
pub fn file_index(path: &str) -> Option<usize> {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    match parts[..] {
        [name] => PROC_FILES.iter().position(|f| *f == name),
        _ => None,
    }
}

/// One pass's filtered `/proc`: a directory of the pool, given back when the
/// pass's facts are dropped. Each of its files is copied from procfs at the
/// first [`Self::copy`] of it in the pass (the first open by any of the
/// pass's setters), and every later open in the pass sees that copy.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The directory.
    path: PathBuf,
    /// Its device and inode.
    id: (u64, u64),
    /// Those of [`PROC_DIRS`] that the procfs root holds.
    live: Vec<&'static str>,
    pass: Mutex<Pass>,
    pool: Arc<Pool>,
}

/// What one pass did with its directory.
#[derive(Debug)]
struct Pass {
    /// Held until the snapshot is dropped.
    dir: Option<Dir>,
    /// Per entry of [`PROC_FILES`]: copied in this pass.
    copied: [bool; PROC_FILES.len()],
    /// Scratch space for a file's text.
    text: Vec<u8>,
}

impl Snapshot {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `id` (a device and inode) is this snapshot's directory.
    pub fn is_dir(&self, id: (u64, u64)) -> bool {
        self.id == id
    }

    /// Those of [`PROC_DIRS`] that are served live, as they were when the
    /// snapshot was taken.
    pub fn live(&self) -> &[&'static str] {
        &self.live
    }

    /// Copies the file `i` of [`PROC_FILES`] into the directory unless this
    /// pass copied it already. A copy that failed is tried again at the
    /// next call.
    pub fn copy(&self, i: usize) -> io::Result<()> {
        let mut pass = self.pass.lock().expect("proc view pass lock");
        let Pass { dir, copied, text } = &mut *pass;
        if copied[i] {
            return Ok(());
        }
        dir.as_mut().expect("held until drop").refresh(i, text)?;
        copied[i] = true;
        self.pool.reads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let pass = self.pass.get_mut().unwrap_or_else(|p| p.into_inner());
        let Some(dir) = pass.dir.take() else { return };
        let mut idle = self.pool.idle.lock().expect("proc view pool lock");
        if idle.len() < MAX_IDLE {
            idle.push(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_is_classified() {
        assert_eq!(classify(Path::new("/proc")), ProcGrant::Root);
        assert_eq!(classify(Path::new("/proc/sys/kernel")), ProcGrant::Allowed);
        assert_eq!(classify(Path::new("/proc/pressure")), ProcGrant::Allowed);
        assert_eq!(classify(Path::new("/proc/driver")), ProcGrant::Driver);
        assert!(matches!(
            classify(Path::new("/proc/net")),
            ProcGrant::Refused(_)
        ));
        assert!(matches!(
            classify(Path::new("/proc/self")),
            ProcGrant::Refused(_)
        ));
        assert!(matches!(
            classify(Path::new("/proc/1")),
            ProcGrant::Refused(_)
        ));
        assert!(matches!(
            classify(Path::new("/proc/thread-self")),
            ProcGrant::Refused(_)
        ));
        assert_eq!(classify(Path::new("/")), ProcGrant::HoldsProc);
        assert_eq!(classify(Path::new("/tmp")), ProcGrant::Plain);
    }

    #[test]
    fn only_the_kernels_tables_and_the_snapshot_cannot_block() {
        for g in [
            "/proc",
            "/proc/sys",
            "/proc/pressure",
            "/sys/kernel/mm",
            "/sys/kernel/mm/hugepages",
        ] {
            assert!(!classify(Path::new(g)).may_block(), "{g}");
        }
        for g in ["/proc/driver", "/tmp", "/sys", "/sys/kernel", "/sys/class"] {
            assert!(classify(Path::new(g)).may_block(), "{g}");
        }
        assert_eq!(
            classify(Path::new("/sys/kernel/mm/hugepages")),
            ProcGrant::KernelMm
        );
        // Not sysfs: a directory of that name elsewhere is plain.
        let tmp = tempfile::tempdir().unwrap();
        let fake = tmp.path().join("kernel/mm");
        std::fs::create_dir_all(&fake).unwrap();
        assert_eq!(classify(&fake), ProcGrant::Plain);
    }

    #[test]
    fn a_snapshot_has_the_system_files_and_no_process() {
        let pool = Arc::new(Pool::default());
        let s = pool.take(Path::new("/proc")).unwrap();
        s.copy(index("meminfo")).unwrap();
        assert!(
            std::fs::read_to_string(s.path().join("meminfo"))
                .unwrap()
                .contains("MemTotal")
        );
        assert!(!s.path().join("self").exists());
        assert!(s.path().join("sys").is_dir());
        let dir = s.path().to_owned();
        drop(s);
        assert!(dir.exists(), "kept for the next pass");
        drop(pool);
        assert!(!dir.exists(), "removed with the pool");
    }

    #[test]
    fn a_snapshot_is_made_in_memory_when_a_tmpfs_is_at_hand() {
        let pool = Arc::new(Pool::default());
        let s = pool.take(Path::new("/proc")).unwrap();
        let at_hand = [std::env::temp_dir(), PathBuf::from("/dev/shm")]
            .iter()
            .any(|d| is_tmpfs(d));
        assert_eq!(is_tmpfs(s.path()), at_hand, "{}", s.path().display());
        assert!(!is_tmpfs(Path::new("/proc")));
    }

    #[test]
    fn a_dead_processs_snapshots_are_swept_and_nothing_else() {
        let base = tempfile::tempdir().unwrap();
        let mk = |n: &str| {
            let p = base.path().join(n);
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("meminfo"), "x").unwrap();
            p
        };
        // pid_max is at most 2^22: no process has this pid.
        let dead = mk("nodestatus-proc-99999999-00000000000000aa");
        let live = mk(&format!(
            "nodestatus-proc-{}-00000000000000bb",
            std::process::id()
        ));
        let other = mk("something-else");
        let target = mk("target");
        let link = base
            .path()
            .join("nodestatus-proc-99999998-00000000000000cc");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        sweep(base.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
        assert!(target.join("meminfo").exists(), "a link is not followed");
    }

    fn index(name: &str) -> usize {
        PROC_FILES
            .iter()
            .position(|f| *f == name)
            .expect("a copied file")
    }

    /// A fake procfs root: a directory with `meminfo`.
    fn fake_root(meminfo: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("meminfo"), meminfo).unwrap();
        root
    }

    #[test]
    fn a_path_names_a_copied_file_lexically() {
        assert_eq!(file_index("meminfo"), Some(index("meminfo")));
        assert_eq!(file_index("./meminfo"), Some(index("meminfo")));
        assert_eq!(file_index("sys/../loadavg"), Some(index("loadavg")));
        assert_eq!(file_index("meminfo/"), Some(index("meminfo")));
        assert_eq!(file_index("self/environ"), None);
        assert_eq!(file_index("sys/kernel/pid_max"), None);
        assert_eq!(file_index("../meminfo"), None);
        assert_eq!(file_index("."), None);
        assert_eq!(file_index("kcore"), None);
    }

    #[test]
    fn a_pass_reads_only_the_files_it_opens_and_each_once() {
        // A fake root with every file of the view.
        let root = tempfile::tempdir().unwrap();
        for f in PROC_FILES {
            std::fs::write(root.path().join(f), format!("{f} 1\n")).unwrap();
        }
        let pool = Arc::new(Pool::default());
        let s = pool.take(root.path()).unwrap();
        assert_eq!(pool.reads(), 0, "taking the view reads nothing");
        // Every file is listed before any is read, empty as procfs says.
        let mut listed: Vec<String> = std::fs::read_dir(s.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| PROC_FILES.contains(&n.as_str()))
            .collect();
        listed.sort();
        assert_eq!(listed, PROC_FILES);
        assert_eq!(
            std::fs::metadata(s.path().join("zoneinfo")).unwrap().len(),
            0
        );
        // Two files opened, one of them three times: two reads.
        for name in ["meminfo", "loadavg", "meminfo", "meminfo"] {
            s.copy(index(name)).unwrap();
        }
        assert_eq!(pool.reads(), 2);
        assert_eq!(
            std::fs::read_to_string(s.path().join("loadavg")).unwrap(),
            "loadavg 1\n"
        );
        // Within the pass, a second open sees the pass's copy, not the
        // file as it is now.
        std::fs::write(root.path().join("meminfo"), "meminfo 2\n").unwrap();
        s.copy(index("meminfo")).unwrap();
        assert_eq!(
            std::fs::read_to_string(s.path().join("meminfo")).unwrap(),
            "meminfo 1\n"
        );
        assert_eq!(pool.reads(), 2);
        drop(s);
        // The next pass, in the same directory, reads what it opens, anew.
        let next = pool.take(root.path()).unwrap();
        next.copy(index("meminfo")).unwrap();
        assert_eq!(pool.reads(), 3);
        assert_eq!(
            std::fs::read_to_string(next.path().join("meminfo")).unwrap(),
            "meminfo 2\n"
        );
    }

    #[test]
    fn the_next_pass_sees_the_files_as_they_are_then() {
        let root = fake_root("MemTotal: 2000 kB\nMemAvailable: 1500 kB\n");
        let pool = Arc::new(Pool::default());
        let first = pool.take(root.path()).unwrap();
        let dir = first.path().to_owned();
        first.copy(index("meminfo")).unwrap();
        first.copy(index("loadavg")).unwrap();
        assert!(!first.path().join("loadavg").exists());
        drop(first);
        // Shorter, longer, unchanged; a file that appears.
        for text in [
            "MemTotal: 2000 kB\n",
            "MemTotal: 2000 kB\nMemAvailable: 100 kB\nMore: 1\n",
        ] {
            std::fs::write(root.path().join("meminfo"), text).unwrap();
            for _ in 0..2 {
                let s = pool.take(root.path()).unwrap();
                assert_eq!(s.path(), dir, "the directory is reused");
                s.copy(index("meminfo")).unwrap();
                let copy = std::fs::read_to_string(s.path().join("meminfo")).unwrap();
                assert_eq!(copy, text);
            }
        }
        std::fs::write(root.path().join("loadavg"), "0.01 0.02 0.03 1/2 3\n").unwrap();
        let s = pool.take(root.path()).unwrap();
        s.copy(index("loadavg")).unwrap();
        let copy = std::fs::read_to_string(s.path().join("loadavg")).unwrap();
        assert_eq!(copy, "0.01 0.02 0.03 1/2 3\n");
    }

    #[test]
    fn passes_that_overlap_have_a_directory_each() {
        let a_root = fake_root("a\n");
        let pool = Arc::new(Pool::default());
        let a = pool.take(a_root.path()).unwrap();
        a.copy(index("meminfo")).unwrap();
        std::fs::write(a_root.path().join("meminfo"), "b\n").unwrap();
        let b = pool.take(a_root.path()).unwrap();
        b.copy(index("meminfo")).unwrap();
        assert_ne!(a.path(), b.path());
        assert!(!b.is_dir(a.id));
        assert_eq!(
            std::fs::read_to_string(a.path().join("meminfo")).unwrap(),
            "a\n"
        );
        assert_eq!(
            std::fs::read_to_string(b.path().join("meminfo")).unwrap(),
            "b\n"
        );
    }
}
