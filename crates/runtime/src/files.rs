//! Reading a file that someone else may have put in place: a config file, a
//! plugin dropped into the watched directory. Both must be bounded and must
//! never hang, whatever the file turns out to be.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening or reading failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Not a regular file (a FIFO, a directory, a device, a socket).
    #[error("not a regular file but a {kind}")]
    NotRegular {
        /// What it is instead.
        kind: &'static str,
    },
    /// Larger than the limit.
    #[error("{size} bytes, over the limit of {limit}")]
    TooLarge {
        /// Its size (at least this much).
        size: u64,
        /// The limit.
        limit: u64,
    },
}

/// Reads at most `limit` bytes of a regular file. The file is opened
/// non-blocking (a FIFO swapped in has no writer and would hang a blocking
/// open), checked to be a regular file before any byte is read, refused when
/// its size is over `limit`, and never read past `limit` even when its size
/// lies (procfs) or it grows while it is read.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, Error> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    let t = meta.file_type();
    if !t.is_file() {
        let kind = match () {
            _ if t.is_fifo() => "FIFO (named pipe)",
            _ if t.is_dir() => "directory",
            _ if t.is_socket() => "socket",
            _ if t.is_char_device() => "character device",
            _ if t.is_block_device() => "block device",
            _ => "special file",
        };
        return Err(Error::NotRegular { kind });
    }
    if meta.len() > limit {
        return Err(Error::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(Error::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_regular(&f, 10).unwrap(), b"0123456789");
        assert!(matches!(
            read_regular(&f, 9),
            Err(Error::TooLarge { size: 10, limit: 9 })
        ));
        assert!(matches!(
            read_regular(dir.path(), 9),
            Err(Error::NotRegular { kind: "directory" })
        ));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_regular(&fifo, 9),
            Err(Error::NotRegular {
                kind: "FIFO (named pipe)"
            })
        ));
    }
}
