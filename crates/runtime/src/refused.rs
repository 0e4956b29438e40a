//! The memo of refused components: a file that the compile refused (an
//! invalid component, or one that ran past a compile limit) is remembered
//! by its sha256, so that a rescan, a settings change or (with a precompile
//! cache) a restart does not compile it again. Any change to the file
//! changes its sha256, and with it the answer. (A refusal by the check
//! before the compile is not remembered: that check takes milliseconds.)
//!
//! A refusal for running past `compileTimeout` or `compileMemoryLimit` is
//! remembered with the limits it ran under: raising either one compiles the
//! file again. A compiler process that crashed or could not start is not
//! remembered (it says nothing about the file).
//!
//! With a precompile cache, the memo is also a small file beside its
//! entries, `refused-<engine key>.json` (owner-only, written and read as
//! the entries are: see `cache.rs`), so only the engine build that refused a
//! file trusts the refusal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::compile::{CompileLimits, Error as CompileError};
use crate::{LoadError, PrecompileCache, error_chain};

/// At most this many refusals are remembered (the oldest are forgotten).
const MAX_ENTRIES: usize = 256;
/// The largest memo file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Entry {
    /// Why, as the load said it.
    error: String,
    /// For a refusal by a compile limit: the limits it ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limits: Option<(u64, u64)>,
    /// Order of arrival, to forget the oldest.
    seq: u64,
}

/// Refused files by sha256, in memory and (with a cache) on disk.
#[derive(Debug, Default)]
pub(crate) struct RefusedMemo {
    entries: Mutex<BTreeMap<String, Entry>>,
    file: Option<PathBuf>,
}

fn as_pair(limits: CompileLimits) -> (u64, u64) {
    (limits.timeout.as_millis() as u64, limits.memory)
}

impl RefusedMemo {
    /// The memo, read from beside `cache` when there is one.
    pub(crate) fn open(cache: Option<&PrecompileCache>) -> Self {
        let Some(cache) = cache else {
            return Self::default();
        };
        let path = cache
            .dir()
            .join(format!("refused-{}.json", cache.engine_key()));
        let entries = match crate::cache::read_private(&path, MAX_FILE_BYTES) {
            Ok(None) => BTreeMap::new(),
            Ok(Some(bytes)) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), "ignoring the memo of refused plugins: {e}");
                BTreeMap::new()
            }),
            Err(why) => {
                tracing::warn!(path = %path.display(), "ignoring the memo of refused plugins: {why}");
                BTreeMap::new()
            }
        };
        Self {
            entries: Mutex::new(entries),
            file: Some(path),
        }
    }

    /// Why the file of `sha256` was refused, if it was, and the refusal
    /// holds under `limits` (the compile limits now; `None`: in-process).
    pub(crate) fn get(&self, sha256: &str, limits: Option<CompileLimits>) -> Option<String> {
        let entries = self.entries.lock().expect("refused memo lock");
        let entry = entries.get(sha256)?;
        match (entry.limits, limits) {
            (None, _) => Some(entry.error.clone()),
            // Refused by a limit: holds while neither limit is larger.
            (Some((t, m)), Some(now)) => {
                let (nt, nm) = as_pair(now);
                (nt <= t && nm <= m).then(|| entry.error.clone())
            }
            // Refused by a child's limit, now compiled in-process.
            (Some(_), None) => None,
        }
    }

    /// Remembers that the file of `sha256` was refused with `error`, when
    /// the error is the file's own (not a crashed or unstartable compiler).
    pub(crate) fn remember(&self, sha256: &str, error: &LoadError, limits: Option<CompileLimits>) {
        let limits = match error {
            LoadError::CompileBound(CompileError::TimedOut { .. })
            | LoadError::CompileBound(CompileError::OutOfMemory { .. }) => limits.map(as_pair),
            LoadError::CompileBound(_) => return,
            LoadError::Compile(_) => None,
            _ => return,
        };
        let mut entries = self.entries.lock().expect("refused memo lock");
        let seq = entries.values().map(|e| e.seq + 1).max().unwrap_or(0);
        entries.insert(
            sha256.to_owned(),
            Entry {
                error: error_chain(error),
                limits,
                seq,
            },
        );
        while entries.len() > MAX_ENTRIES {
            let oldest = entries
                .iter()
                .min_by_key(|(_, e)| e.seq)
                .map(|(k, _)| k.clone())
                .expect("not empty");
            entries.remove(&oldest);
        }
        if let Some(path) = &self.file {
            let written = serde_json::to_vec(&*entries)
                .map_err(std::io::Error::other)
                .and_then(|bytes| crate::cache::write_private(path, &bytes));
            if let Err(e) = written {
                tracing::warn!(path = %path.display(), error = %e, "cannot write the memo of refused plugins");
            }
        }
    }

    /// How many refusals are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().expect("refused memo lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_limit_refusal_holds_only_under_limits_no_larger() {
        let memo = RefusedMemo::default();
        let limits = CompileLimits {
            timeout: Duration::from_secs(2),
            memory: 1 << 30,
        };
        let e = LoadError::CompileBound(CompileError::TimedOut {
            limit: limits.timeout,
        });
        memo.remember("aa", &e, Some(limits));
        assert!(memo.get("aa", Some(limits)).is_some());
        let longer = CompileLimits {
            timeout: Duration::from_secs(3),
            ..limits
        };
        assert!(memo.get("aa", Some(longer)).is_none());
        assert!(memo.get("bb", Some(limits)).is_none());
        // A crashed compiler says nothing about the file.
        let crash = LoadError::CompileBound(CompileError::Crashed {
            status: "signal 9".into(),
            stderr: String::new(),
        });
        memo.remember("cc", &crash, Some(limits));
        assert!(memo.get("cc", Some(limits)).is_none());
        assert_eq!(memo.len(), 1);
    }
}
