//! The sources of lines, each read by one thread however many plugins
//! follow it: the kernel log (`/dev/kmsg`), a file followed as `tail -F`
//! follows it, and the systemd journal (`journalctl --follow`).
//!
//! Each `next` waits at most the time it is given, so that its thread can
//! see that it is to stop.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::matcher::Position;

/// The kernel log's device.
pub const KMSG: &str = "/dev/kmsg";
/// How far back a file is read for a subscription that looks back.
pub const FILE_LOOKBACK_BYTES: u64 = 1 << 20;
/// How often a followed file is checked for new lines, rotation and
/// truncation while nothing new was read.
const FILE_POLL: Duration = Duration::from_millis(100);

/// One line read, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The text, without its newline.
    pub text: String,
    /// When it was written (ms since the epoch).
    pub time_ms: u64,
    /// Where it sits.
    pub at: Position,
    /// The journal entry's unit or identifier.
    pub unit: Option<String>,
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A source of lines.
pub trait Source: Send {
    /// The next line, waiting at most `wait`; `None` when none came.
    fn next(&mut self, wait: Duration) -> io::Result<Option<Record>>;
    /// Where the next line will be (lines before it are read).
    fn position(&self) -> Position;
}

/// The kernel log, read from the start of the kernel's ring: each record
/// one line, its level and facility taken off.
pub struct Kmsg {
    file: File,
    /// The wall clock of the boot, in ms (a record's time is since then).
    boot_ms: u64,
    next_seq: u64,
    buf: Vec<u8>,
    /// Records the kernel overwrote before they were read.
    pub lost: u64,
}

impl Kmsg {
    /// Opens `path` (the kernel's `/dev/kmsg`) at its oldest record
    /// ([`Start::Back`]) or after its newest ([`Start::End`]).
    pub fn open(path: &Path, start: Start) -> io::Result<Self> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)?;
        if start == Start::End {
            // SAFETY: a valid descriptor; /dev/kmsg's SEEK_END moves past
            // the newest record.
            if unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_END) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Self {
            file,
            boot_ms: boot_ms(),
            next_seq: 0,
            buf: vec![0; 16 << 10],
            lost: 0,
        })
    }
}

/// The wall clock at the boot (the kernel log's clock counts from it).
fn boot_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    let since_boot = ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000;
    now_ms().saturating_sub(since_boot)
}

/// Parses one `/dev/kmsg` record, `PRI,SEQ,USEC,FLAGS[,...];MESSAGE\n`
/// (then continuation lines ` KEY=VALUE`, ignored): the sequence number,
/// the microseconds since boot and the message.
pub fn parse_kmsg(record: &[u8]) -> Option<(u64, u64, String)> {
    let text = String::from_utf8_lossy(record);
    let (header, rest) = text.split_once(';')?;
    let mut fields = header.split(',');
    let _priority = fields.next()?;
    let seq = fields.next()?.parse().ok()?;
    let usec = fields.next()?.parse().ok()?;
    let message = rest.split('\n').next().unwrap_or_default().to_owned();
    Some((seq, usec, message))
}

impl Source for Kmsg {
    fn next(&mut self, wait: Duration) -> io::Result<Option<Record>> {
        loop {
            match self.file.read(&mut self.buf) {
                Ok(0) => return Ok(None),
                Ok(n) => {
                    let Some((seq, usec, text)) = parse_kmsg(&self.buf[..n]) else {
                        continue;
                    };
                    self.next_seq = seq + 1;
                    return Ok(Some(Record {
                        text,
                        time_ms: self.boot_ms + usec / 1000,
                        at: Position {
                            generation: 0,
                            offset: seq,
                        },
                        unit: None,
                    }));
                }
                // The kernel overwrote records before they were read: the
                // next read gives the oldest one left.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => self.lost += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    use std::os::fd::AsRawFd;
                    let mut pfd = libc::pollfd {
                        fd: self.file.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd.
                    let r = unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as i32) };
                    if r <= 0 {
                        return Ok(None);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn position(&self) -> Position {
        Position {
            generation: 0,
            offset: self.next_seq,
        }
    }
}

/// Where a followed file starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At its end: only lines written from now on.
    End,
    /// [`FILE_LOOKBACK_BYTES`] before its end (at the start of a line).
    Back,
}

/// A text file followed as `tail -F` follows it: by name, so a rotated
/// file (a new one at the path) is read from its start once the old one
/// is drained, and a truncated one from its start again.
pub struct FollowFile {
    path: PathBuf,
    file: Option<File>,
    ino: u64,
    /// Which file at the path this is (1, 2, ... in the order they came).
    generation: u64,
    /// The offset of the next byte read.
    pos: u64,
    /// The offset where `partial` starts.
    partial_at: u64,
    partial: Vec<u8>,
    ready: VecDeque<Record>,
    start: Start,
    /// Whether a file was opened yet (the first one starts at `start`).
    opened: bool,
}

impl FollowFile {
    /// Follows `path` (which may not exist yet: it is read once it does).
    pub fn new(path: PathBuf, start: Start) -> Self {
        Self {
            path,
            file: None,
            ino: 0,
            generation: 0,
            pos: 0,
            partial_at: 0,
            partial: Vec::new(),
            ready: VecDeque::new(),
            start,
            opened: false,
        }
    }

    /// A follower that numbers the file it opens first `generation` (a
    /// reader opened again goes on numbering where the last one was, so
    /// that positions stay comparable).
    pub fn continuing(mut self, generation: u64) -> Self {
        self.generation = generation.saturating_sub(1);
        self
    }

    /// Opens the file at the path, at `start` for the first one (a file
    /// that comes later, rotated in, is read from its start).
    fn open(&mut self) -> io::Result<bool> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::other(format!(
                "{} is not a regular file",
                self.path.display()
            )));
        }
        let first = !self.opened;
        self.opened = true;
        self.generation += 1;
        self.ino = meta.ino();
        self.pos = match (first, self.start) {
            (true, Start::End) => meta.len(),
            (true, Start::Back) => meta.len().saturating_sub(FILE_LOOKBACK_BYTES),
            (false, _) => 0,
        };
        file.seek(SeekFrom::Start(self.pos))?;
        if first && self.start == Start::Back && self.pos > 0 {
            // Skip to the start of the next line.
            let skipped = {
                let mut reader = io::BufReader::new(&mut file);
                let mut skipped = Vec::new();
                reader.read_until(b'\n', &mut skipped)?
            };
            self.pos += skipped as u64;
            file.seek(SeekFrom::Start(self.pos))?;
        }
        self.partial.clear();
        self.partial_at = self.pos;
        self.file = Some(file);
        Ok(true)
    }

    /// Reads what the file holds past `pos` into lines.
    fn read_more(&mut self) -> io::Result<usize> {
        let Some(file) = &mut self.file else {
            return Ok(0);
        };
        let mut buf = vec![0; 64 << 10];
        let mut total = 0;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n;
            for &b in &buf[..n] {
                if b == b'\n' {
                    let text = String::from_utf8_lossy(&self.partial).into_owned();
                    self.ready.push_back(Record {
                        text,
                        time_ms: now_ms(),
                        at: Position {
                            generation: self.generation,
                            offset: self.partial_at,
                        },
                        unit: None,
                    });
                    self.partial.clear();
                    self.partial_at = self.pos + 1;
                } else if self.partial.len() < super::MAX_PENDING_LINE {
                    self.partial.push(b);
                }
                self.pos += 1;
            }
            if total >= 1 << 20 {
                break;
            }
        }
        Ok(total)
    }

    /// Checks the path: a new file there (rotation) or a shorter one
    /// (truncation) is read from its start.
    fn check_path(&mut self) -> io::Result<()> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        match &mut self.file {
            Some(file) if meta.ino() == self.ino => {
                if meta.len() < self.pos {
                    file.seek(SeekFrom::Start(0))?;
                    self.generation += 1;
                    self.pos = 0;
                    self.partial.clear();
                    self.partial_at = 0;
                }
            }
            _ => {
                self.file = None;
                self.open()?;
            }
        }
        Ok(())
    }
}

impl Source for FollowFile {
    fn next(&mut self, wait: Duration) -> io::Result<Option<Record>> {
        if !self.opened {
            self.open()?;
        }
        let deadline = std::time::Instant::now() + wait;
        loop {
            if let Some(r) = self.ready.pop_front() {
                return Ok(Some(r));
            }
            if self.read_more()? > 0 {
                continue;
            }
            // The old file is drained: has another taken its path?
            self.check_path()?;
            if self.read_more()? > 0 {
                continue;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(FILE_POLL.min(deadline - now));
        }
    }

    fn position(&self) -> Position {
        Position {
            generation: self.generation,
            offset: self.pos,
        }
    }
}

/// The systemd journal, as `journalctl --follow --output=json` prints it,
/// from `since_s` seconds ago (0: from now).
pub struct Journal {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<io::Result<String>>,
    read: u64,
}

impl Journal {
    /// Starts `journalctl`; an error says the node has none.
    pub fn open(since_s: u64) -> io::Result<Self> {
        let mut cmd = std::process::Command::new("journalctl");
        cmd.args(["--follow", "--output=json", "--no-pager", "--quiet"]);
        if since_s > 0 {
            cmd.arg(format!("--since=-{since_s}s"));
        } else {
            cmd.arg("--lines=0");
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("this node has no systemd journal to read (journalctl: {e})"),
                )
            })?;
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = std::sync::mpsc::sync_channel(1024);
        std::thread::Builder::new()
            .name("journal-lines".into())
            .spawn(move || {
                for line in io::BufReader::new(stdout).lines() {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Self {
            child,
            lines,
            read: 0,
        })
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One entry of `journalctl --output=json`: its message, unit and time.
pub fn parse_journal(line: &str) -> Option<(String, Option<String>, u64)> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let message = match v.get("MESSAGE")? {
        serde_json::Value::String(s) => s.clone(),
        // A message that is not UTF-8 comes as an array of bytes.
        serde_json::Value::Array(bytes) => String::from_utf8_lossy(
            &bytes
                .iter()
                .filter_map(|b| b.as_u64().map(|b| b as u8))
                .collect::<Vec<_>>(),
        )
        .into_owned(),
        _ => return None,
    };
    let unit = ["_SYSTEMD_UNIT", "SYSLOG_IDENTIFIER"]
        .iter()
        .find_map(|k| v.get(*k).and_then(|u| u.as_str()).map(str::to_owned));
    let time_ms = v
        .get("__REALTIME_TIMESTAMP")
        .and_then(|t| t.as_str())
        .and_then(|t| t.parse::<u64>().ok())
        .map_or_else(now_ms, |us| us / 1000);
    Some((message, unit, time_ms))
}

impl Source for Journal {
    fn next(&mut self, wait: Duration) -> io::Result<Option<Record>> {
        match self.lines.recv_timeout(wait) {
            Ok(line) => {
                let line = line?;
                self.read += 1;
                Ok(parse_journal(&line).map(|(text, unit, time_ms)| Record {
                    text,
                    time_ms,
                    at: Position {
                        generation: 0,
                        offset: self.read,
                    },
                    unit,
                }))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.child.try_wait()?;
                Err(io::Error::other(format!(
                    "journalctl ended ({})",
                    status.map_or("still running".into(), |s| s.to_string())
                )))
            }
        }
    }

    fn position(&self) -> Position {
        Position {
            generation: 0,
            offset: self.read + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_kmsg_record_gives_its_sequence_time_and_message() {
        let r = b"6,339,94048874,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n SUBSYSTEM=pci\n";
        let (seq, usec, text) = parse_kmsg(r).unwrap();
        assert_eq!((seq, usec), (339, 94048874));
        assert_eq!(
            text,
            "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."
        );
        assert!(parse_kmsg(b"garbage").is_none());
    }

    #[test]
    fn a_journal_entry_gives_its_message_unit_and_time() {
        let (m, u, t) = parse_journal(
            r#"{"MESSAGE":"Started x","_SYSTEMD_UNIT":"containerd.service","__REALTIME_TIMESTAMP":"1700000000123456"}"#,
        )
        .unwrap();
        assert_eq!(
            (m.as_str(), u.as_deref(), t),
            ("Started x", Some("containerd.service"), 1700000000123)
        );
        let (m, ..) = parse_journal(r#"{"MESSAGE":[104,105]}"#).unwrap();
        assert_eq!(m, "hi");
    }

    fn texts(f: &mut FollowFile) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(r) = f.next(Duration::from_millis(150)).unwrap() {
            out.push(r.text);
        }
        out
    }

    #[test]
    fn a_followed_file_is_read_across_truncation_and_rotation_as_tail_f_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, "old line\n").unwrap();
        let mut f = FollowFile::new(path.clone(), Start::End);
        assert!(texts(&mut f).is_empty(), "starts at the end");
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        w.write_all(b"one\ntw").unwrap();
        assert_eq!(
            texts(&mut f),
            ["one"],
            "a partial line waits for its newline"
        );
        w.write_all(b"o\n").unwrap();
        assert_eq!(texts(&mut f), ["two"]);
        // Truncated in place (copytruncate): read from the start again.
        std::fs::write(&path, "after truncate\n").unwrap();
        assert_eq!(texts(&mut f), ["after truncate"]);
        // Rotated: the old file moved away with a last line, a new one made.
        let mut w = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        w.write_all(b"last of old\n").unwrap();
        std::fs::rename(&path, dir.path().join("app.log.1")).unwrap();
        std::fs::write(&path, "first of new\n").unwrap();
        assert_eq!(texts(&mut f), ["last of old", "first of new"]);
        // Deleted, then written again.
        std::fs::remove_file(&path).unwrap();
        assert!(texts(&mut f).is_empty());
        std::fs::write(&path, "back\n").unwrap();
        assert_eq!(texts(&mut f), ["back"]);
    }

    #[test]
    fn a_file_followed_with_lookback_starts_at_a_line_up_to_1_mib_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, "a\nb\n").unwrap();
        let mut f = FollowFile::new(path.clone(), Start::Back);
        assert_eq!(texts(&mut f), ["a", "b"]);
        let big = "x".repeat(100) + "\n";
        std::fs::write(&path, big.repeat(20_000)).unwrap();
        let mut f = FollowFile::new(path, Start::Back);
        let got = texts(&mut f);
        assert!(got.iter().all(|l| l.len() == 100), "whole lines only");
        assert!(got.len() as u64 <= FILE_LOOKBACK_BYTES / 101 + 1);
    }
}
