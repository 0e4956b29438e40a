//! The engine's private files, one behaviour for every cache and state
//! directory (the precompile cache, the registry cache, the components the
//! registry puller hands to the loader, the simulated machines):
//!
//! - a directory is used only when the engine's user owns it and no group
//!   or other may write it ([`check_private_dir`]);
//! - a file is read only when it is a regular file of that user, mode
//!   `0600`, with one link, within a size bound ([`open_private`],
//!   [`read_private`]);
//! - a file is replaced atomically and durably ([`write_atomic`],
//!   [`write_atomic_with`]): written to a `0600` temporary file in the same
//!   directory (never through a symlink), flushed to disk, renamed into
//!   place, and the directory flushed, so that a reader sees the old
//!   content or the new one, and a crash leaves one of them ([`replace`]:
//!   the same without the flushes, for files rebuilt at each start);
//! - temporary files a crash left behind are swept ([`remove_stale_tmp`]).

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The prefix of this crate's temporary files.
pub const TMP_PREFIX: &str = ".tmp-";

/// Why a directory is not private.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// It could not be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Someone else could write it, or it is not a directory: why, with
    /// what to do.
    #[error("{0}")]
    Unsafe(String),
}

/// The engine's effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Checks that only the engine's user can write `dir`: a directory (not a
/// symlink), owned by the effective user, without group or other write
/// permission.
pub fn check_private_dir(dir: &Path) -> Result<(), DirError> {
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return Err(DirError::Unsafe(
            "it is not a directory (a symlink?)".into(),
        ));
    }
    if meta.uid() != euid() {
        return Err(DirError::Unsafe(format!(
            "it is owned by uid {}, not by the engine's uid {}; create it as the engine's user",
            meta.uid(),
            euid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(DirError::Unsafe(format!(
            "its mode {:o} lets group or others write it; run `chmod 700 {}`",
            meta.mode() & 0o7777,
            dir.display()
        )));
    }
    Ok(())
}

/// Why a private file must not be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It could not be opened or read.
    #[error("cannot read it: {0}")]
    Io(#[source] std::io::Error),
    /// It is a symlink.
    #[error("it is a symlink")]
    Symlink,
    /// It is not a regular file.
    #[error("it is not a regular file")]
    NotRegular,
    /// Another user owns it.
    #[error("it is owned by uid {0}, not the engine's uid {euid}", euid = euid())]
    Owner(u32),
    /// Group or others have a permission on it.
    #[error("its mode {0:o} gives group or others access (0600 expected)")]
    Mode(u32),
    /// It has more than one link (another name could change it).
    #[error("it has {0} links")]
    Links(u64),
    /// It is over the bound.
    #[error("it is {size} bytes, over {limit}")]
    TooLarge {
        /// Its size (at least).
        size: u64,
        /// The bound.
        limit: u64,
    },
}

/// Opens a file that only the engine's user can have written: `Ok(None)`
/// when there is none, an error when there is one that must not be used (a
/// symlink, not a regular file, another owner, group or others' permission
/// bits, more than one link, larger than `max`). Opened without following
/// a symlink and without blocking (a FIFO is refused, not waited on).
pub fn open_private(path: &Path, max: u64) -> Result<Option<std::fs::File>, FileError> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(FileError::Symlink),
        Err(e) => return Err(FileError::Io(e)),
    };
    let meta = file.metadata().map_err(FileError::Io)?;
    if !meta.file_type().is_file() {
        return Err(FileError::NotRegular);
    }
    if meta.uid() != euid() {
        return Err(FileError::Owner(meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(FileError::Mode(meta.mode() & 0o7777));
    }
    if meta.nlink() != 1 {
        return Err(FileError::Links(meta.nlink()));
    }
    if meta.len() > max {
        return Err(FileError::TooLarge {
            size: meta.len(),
            limit: max,
        });
    }
    Ok(Some(file))
}

/// Reads a file as [`open_private`] opens it, at most `max` bytes (one that
/// grew past them since is refused too).
pub fn read_private(path: &Path, max: u64) -> Result<Option<Vec<u8>>, FileError> {
    let Some(file) = open_private(path, max)? else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(file.metadata().map_or(0, |m| m.len()) as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(FileError::Io)?;
    if bytes.len() as u64 > max {
        return Err(FileError::TooLarge {
            size: bytes.len() as u64,
            limit: max,
        });
    }
    Ok(Some(bytes))
}

/// Replaces `path` with `bytes` atomically but not durably: the same
/// temporary file and rename as [`write_atomic`], without the flushes. For
/// files rebuilt at each start (a simulated machine's), where a crash
/// loses nothing worth a flush.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_tmp_and_rename(path, |f| f.write_all(bytes), false)
}

/// Replaces `path` with `bytes` (see [`write_atomic_with`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Replaces `path` with what `write` writes: into a new `0600` temporary
/// file beside it (created, never opened through a symlink), flushed to
/// disk, renamed over `path`, then the directory flushed. On failure the
/// temporary file is removed and `path` is as it was.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_tmp_and_rename(path, write, true)
}

fn write_tmp_and_rename(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    durable: bool,
) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = parent(path);
    let tmp = dir.join(format!(
        "{TMP_PREFIX}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        write(&mut file)?;
        if durable {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return written;
    }
    if durable {
        // The rename itself is durable once the directory is.
        std::fs::File::open(&dir)?.sync_all()?;
    }
    Ok(())
}

/// The directory of `path` (`.` for a bare name).
fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Removes this crate's temporary files in `dir` older than `age` (what a
/// crash left behind; a younger one may be another process's write in
/// progress).
pub fn remove_stale_tmp(dir: &Path, age: Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let stale = e.file_name().to_string_lossy().starts_with(TMP_PREFIX)
            && e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|a| a > age));
        if stale {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_file_is_replaced_whole_owner_only_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(read_private(&path, 10).unwrap().unwrap(), b"two");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f"]);
        // A failed write leaves the old content and no temporary file.
        let failed = write_atomic_with(&path, |_| Err(std::io::Error::other("no")));
        assert!(failed.is_err());
        assert_eq!(read_private(&path, 10).unwrap().unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn only_a_private_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        assert_eq!(read_private(&path, 10).unwrap(), None);
        write_atomic(&path, b"0123456789ab").unwrap();
        assert!(matches!(
            read_private(&path, 10),
            Err(FileError::TooLarge {
                size: 12,
                limit: 10
            })
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            read_private(&path, 100),
            Err(FileError::Mode(0o644))
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::hard_link(&path, dir.path().join("g")).unwrap();
        assert!(matches!(read_private(&path, 100), Err(FileError::Links(2))));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("g"), &link).unwrap();
        assert!(matches!(read_private(&link, 100), Err(FileError::Symlink)));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_private(&fifo, 100),
            Err(FileError::NotRegular)
        ));
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        check_private_dir(dir.path()).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_private_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("lets group or others write it"), "{e}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(matches!(check_private_dir(&link), Err(DirError::Unsafe(_))));
    }

    #[test]
    fn only_old_temporary_files_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".tmp-1-1"), b"").unwrap();
        std::fs::write(dir.path().join("keep"), b"").unwrap();
        remove_stale_tmp(dir.path(), Duration::from_secs(3600));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        remove_stale_tmp(dir.path(), Duration::ZERO);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["keep"]);
    }
}
