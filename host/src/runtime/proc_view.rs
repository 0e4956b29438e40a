//! A granted `/proc` is a filtered view, never the host process itself.
//!
//! Preopening `/proc` would hand a plugin `/proc/self` (the engine's own
//! environment, memory maps and file descriptors, where the kubeconfig token
//! lives) and every other process's directory. Instead, a grant whose host
//! directory is the root of a procfs mount is served as:
//!
//! - a snapshot directory holding copies of the system-wide files that
//!   setters read ([`PROC_FILES`]: `meminfo`, `loadavg`, `stat`, `cpuinfo`,
//!   ...), taken once per pass on first use and shared by the pass's setters
//!   (it lives in the pass's [`Facts`](super::facts::Facts); about 1 ms in a
//!   debug build), and
//! - the system-wide subdirectories ([`PROC_DIRS`]: `sys`, `pressure`,
//!   `driver`, `net`) preopened read-only at their own guest paths
//!   (`/proc/sys`, ...). WASI guests resolve a path through the longest
//!   preopen that holds it, so `/proc/sys/kernel/pid_max` is read live.
//!
//! `/proc/self`, `/proc/thread-self`, `/proc/<pid>`, `/proc/*/environ`,
//! `/proc/kcore`, `/proc/mounts` (a link into `self`) and everything else
//! not listed are simply absent. `net` is the engine's network namespace's
//! tables (routes, interfaces: the node's own when the engine runs with the
//! host network), which the node-address setter needs; it holds no process
//! data.
//!
//! A grant of a procfs subdirectory is allowed only below one of
//! [`PROC_DIRS`] (so `/proc/sys` or `/proc/pressure`, never `/proc/self` or
//! `/proc/1`): any other is refused. A grant of a directory that holds a
//! procfs mount just below it (`/`, `/host`) would reach `/proc/self`
//! through it, so it serves host facts only (`statvfs` inside it) and is not
//! opened for reading; the plugin is told so in its withheld list. The
//! default setters that ask for `/` use it only for `statvfs`.

use std::io;
use std::path::{Path, PathBuf};

/// The top-level `/proc` files a filtered view copies.
pub const PROC_FILES: &[&str] = &[
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

/// The `/proc` subdirectories a filtered view serves live.
pub const PROC_DIRS: &[&str] = &["sys", "pressure", "driver", "net"];

/// Largest copy of one `/proc` file in a snapshot (`cpuinfo` on a big
/// machine is a few hundred KiB).
const MAX_PROC_FILE: u64 = 4 << 20;

/// What a granted host directory is, as far as procfs goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcGrant {
    /// Not procfs, and holds no procfs mount just below it: preopen as is.
    Plain,
    /// The root of a procfs mount: serve the filtered view.
    Root,
    /// A procfs directory below one of [`PROC_DIRS`]: preopen as is.
    Allowed,
    /// Holds a procfs mount just below it: host facts only, no preopen.
    HoldsProc,
    /// Refused, with the reason.
    Refused(String),
}

fn is_procfs(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct on success.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == libc::PROC_SUPER_MAGIC
    }
}

fn is_proc_root(path: &Path) -> bool {
    is_procfs(path)
        && std::fs::symlink_metadata(path.join("self")).is_ok_and(|m| m.file_type().is_symlink())
        && path.join("meminfo").is_file()
}

/// Classifies the host directory `from` of a grant.
pub fn classify(from: &Path) -> ProcGrant {
    if !is_procfs(from) {
        if is_proc_root(&from.join("proc")) {
            return ProcGrant::HoldsProc;
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
    match first {
        Some(first) if PROC_DIRS.contains(&first.as_str()) && first != "net" => ProcGrant::Allowed,
        _ => ProcGrant::Refused(format!(
            "{} (resolved to {}) is not one of the system-wide /proc directories {PROC_DIRS:?}: process directories are never granted",
            from.display(),
            real.display()
        )),
    }
}

/// A snapshot directory of one call's filtered `/proc`, removed on drop.
#[derive(Debug)]
pub(crate) struct Snapshot {
    dir: PathBuf,
}

impl Snapshot {
    /// Copies [`PROC_FILES`] from the procfs root `from` into a fresh
    /// owner-only directory, with an empty directory for each of
    /// [`PROC_DIRS`] so that listing `/proc` shows them.
    pub fn take(from: &Path) -> io::Result<Self> {
        use std::io::Read;
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!(
            "nodestatus-proc-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let snap = Self { dir };
        for name in PROC_FILES {
            let Ok(f) = std::fs::File::open(from.join(name)) else {
                continue;
            };
            let mut text = Vec::new();
            f.take(MAX_PROC_FILE).read_to_end(&mut text)?;
            std::fs::write(snap.dir.join(name), text)?;
        }
        for d in PROC_DIRS {
            std::fs::create_dir(snap.dir.join(d))?;
        }
        Ok(snap)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
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
    fn a_snapshot_has_the_system_files_and_no_process() {
        let s = Snapshot::take(Path::new("/proc")).unwrap();
        assert!(
            std::fs::read_to_string(s.path().join("meminfo"))
                .unwrap()
                .contains("MemTotal")
        );
        assert!(!s.path().join("self").exists());
        let dir = s.path().to_owned();
        drop(s);
        assert!(!dir.exists());
    }
}
