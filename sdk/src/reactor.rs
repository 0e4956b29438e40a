//! Setters that react to what happens on the machine (WIT 0.2.1's
//! `reactor`): the kernel log, a log file, the journal, and granted paths
//! that change.
//!
//! Implement [`Reactor`] beside [`Setter`](crate::Setter) and export both
//! with [`export_reactor!`](crate::export_reactor). The host reads the
//! streams, matches your patterns itself, and calls
//! [`Reactor::on_lines`] with the matches within a second; its part is
//! everything the plugin sets, as `set`'s is, so call your `set` logic
//! from it.
//!
//! ```no_run
//! use nodestatus_sdk::reactor::{Lines, Reactor, Stream, Subscriptions};
//! use nodestatus_sdk::{ConditionStatus, Metadata, Node, Setter};
//!
//! struct Xid;
//!
//! impl Setter for Xid {
//!     fn metadata() -> Metadata {
//!         Metadata::new("xid-watch", "0.1.0")
//!     }
//!     fn set(node: &mut Node) -> nodestatus_sdk::Result<()> {
//!         // Keep what the node says (on_lines set it), healthy at first.
//!         let (status, reason, message) = match node.condition("GPUHealthy") {
//!             Some(c) => (
//!                 c.status.parse().unwrap_or(ConditionStatus::Unknown),
//!                 c.reason.unwrap_or_default(),
//!                 c.message.unwrap_or_default(),
//!             ),
//!             None => (ConditionStatus::True, "NoXid".to_owned(), String::new()),
//!         };
//!         node.set_condition("GPUHealthy", status, &reason, &message);
//!         Ok(())
//!     }
//! }
//!
//! impl Reactor for Xid {
//!     fn subscribe() -> Subscriptions {
//!         Subscriptions::new().stream(Stream::kmsg("kernel").pattern(r"NVRM: Xid \((.+?)\): (\d+)"))
//!     }
//!     fn on_lines(node: &mut Node, lines: &Lines) -> nodestatus_sdk::Result<()> {
//!         for m in &lines.matches {
//!             node.set_condition("GPUHealthy", ConditionStatus::False, "Xid", &m.text);
//!         }
//!         Ok(())
//!     }
//! }
//!
//! nodestatus_sdk::export_reactor!(Xid);
//! ```

use crate::bindings::exports::nodestatus::plugin0_2_1::reactor as wit;
use crate::{Node, Result};

/// Where a stream's lines come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The kernel log (`/dev/kmsg`).
    Kmsg,
    /// A growing text file, followed across rotation and truncation.
    File(String),
    /// The systemd journal, entries of these units or identifiers (all
    /// when empty).
    Journal(Vec<String>),
}

/// One stream the plugin follows. The operator must grant its source in
/// the plugin's `streams` (`kmsg`, `journal`, or the file's path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    /// Your name for it; each match names it.
    pub name: String,
    /// Where its lines come from.
    pub source: Source,
    /// Regular expressions (RE2's syntax); a line is handed over once per
    /// pattern that matches.
    pub patterns: Vec<String>,
    /// How many lines one pattern may span (1 to 64).
    pub span: u32,
    /// How far back to start, in seconds (0: from now).
    pub lookback_seconds: u64,
    /// Takes each line's message out (its first group) before matching.
    pub extract: Option<String>,
}

impl Stream {
    fn new(name: &str, source: Source) -> Self {
        Self {
            name: name.to_owned(),
            source,
            patterns: Vec::new(),
            span: 1,
            lookback_seconds: 0,
            extract: None,
        }
    }

    /// The kernel log.
    pub fn kmsg(name: &str) -> Self {
        Self::new(name, Source::Kmsg)
    }

    /// A log file at `path`.
    pub fn file(name: &str, path: &str) -> Self {
        Self::new(name, Source::File(path.to_owned()))
    }

    /// The journal, these units or identifiers (all when empty).
    pub fn journal(name: &str, units: &[&str]) -> Self {
        Self::new(
            name,
            Source::Journal(units.iter().map(|u| u.to_string()).collect()),
        )
    }

    /// Adds a pattern; its index is the order of the calls.
    pub fn pattern(mut self, p: &str) -> Self {
        self.patterns.push(p.to_owned());
        self
    }

    /// Patterns may span `n` lines.
    pub fn span(mut self, n: u32) -> Self {
        self.span = n;
        self
    }

    /// Starts `seconds` back.
    pub fn lookback(mut self, seconds: u64) -> Self {
        self.lookback_seconds = seconds;
        self
    }

    /// Takes each line's message out with this expression first.
    pub fn extract(mut self, re: &str) -> Self {
        self.extract = Some(re.to_owned());
        self
    }
}

/// What the plugin follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscriptions {
    /// Its streams.
    pub streams: Vec<Stream>,
    /// Granted paths whose change calls `set` at once.
    pub watch: Vec<String>,
}

impl Subscriptions {
    /// Nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Follows `s`.
    pub fn stream(mut self, s: Stream) -> Self {
        self.streams.push(s);
        self
    }

    /// Calls `set` at once when `path` (inside a granted path) changes.
    pub fn watch(mut self, path: &str) -> Self {
        self.watch.push(path.to_owned());
        self
    }
}

/// One match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The stream's name.
    pub stream: String,
    /// The index of the pattern that matched.
    pub pattern: u32,
    /// The matched line (or lines).
    pub text: String,
    /// When it was written, ms since the Unix epoch.
    pub time_ms: u64,
}

/// The matches of one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lines {
    /// Oldest first.
    pub matches: Vec<Match>,
    /// Matches the host dropped since the last call (the queue was full).
    pub dropped: u64,
}

impl Lines {
    /// Lines of one stream, each matched by `pattern` (a test helper: what
    /// the host would hand over), written now.
    pub fn of(stream: &str, pattern: u32, texts: &[&str]) -> Self {
        Self {
            matches: texts
                .iter()
                .map(|t| Match {
                    stream: stream.to_owned(),
                    pattern,
                    text: t.to_string(),
                    time_ms: 0,
                })
                .collect(),
            dropped: 0,
        }
    }
}

/// A setter that also reacts between passes. Export it with
/// [`export_reactor!`](crate::export_reactor).
pub trait Reactor: crate::Setter {
    /// What the plugin follows; called once at load, with its config
    /// readable ([`crate::host::config`]).
    fn subscribe() -> Subscriptions;
    /// Handles matches: writes the plugin's part on `node`, which is
    /// everything it sets, as in `set`.
    fn on_lines(node: &mut Node, lines: &Lines) -> Result<()>;
}

/// Runs a reactor's `on_lines` over a Node's JSON, returning its part as
/// [`crate::run`] does: the export glue calls it for WIT `on-lines`, and
/// tests call it natively to feed lines.
pub fn run_lines<R: Reactor>(
    node_json: &str,
    lines: &Lines,
) -> std::result::Result<Option<String>, String> {
    let mut node = Node::parse(node_json)
        .map_err(|e| format!("the host sent a node that does not parse: {e}"))?;
    R::on_lines(&mut node, lines).map_err(|e| e.to_string())?;
    Ok(Some(node.part_json()))
}

#[doc(hidden)]
pub fn __subscriptions(s: Subscriptions) -> wit::Subscriptions {
    wit::Subscriptions {
        streams: s
            .streams
            .into_iter()
            .map(|st| wit::Stream {
                name: st.name,
                source: match st.source {
                    Source::Kmsg => wit::Source::Kmsg,
                    Source::File(p) => wit::Source::File(p),
                    Source::Journal(u) => wit::Source::Journal(u),
                },
                patterns: st.patterns,
                span: st.span,
                lookback_seconds: st.lookback_seconds,
                extract: st.extract,
            })
            .collect(),
        watch: s.watch,
    }
}

#[doc(hidden)]
pub fn __lines(b: wit::Batch) -> Lines {
    Lines {
        matches: b
            .matches
            .into_iter()
            .map(|m| Match {
                stream: m.stream,
                pattern: m.pattern,
                text: m.text,
                time_ms: m.time_ms,
            })
            .collect(),
        dropped: b.dropped,
    }
}
