//! What a reacting plugin (WIT `nodestatus:plugin@0.2.1`, world
//! `reactor-plugin`) follows, checked at load: its streams (each granted by
//! the operator, its patterns compiled) and the granted paths whose change
//! calls it. The engine reads the streams and hands the matches back
//! ([`Batch`], [`crate::Plugin::call_lines`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::PathGrant;
use super::host_api::bindings::exports::nodestatus::plugin0_2_1::reactor as wit;

/// Most streams one plugin may follow.
pub const MAX_STREAMS: usize = 16;
/// Most patterns of one stream.
pub const MAX_PATTERNS: usize = 256;
/// Most lines one pattern may span.
pub const MAX_SPAN: u32 = 64;
/// Longest lookback a stream may ask for.
pub const MAX_LOOKBACK: Duration = Duration::from_secs(30 * 24 * 3600);
/// Most paths a plugin may watch.
pub const MAX_WATCHED: usize = 64;
/// Longest text of one match handed over; a line is cut here, and counted.
pub const MAX_LINE_BYTES: usize = 64 << 10;
/// Most matches handed over in one call.
pub const MAX_BATCH: usize = 1000;
/// Largest compiled pattern (the regex crate's size limit), so that a
/// pattern cannot make the host build a huge automaton.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A stream the operator may grant (`streams:` in a plugin's section).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum StreamGrant {
    /// The kernel's log, `/dev/kmsg`.
    Kmsg,
    /// The systemd journal.
    Journal,
    /// A file (at this absolute path) followed as it grows.
    File(PathBuf),
}

impl StreamGrant {
    /// As the config writes it: `kmsg`, `journal`, or the file's path.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "kmsg" => Ok(Self::Kmsg),
            "journal" => Ok(Self::Journal),
            p if p.starts_with('/') => {
                let path = PathBuf::from(p);
                if path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                {
                    return Err(format!("{p:?} has a `..`: write the file's own path"));
                }
                Ok(Self::File(path))
            }
            other => Err(format!(
                "{other:?} is not a stream: write kmsg (the kernel log), journal (the systemd journal) or a log file's absolute path"
            )),
        }
    }
}

impl std::fmt::Display for StreamGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kmsg => f.write_str("kmsg"),
            Self::Journal => f.write_str("journal"),
            Self::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Where a stream's lines come from, as the host reads it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// `/dev/kmsg`.
    Kmsg,
    /// A file that grows, at this path on the host.
    File(PathBuf),
    /// The journal, these units or identifiers (all when empty).
    Journal(Vec<String>),
}

impl Source {
    /// The grant that covers it.
    pub fn grant(&self) -> StreamGrant {
        match self {
            Self::Kmsg => StreamGrant::Kmsg,
            Self::File(p) => StreamGrant::File(p.clone()),
            Self::Journal(_) => StreamGrant::Journal,
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Journal(units) if !units.is_empty() => {
                write!(f, "journal ({})", units.join(", "))
            }
            other => other.grant().fmt(f),
        }
    }
}

/// One stream a plugin follows, checked: granted, its patterns compiled.
#[derive(Debug, Clone)]
pub struct Stream {
    /// The plugin's name for it.
    pub name: Arc<str>,
    /// Where its lines come from.
    pub source: Source,
    /// Its patterns, compiled, in the plugin's order.
    pub patterns: Arc<[regex::Regex]>,
    /// How many lines one pattern may span (1: each line alone).
    pub span: usize,
    /// How far back it starts.
    pub lookback: Duration,
    /// What takes each line's message out of it (its first group), when
    /// the plugin gave one.
    pub extract: Option<regex::Regex>,
}

/// What a plugin follows, checked at load.
#[derive(Debug, Clone, Default)]
pub struct Subscriptions {
    /// The granted streams.
    pub streams: Vec<Stream>,
    /// Host paths whose change calls the plugin (each inside a path
    /// granted to it).
    pub watch: Vec<PathBuf>,
}

impl Subscriptions {
    /// As `plugin check` and `/status` show it: each stream's name, source,
    /// patterns, span and lookback, and the watched paths.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "streams": self.streams.iter().map(|s| serde_json::json!({
                "name": &*s.name,
                "source": s.source.to_string(),
                "patterns": s.patterns.iter().map(regex::Regex::as_str).collect::<Vec<_>>(),
                "span": s.span,
                "lookbackSeconds": s.lookback.as_secs(),
                "extract": s.extract.as_ref().map(regex::Regex::as_str),
            })).collect::<Vec<_>>(),
            "watch": self.watch,
        })
    }
}

/// One matched line (or lines), to hand to the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMatch {
    /// The stream's name, as the plugin gave it.
    pub stream: Arc<str>,
    /// The index of the pattern that matched.
    pub pattern: u32,
    /// The text that matched (cut at [`MAX_LINE_BYTES`]).
    pub text: String,
    /// When it was written, in milliseconds since the Unix epoch.
    pub time_ms: u64,
}

/// The matches of one call, with the count dropped before them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// Oldest first, at most [`MAX_BATCH`].
    pub matches: Vec<LineMatch>,
    /// Matches dropped since the last call (the queue was full).
    pub dropped: u64,
}

impl Batch {
    pub(crate) fn to_wit(&self) -> wit::Batch {
        wit::Batch {
            matches: self
                .matches
                .iter()
                .map(|m| wit::Match {
                    stream: m.stream.to_string(),
                    pattern: m.pattern,
                    text: m.text.clone(),
                    time_ms: m.time_ms,
                })
                .collect(),
            dropped: self.dropped,
        }
    }
}

/// Why a plugin's subscriptions were refused: the load fails, naming the
/// stream and the pattern.
#[derive(Debug, thiserror::Error)]
pub enum SubscriptionError {
    /// More streams than [`MAX_STREAMS`].
    #[error("it asks for {0} streams; at most {MAX_STREAMS}")]
    TooManyStreams(usize),
    /// A stream name empty, too long or given twice.
    #[error("stream name {0:?} is empty, longer than 63 bytes or given twice")]
    BadName(String),
    /// More patterns than [`MAX_PATTERNS`].
    #[error("stream {stream:?} has {count} patterns; at most {MAX_PATTERNS}")]
    TooManyPatterns {
        /// The stream.
        stream: String,
        /// How many it has.
        count: usize,
    },
    /// A pattern that does not compile.
    #[error(
        "stream {stream:?}, pattern {index} ({pattern:?}) is not a valid regular expression: {reason}"
    )]
    Pattern {
        /// The stream.
        stream: String,
        /// The pattern's index.
        index: usize,
        /// The pattern as written.
        pattern: String,
        /// What the regex parser says.
        reason: String,
    },
    /// An `extract` that does not compile.
    #[error("stream {stream:?}, extract ({pattern:?}) is not a valid regular expression: {reason}")]
    Extract {
        /// The stream.
        stream: String,
        /// The expression as written.
        pattern: String,
        /// What the regex parser says.
        reason: String,
    },
    /// A span outside 1 to [`MAX_SPAN`].
    #[error("stream {stream:?} spans {span} lines; write 1 to {MAX_SPAN}")]
    Span {
        /// The stream.
        stream: String,
        /// Its span.
        span: u32,
    },
    /// A lookback over [`MAX_LOOKBACK`].
    #[error("stream {stream:?} looks back {seconds} s; at most 30 days")]
    Lookback {
        /// The stream.
        stream: String,
        /// Its lookback.
        seconds: u64,
    },
    /// A file stream whose path is not absolute.
    #[error("stream {stream:?} follows {path:?}, which is not an absolute path")]
    FilePath {
        /// The stream.
        stream: String,
        /// The path.
        path: String,
    },
    /// More watched paths than [`MAX_WATCHED`].
    #[error("it watches {0} paths; at most {MAX_WATCHED}")]
    TooManyWatched(usize),
}

/// What the plugin asked for, checked: the streams granted (the others
/// are returned as refused, with the grant that would allow each), their
/// patterns compiled; the watched paths inside `granted` (mapped to the
/// host's), the others refused.
pub(crate) fn check(
    raw: wit::Subscriptions,
    grants: &[StreamGrant],
    granted: &[PathGrant],
) -> Result<(Subscriptions, Vec<String>), SubscriptionError> {
    if raw.streams.len() > MAX_STREAMS {
        return Err(SubscriptionError::TooManyStreams(raw.streams.len()));
    }
    if raw.watch.len() > MAX_WATCHED {
        return Err(SubscriptionError::TooManyWatched(raw.watch.len()));
    }
    let mut out = Subscriptions::default();
    let mut refused = Vec::new();
    let mut names = std::collections::HashSet::new();
    for s in raw.streams {
        if s.name.is_empty() || s.name.len() > 63 || !names.insert(s.name.clone()) {
            return Err(SubscriptionError::BadName(s.name));
        }
        let stream = s.name.clone();
        if s.patterns.len() > MAX_PATTERNS {
            return Err(SubscriptionError::TooManyPatterns {
                stream,
                count: s.patterns.len(),
            });
        }
        if !(1..=MAX_SPAN).contains(&s.span) {
            return Err(SubscriptionError::Span {
                stream,
                span: s.span,
            });
        }
        if s.lookback_seconds > MAX_LOOKBACK.as_secs() {
            return Err(SubscriptionError::Lookback {
                stream,
                seconds: s.lookback_seconds,
            });
        }
        let patterns = s
            .patterns
            .iter()
            .enumerate()
            .map(|(index, p)| {
                compile(p).map_err(|reason| SubscriptionError::Pattern {
                    stream: stream.clone(),
                    index,
                    pattern: p.clone(),
                    reason,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let extract = s
            .extract
            .as_deref()
            .map(|p| {
                compile(p).map_err(|reason| SubscriptionError::Extract {
                    stream: stream.clone(),
                    pattern: p.to_owned(),
                    reason,
                })
            })
            .transpose()?;
        let source = match s.source {
            wit::Source::Kmsg => Source::Kmsg,
            wit::Source::File(p) => {
                if !p.starts_with('/') {
                    return Err(SubscriptionError::FilePath { stream, path: p });
                }
                Source::File(PathBuf::from(p))
            }
            wit::Source::Journal(units) => Source::Journal(units),
        };
        let grant = source.grant();
        if !grants.contains(&grant) {
            refused.push(format!(
                "stream {stream:?} ({source}): grant it in the plugin's streams ({grant})"
            ));
            continue;
        }
        out.streams.push(Stream {
            name: Arc::from(stream.as_str()),
            source,
            patterns: patterns.into(),
            span: s.span as usize,
            lookback: Duration::from_secs(s.lookback_seconds),
            extract,
        });
    }
    for w in raw.watch {
        let asked = Path::new(&w);
        let holder = granted
            .iter()
            .filter(|g| asked.is_absolute() && asked.starts_with(&g.path))
            .max_by_key(|g| g.path.components().count());
        match holder.and_then(|g| g.host_path(asked)) {
            Some(host) => out.watch.push(host),
            None => refused.push(format!(
                "watching {w:?}: it is not inside a path granted to the plugin (its paths)"
            )),
        }
    }
    Ok((out, refused))
}

/// A pattern as the host matches it, bounded in size.
pub fn compile(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(name: &str, source: wit::Source, patterns: &[&str], span: u32) -> wit::Stream {
        wit::Stream {
            name: name.into(),
            source,
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            span,
            lookback_seconds: 0,
            extract: None,
        }
    }

    #[test]
    fn an_ungranted_stream_is_refused_alone_and_the_granted_one_kept() {
        let raw = wit::Subscriptions {
            streams: vec![
                stream("kernel", wit::Source::Kmsg, &["Xid"], 1),
                stream(
                    "syslog",
                    wit::Source::File("/var/log/syslog".into()),
                    &["x"],
                    1,
                ),
            ],
            watch: vec![],
        };
        let (subs, refused) = check(raw, &[StreamGrant::Kmsg], &[]).unwrap();
        assert_eq!(subs.streams.len(), 1);
        assert_eq!(&*subs.streams[0].name, "kernel");
        assert_eq!(refused.len(), 1);
        assert!(refused[0].contains("/var/log/syslog"), "{refused:?}");
    }

    #[test]
    fn a_pattern_that_does_not_compile_names_its_stream_and_index() {
        let raw = wit::Subscriptions {
            streams: vec![stream("kernel", wit::Source::Kmsg, &["ok", "(unclosed"], 1)],
            watch: vec![],
        };
        let e = check(raw, &[StreamGrant::Kmsg], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"kernel\", pattern 1 (\"(unclosed\")"), "{e}");
    }

    #[test]
    fn a_pattern_too_large_for_the_bound_is_refused() {
        assert!(compile("a{1000}{1000}").is_err());
        assert!(compile("NVRM: Xid").is_ok());
    }

    #[test]
    fn a_watched_path_outside_the_grants_is_refused_and_one_inside_is_mapped() {
        let raw = wit::Subscriptions {
            streams: vec![],
            watch: vec!["/etc/features.d".into(), "/root".into()],
        };
        let granted = [PathGrant {
            path: "/etc".into(),
            from: "/host/etc".into(),
        }];
        let (subs, refused) = check(raw, &[], &granted).unwrap();
        assert_eq!(subs.watch, vec![PathBuf::from("/host/etc/features.d")]);
        assert_eq!(refused.len(), 1);
    }

    #[test]
    fn stream_grants_parse_as_written() {
        assert_eq!(StreamGrant::parse("kmsg"), Ok(StreamGrant::Kmsg));
        assert_eq!(
            StreamGrant::parse("/var/log/syslog"),
            Ok(StreamGrant::File("/var/log/syslog".into()))
        );
        assert!(StreamGrant::parse("syslog").is_err());
        assert!(StreamGrant::parse("/var/log/../etc/shadow").is_err());
    }
}
