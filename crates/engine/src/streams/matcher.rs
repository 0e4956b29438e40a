//! One subscription's matching, on the host: the plugin's patterns over
//! each line of its stream (or the last `span` lines joined), in linear
//! time, so that a line no plugin wants costs no guest call.

use std::collections::VecDeque;
use std::sync::Arc;

use nodestatus_runtime::reactor::{LineMatch, MAX_LINE_BYTES, Stream};

/// Where a line sits in its source, so that a reader started again (a new
/// subscription that looks back) hands no subscription a line twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    /// Which generation of the source (the kernel log: 0; a file: its
    /// inode, so a rotated file starts again at offset 0).
    pub generation: u64,
    /// The kernel's sequence number, or a file's byte offset.
    pub offset: u64,
}

/// One line read from a source.
#[derive(Debug, Clone)]
pub struct Line<'a> {
    /// The text, without its newline.
    pub text: &'a str,
    /// When it was written, in milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// Where it sits.
    pub at: Position,
}

/// A plugin's subscription to one source: its patterns and the last lines
/// a multi-line pattern may span.
#[derive(Debug)]
pub struct Matcher {
    /// The plugin.
    pub plugin: Arc<str>,
    /// Its stream.
    pub stream: Stream,
    /// All its patterns at once (one pass over a line for all of them).
    set: regex::RegexSet,
    /// With a span above 1: the patterns that cannot match a newline nor
    /// anchor at a start (so a match ending in the newest line lies in it),
    /// matched against the newest line alone, as node-problem-detector's
    /// `lastLineOnly`; their indices in the stream's list.
    last_line: Option<(regex::RegexSet, Vec<usize>)>,
    /// The indices of the others, matched against the joined lines.
    spanning: Vec<usize>,
    /// The last lines, oldest first, at most `stream.span`.
    buffer: VecDeque<String>,
    /// Lines before this position were seen already (or are older than
    /// the lookback).
    pub seen: Option<Position>,
    /// Lines written before this time (ms since the epoch) are older than
    /// the lookback: skipped.
    pub not_before_ms: u64,
}

impl Matcher {
    /// A matcher of `stream` for `plugin`, skipping lines written before
    /// `not_before_ms`.
    pub fn new(plugin: Arc<str>, stream: Stream, not_before_ms: u64) -> Self {
        let build = |patterns: &mut dyn Iterator<Item = &str>| {
            regex::RegexSetBuilder::new(patterns)
                .size_limit(8 << 20)
                .build()
                // Each pattern compiled alone at load; a set too large for
                // the limit matches nothing, which the load-time bounds on
                // patterns make unreachable in practice.
                .unwrap_or_else(|_| regex::RegexSet::empty())
        };
        let set = build(&mut stream.patterns.iter().map(|r| r.as_str()));
        let (mut last, mut spanning) = (Vec::new(), Vec::new());
        for (i, p) in stream.patterns.iter().enumerate() {
            match stream.span > 1 && last_line_only(p.as_str()) {
                true => last.push(i),
                false => spanning.push(i),
            }
        }
        let last_line = (stream.span > 1 && !last.is_empty()).then(|| {
            let set = build(&mut last.iter().map(|i| stream.patterns[*i].as_str()));
            (set, last)
        });
        Self {
            plugin,
            stream,
            set,
            last_line,
            spanning,
            buffer: VecDeque::new(),
            seen: None,
            not_before_ms,
        }
    }

    /// The matches of `line`, one per pattern that matches (for a
    /// multi-line pattern: the lines it spans, up to this one). `cut`
    /// counts a line over [`MAX_LINE_BYTES`], which is cut there.
    pub fn feed(&mut self, line: &Line, cut: &mut u64) -> Vec<LineMatch> {
        if self.seen.is_some_and(|s| line.at <= s) || line.time_ms < self.not_before_ms {
            return Vec::new();
        }
        self.seen = Some(line.at);
        // The message, as the plugin's `extract` takes it out of the line.
        let message = match &self.stream.extract {
            None => line.text,
            Some(re) => match re.captures(line.text) {
                Some(c) => c.get(1).or_else(|| c.get(0)).map_or("", |m| m.as_str()),
                None => return Vec::new(),
            },
        };
        let text = cut_at(message, MAX_LINE_BYTES, cut);
        if self.stream.span <= 1 {
            return self
                .set
                .matches(text)
                .into_iter()
                .map(|i| self.found(i, text.to_owned(), line.time_ms))
                .collect();
        }
        if self.buffer.len() == self.stream.span {
            self.buffer.pop_front();
        }
        self.buffer.push_back(text.to_owned());
        let mut found: Vec<LineMatch> = match &self.last_line {
            Some((set, indices)) => set
                .matches(text)
                .into_iter()
                .map(|i| self.found(indices[i], text.to_owned(), line.time_ms))
                .collect(),
            None => Vec::new(),
        };
        if self.spanning.is_empty() {
            return found;
        }
        let joined = self
            .buffer
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n");
        // Where the newest line starts: a match must end in it.
        let newest = joined.len() - text.len();
        let hits: Vec<usize> = self
            .set
            .matches(&joined)
            .into_iter()
            .filter(|i| self.spanning.contains(i))
            .collect();
        found.extend(hits.into_iter().filter_map(|i| {
            let m = self.stream.patterns[i]
                .find_iter(&joined)
                .find(|m| m.end() > newest || (m.end() == newest && text.is_empty()))?;
            // From the start of the line the match starts in.
            let start = joined[..m.start()].rfind('\n').map_or(0, |p| p + 1);
            let mut ignored = 0;
            let spanned = cut_at(&joined[start..], MAX_LINE_BYTES, &mut ignored).to_owned();
            Some(self.found(i, spanned, line.time_ms))
        }));
        found.sort_by_key(|m| m.pattern);
        found
    }

    fn found(&self, pattern: usize, text: String, time_ms: u64) -> LineMatch {
        LineMatch {
            stream: self.stream.name.clone(),
            pattern: pattern as u32,
            text,
            time_ms,
        }
    }
}

/// Whether `pattern` can match only within one line and has no start
/// anchor (node-problem-detector's `isLastLineOnly`): no newline in a
/// literal or a class (`.` does not match one unless `(?s)`), no `^`, `$`
/// or `\A`. Then a match that ends in the newest line lies in it.
pub fn last_line_only(pattern: &str) -> bool {
    use regex_syntax::hir::{Class, Hir, HirKind, Look};
    fn walk(h: &Hir) -> bool {
        match h.kind() {
            HirKind::Empty => true,
            HirKind::Literal(l) => !l.0.contains(&b'\n'),
            HirKind::Class(Class::Unicode(c)) => !c
                .ranges()
                .iter()
                .any(|r| r.start() <= '\n' && '\n' <= r.end()),
            HirKind::Class(Class::Bytes(c)) => !c
                .ranges()
                .iter()
                .any(|r| r.start() <= b'\n' && b'\n' <= r.end()),
            HirKind::Look(l) => !matches!(
                l,
                Look::Start | Look::StartLF | Look::StartCRLF | Look::EndLF | Look::EndCRLF
            ),
            HirKind::Repetition(r) => walk(&r.sub),
            HirKind::Capture(c) => walk(&c.sub),
            HirKind::Concat(hs) | HirKind::Alternation(hs) => hs.iter().all(walk),
        }
    }
    regex_syntax::parse(pattern).is_ok_and(|h| walk(&h))
}

/// `text` cut at `max` bytes (on a character boundary), counting a cut.
fn cut_at<'a>(text: &'a str, max: usize, cut: &mut u64) -> &'a str {
    if text.len() <= max {
        return text;
    }
    *cut += 1;
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodestatus_runtime::reactor::{Source, compile};
    use std::time::Duration;

    fn stream(patterns: &[&str], span: usize) -> Stream {
        Stream {
            name: Arc::from("kernel"),
            source: Source::Kmsg,
            patterns: patterns
                .iter()
                .map(|p| compile(p).unwrap())
                .collect::<Vec<_>>()
                .into(),
            span,
            lookback: Duration::ZERO,
            extract: None,
        }
    }

    fn line(text: &str, offset: u64) -> Line<'_> {
        Line {
            text,
            time_ms: 1000 + offset,
            at: Position {
                generation: 0,
                offset,
            },
        }
    }

    #[test]
    fn each_pattern_that_matches_a_line_is_one_match_and_others_none() {
        let mut m = Matcher::new(
            Arc::from("p"),
            stream(&["Xid", r"I/O error, dev (\w+)"], 1),
            0,
        );
        let mut cut = 0;
        assert!(m.feed(&line("nothing to see", 1), &mut cut).is_empty());
        let got = m.feed(
            &line("NVRM: Xid (PCI:0000:3b:00): 79, I/O error, dev sdb", 2),
            &mut cut,
        );
        assert_eq!(
            got.iter().map(|m| m.pattern).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(got[0].time_ms, 1002);
    }

    #[test]
    fn a_line_seen_before_or_older_than_the_lookback_is_skipped() {
        let mut m = Matcher::new(Arc::from("p"), stream(&["x"], 1), 1005);
        let mut cut = 0;
        assert!(
            m.feed(&line("x", 3), &mut cut).is_empty(),
            "older than the lookback"
        );
        assert_eq!(m.feed(&line("x", 6), &mut cut).len(), 1);
        assert!(
            m.feed(&line("x", 6), &mut cut).is_empty(),
            "the same line again"
        );
        assert_eq!(m.feed(&line("x", 7), &mut cut).len(), 1);
    }

    #[test]
    fn a_multi_line_pattern_matches_once_its_last_line_comes_and_hands_the_lines_it_spans() {
        let mut m = Matcher::new(
            Arc::from("p"),
            stream(&[r"INFO: task \S+ blocked\nCall Trace:\z"], 4),
            0,
        );
        let mut cut = 0;
        assert!(
            m.feed(&line("INFO: task a:1 blocked", 1), &mut cut)
                .is_empty()
        );
        let got = m.feed(&line("Call Trace:", 2), &mut cut);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].text, "INFO: task a:1 blocked\nCall Trace:");
        assert!(
            m.feed(&line("something else", 3), &mut cut).is_empty(),
            "not again"
        );
    }

    #[test]
    fn an_unanchored_multi_line_pattern_does_not_match_the_same_lines_again() {
        let mut m = Matcher::new(Arc::from("p"), stream(&["a\nb"], 3), 0);
        let mut cut = 0;
        assert!(m.feed(&line("a", 1), &mut cut).is_empty());
        assert_eq!(m.feed(&line("b", 2), &mut cut).len(), 1);
        assert!(
            m.feed(&line("c", 3), &mut cut).is_empty(),
            "a\\nb is not in the newest line"
        );
    }

    #[test]
    fn extract_takes_the_message_out_and_skips_lines_it_does_not_match() {
        let mut s = stream(&["^Buffer I/O error"], 1);
        s.extract = Some(compile(r"kernel: \[.*\] (.*)").unwrap());
        let mut m = Matcher::new(Arc::from("p"), s, 0);
        let mut cut = 0;
        let got = m.feed(
            &line(
                "Nov 29 04:00:00 host kernel: [ 12.5] Buffer I/O error on dev sdb",
                1,
            ),
            &mut cut,
        );
        assert_eq!(got[0].text, "Buffer I/O error on dev sdb");
        assert!(
            m.feed(&line("Buffer I/O error, no kernel prefix", 2), &mut cut)
                .is_empty()
        );
    }

    #[test]
    fn patterns_that_stay_in_one_line_are_told_apart_as_npd_tells_them() {
        for p in [
            r"task [\S ]+:\w+ blocked for more than \w+ seconds\.\z",
            "EXT4-fs error .*\\z",
            r"\w{2}",
        ] {
            assert!(last_line_only(p), "{p}");
        }
        for p in [
            "(?s)a1.+",
            "a1\nb2",
            r"[a-z]\d\n[a-z]\d",
            "^start",
            r"[^x]+",
            r"\s",
        ] {
            assert!(!last_line_only(p), "{p}");
        }
    }

    /// node-problem-detector's own cases (`log_buffer_test.go`, TestMatch,
    /// a buffer of 4), each pattern as NPD compiles it (`pattern + "\z"`):
    /// what matches once the last line is in.
    #[test]
    fn npds_buffer_cases_match_as_npd_matches_them() {
        for (logs, cases) in [
            (
                &["a1", "b2"][..],
                &[
                    ("a1", None),
                    ("b1", None),
                    ("b2", Some("b2")),
                    (r"\w{2}", Some("b2")),
                    ("a1\nb2", Some("a1\nb2")),
                    ("a1b2", None),
                ][..],
            ),
            (
                &["a1", "b2", "c3", "d4", "e5"][..],
                &[
                    ("(?s)a1.+", None),
                    (r"[a-z]\d\n[a-z]\d", Some("d4\ne5")),
                    (r"[a-z]\d", Some("e5")),
                ][..],
            ),
        ] {
            for (pattern, want) in cases {
                let mut m = Matcher::new(Arc::from("p"), stream(&[&format!("{pattern}\\z")], 4), 0);
                let mut cut = 0;
                let mut last = Vec::new();
                for (i, l) in logs.iter().enumerate() {
                    last = m.feed(&line(l, i as u64 + 1), &mut cut);
                }
                assert_eq!(last.first().map(|m| m.text.as_str()), *want, "{pattern:?}");
            }
        }
    }

    #[test]
    fn a_line_over_64_kib_is_cut_and_counted() {
        let mut m = Matcher::new(Arc::from("p"), stream(&["^a"], 1), 0);
        let long = "a".repeat(MAX_LINE_BYTES + 10);
        let mut cut = 0;
        let got = m.feed(&line(&long, 1), &mut cut);
        assert_eq!(got[0].text.len(), MAX_LINE_BYTES);
        assert_eq!(cut, 1);
    }
}
