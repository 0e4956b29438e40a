//! Streams and file triggers: what reacting plugins (WIT 0.2.1's
//! `reactor`) follow between passes.
//!
//! - **One reader per source**, however many plugins follow it: the
//!   kernel log, a file (as `tail -F`), the journal. Each runs on a thread
//!   of its own and matches every subscriber's patterns there, on the host
//!   ([`matcher`]: linear-time regexes, all of a stream's patterns in one
//!   pass), so a flood of lines no plugin wants costs no guest call.
//! - **A bounded queue per plugin** ([`QUEUE_CAPACITY`] matches, and
//!   [`QUEUE_BYTES`]): what overflows is dropped and counted, never held.
//!   The pass hands a plugin its queue through `on-lines`
//!   ([`Streams::take`]).
//! - **A wake-up**: a match, or a change of a watched path, wakes the
//!   agent ([`Streams::woken`]), which runs a pass at once (its own gate
//!   keeps the status patches at about one a second).
//!
//! The subscriptions in force follow the plugin set ([`Streams::update`]):
//! a reader starts with its first subscriber and stops with its last; a
//! subscription kept across a reload keeps its place in the stream (no
//! line handed twice), and a new one that looks back reads its source
//! again from the start (the kernel's ring, or 1 MiB of a file), the
//! others skipping what they saw.

pub mod matcher;
pub mod source;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodestatus_runtime::reactor::{Batch, LineMatch, MAX_BATCH, Source as StreamSource};

use matcher::{Line, Matcher};
use source::{FollowFile, Journal, Kmsg, Record, Source, Start};

/// Most matches waiting for one plugin.
pub const QUEUE_CAPACITY: usize = 4096;
/// Most bytes of matched text waiting for one plugin.
pub const QUEUE_BYTES: usize = 8 << 20;
/// Longest line a reader keeps whole while it waits for its newline (the
/// rest is cut, and counted when it is matched).
pub(crate) const MAX_PENDING_LINE: usize = nodestatus_runtime::reactor::MAX_LINE_BYTES + 1;
/// How long a reader waits for a line before it looks whether it is to
/// stop or start again.
const READ_WAIT: Duration = Duration::from_millis(250);
/// How long a reader whose source failed waits before it opens it again.
const REOPEN_AFTER: Duration = Duration::from_secs(5);

/// One plugin's counters, for `/metrics` and `/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Matches queued.
    pub matched: u64,
    /// Matches dropped: the queue was full.
    pub dropped: u64,
    /// Lines cut at 64 KiB.
    pub cut: u64,
    /// Matches handed to the plugin.
    pub handed: u64,
    /// Wake-ups by a watched path's change.
    pub triggered: u64,
}

/// What a plugin follows, as `/status` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PluginStreams {
    /// Its streams: `name (source)`.
    pub streams: Vec<String>,
    /// The paths whose change calls it.
    pub watch: Vec<PathBuf>,
    /// Its counters.
    pub counts: Counts,
    /// What fails now: a source that cannot be read (no `/dev/kmsg`, no
    /// journal, a file that cannot be opened), with the error.
    pub problems: Vec<String>,
}

#[derive(Default)]
struct Queue {
    matches: VecDeque<LineMatch>,
    bytes: usize,
    /// Dropped since the last batch.
    dropped: u64,
    counts: Counts,
}

/// Where readers put matches and what wakes the agent.
#[derive(Default)]
struct Sink {
    queues: Mutex<HashMap<Arc<str>, Queue>>,
    wake: tokio::sync::Notify,
    /// A watched path, or one on the way to it, was created, removed or
    /// renamed: the watches are set again at the next wake-up
    /// ([`Streams::woken`]), on the path itself once it exists.
    rearm: AtomicBool,
}

impl Sink {
    fn push(&self, plugin: &Arc<str>, m: LineMatch, cut: u64) {
        let mut queues = self.queues.lock().expect("queues lock");
        let q = queues.entry(plugin.clone()).or_default();
        q.counts.cut += cut;
        if q.matches.len() >= QUEUE_CAPACITY || q.bytes + m.text.len() > QUEUE_BYTES {
            q.dropped += 1;
            q.counts.dropped += 1;
            return;
        }
        q.bytes += m.text.len();
        q.counts.matched += 1;
        q.matches.push_back(m);
    }

    fn wake(&self) {
        self.wake.notify_one();
    }
}

/// A source's reader: its thread and what it shares with the hub.
struct Reader {
    shared: Arc<ReaderShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct ReaderShared {
    source: StreamSource,
    matchers: Mutex<Vec<Matcher>>,
    stop: AtomicBool,
    /// Open the source again from the start (a subscription that looks
    /// back came).
    restart: AtomicBool,
    problem: Mutex<Option<String>>,
    /// Where the reader is (generation, offset), for a new subscription
    /// that starts from now.
    generation: AtomicU64,
    offset: AtomicU64,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // The thread sees it within READ_WAIT; nobody waits for it (the
        // handle is let go: the thread is detached).
        let _detached = self.thread.take();
    }
}

/// A plugin and what it follows.
pub(crate) type Wanted = (Arc<str>, Arc<nodestatus_runtime::reactor::Subscriptions>);

/// The key of a reader: the journal is read once for every unit.
fn reader_key(s: &StreamSource) -> StreamSource {
    match s {
        StreamSource::Journal(_) => StreamSource::Journal(Vec::new()),
        other => other.clone(),
    }
}

#[derive(Default)]
struct Hub {
    /// The subscriptions in force, by plugin (their identity).
    current: Vec<(Arc<str>, usize)>,
    readers: HashMap<StreamSource, Reader>,
    watched: HashMap<PathBuf, Vec<Arc<str>>>,
    watcher: Option<notify::RecommendedWatcher>,
    /// The plugins' streams as `/status` shows them.
    described: Vec<(Arc<str>, Vec<String>, Vec<PathBuf>)>,
}

/// The streams and file triggers of one node's reacting plugins.
#[derive(Clone, Default)]
pub struct Streams {
    sink: Arc<Sink>,
    hub: Arc<Mutex<Hub>>,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams").finish_non_exhaustive()
    }
}

impl Streams {
    /// No subscription yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the subscriptions in force those of the reacting plugins
    /// among `plugins` (nothing to do when they are the same as before).
    pub fn update<'a>(&self, plugins: impl IntoIterator<Item = &'a nodestatus_runtime::Plugin>) {
        let wanted: Vec<Wanted> = plugins
            .into_iter()
            .filter_map(|p| {
                let subs = p.subscriptions()?;
                Some((Arc::from(p.name()), subs.clone()))
            })
            .collect();
        self.subscribe(wanted);
    }

    /// Makes these plugins' subscriptions the ones in force.
    pub(crate) fn subscribe(&self, wanted: Vec<Wanted>) {
        let identity: Vec<(Arc<str>, usize)> = wanted
            .iter()
            .map(|(n, s)| (n.clone(), Arc::as_ptr(s) as usize))
            .collect();
        let mut hub = self.hub.lock().expect("hub lock");
        if hub.current == identity {
            return;
        }
        hub.current = identity;
        let now = source::now_ms();
        // The matchers each reader is to have, by source.
        let mut by_source: HashMap<
            StreamSource,
            Vec<(Arc<str>, nodestatus_runtime::reactor::Stream)>,
        > = HashMap::new();
        for (plugin, subs) in &wanted {
            for s in &subs.streams {
                by_source
                    .entry(reader_key(&s.source))
                    .or_default()
                    .push((plugin.clone(), s.clone()));
            }
        }
        hub.readers.retain(|key, _| by_source.contains_key(key));
        for (key, streams) in by_source {
            let existing = hub.readers.get(&key).map(|r| r.shared.clone());
            let shared = existing.clone().unwrap_or_else(|| {
                Arc::new(ReaderShared {
                    source: key.clone(),
                    matchers: Mutex::new(Vec::new()),
                    stop: AtomicBool::new(false),
                    restart: AtomicBool::new(false),
                    problem: Mutex::new(None),
                    generation: AtomicU64::new(0),
                    offset: AtomicU64::new(0),
                })
            });
            let mut old = std::mem::take(&mut *shared.matchers.lock().expect("matchers lock"));
            let mut looks_back = false;
            let here = matcher::Position {
                generation: shared.generation.load(Ordering::Relaxed),
                offset: shared.offset.load(Ordering::Relaxed),
            };
            let matchers: Vec<Matcher> = streams
                .into_iter()
                .map(|(plugin, stream)| {
                    let kept = old.iter().position(|m| {
                        m.plugin == plugin
                            && m.stream.name == stream.name
                            && m.stream.source == stream.source
                            && m.stream.span == stream.span
                            && same_patterns(&m.stream, &stream)
                            && m.stream.extract.as_ref().map(regex::Regex::as_str)
                                == stream.extract.as_ref().map(regex::Regex::as_str)
                    });
                    match kept {
                        Some(i) => old.swap_remove(i),
                        None => {
                            let not_before = now.saturating_sub(stream.lookback.as_millis() as u64);
                            let back = !stream.lookback.is_zero();
                            looks_back |= back;
                            let mut m = Matcher::new(plugin, stream, not_before);
                            if !back && existing.is_some() {
                                m.seen = Some(matcher::Position {
                                    offset: here.offset.saturating_sub(1),
                                    ..here
                                });
                            }
                            m
                        }
                    }
                })
                .collect();
            let mut matchers = matchers;
            if existing.is_some() && looks_back {
                // The reader starts again from the start: a subscription
                // from now that saw no line yet skips what is there now.
                for m in matchers.iter_mut() {
                    if m.seen.is_none() && m.stream.lookback.is_zero() {
                        m.seen = Some(matcher::Position {
                            offset: here.offset.saturating_sub(1),
                            ..here
                        });
                    }
                }
            }
            *shared.matchers.lock().expect("matchers lock") = matchers;
            if existing.is_some() {
                if looks_back {
                    shared.restart.store(true, Ordering::Relaxed);
                }
            } else {
                let sink = self.sink.clone();
                let start = if looks_back { Start::Back } else { Start::End };
                let thread_shared = shared.clone();
                let thread = std::thread::Builder::new()
                    .name(format!("stream {key}"))
                    .spawn(move || read_loop(thread_shared, sink, start))
                    .ok();
                hub.readers.insert(key, Reader { shared, thread });
            }
        }
        // Watched paths.
        let mut watched: HashMap<PathBuf, Vec<Arc<str>>> = HashMap::new();
        for (plugin, subs) in &wanted {
            for p in &subs.watch {
                watched.entry(p.clone()).or_default().push(plugin.clone());
            }
        }
        if watched != hub.watched {
            hub.watcher = watch_paths(&watched, self.sink.clone());
            hub.watched = watched;
        }
        let names: Vec<Arc<str>> = wanted.iter().map(|(n, _)| n.clone()).collect();
        self.sink
            .queues
            .lock()
            .expect("queues lock")
            .retain(|p, _| names.contains(p));
        hub.described = wanted
            .iter()
            .map(|(n, s)| {
                (
                    n.clone(),
                    s.streams
                        .iter()
                        .map(|st| format!("{} ({})", st.name, st.source))
                        .collect(),
                    s.watch.clone(),
                )
            })
            .collect();
    }

    /// The matches waiting for `plugin`, oldest first, at most
    /// [`MAX_BATCH`] (the rest wake the agent again), with the count
    /// dropped since its last batch; `None` when nothing waits.
    pub fn take(&self, plugin: &str) -> Option<Batch> {
        let mut queues = self.sink.queues.lock().expect("queues lock");
        let q = queues.get_mut(plugin)?;
        if q.matches.is_empty() && q.dropped == 0 {
            return None;
        }
        let n = q.matches.len().min(MAX_BATCH);
        let matches: Vec<LineMatch> = q.matches.drain(..n).collect();
        q.bytes -= matches.iter().map(|m| m.text.len()).sum::<usize>();
        q.counts.handed += n as u64;
        let batch = Batch {
            matches,
            dropped: std::mem::take(&mut q.dropped),
        };
        if !q.matches.is_empty() {
            self.sink.wake();
        }
        Some(batch)
    }

    /// Waits until a match is queued or a watched path changes. When a
    /// watched path (or a directory on the way to it) appeared or went
    /// away, the watches are set again first, so that a directory created
    /// after the plugin loaded, or removed and created again, is watched
    /// itself from then on (a pass follows the wake-up and reads what is
    /// there).
    pub async fn woken(&self) {
        self.sink.wake.notified().await;
        if self.sink.rearm.swap(false, Ordering::Relaxed) {
            let mut hub = self.hub.lock().expect("hub lock");
            let watched = hub.watched.clone();
            hub.watcher = watch_paths(&watched, self.sink.clone());
        }
    }

    /// What each reacting plugin follows, with its counters and problems.
    ///
    /// Locks in the readers' order: a reader holds its matchers while it
    /// queues (`feed`), so the matchers are read here before the queues are
    /// locked, never inside.
    pub fn status(&self) -> Vec<(String, PluginStreams)> {
        let hub = self.hub.lock().expect("hub lock");
        let problems: Vec<Vec<String>> = hub
            .described
            .iter()
            .map(|(plugin, _, _)| {
                hub.readers
                    .values()
                    .filter(|r| {
                        r.shared
                            .matchers
                            .lock()
                            .expect("matchers lock")
                            .iter()
                            .any(|m| m.plugin == *plugin)
                    })
                    .filter_map(|r| {
                        let p = r.shared.problem.lock().expect("problem lock");
                        p.as_ref().map(|e| format!("{}: {e}", r.shared.source))
                    })
                    .collect()
            })
            .collect();
        let queues = self.sink.queues.lock().expect("queues lock");
        hub.described
            .iter()
            .zip(problems)
            .map(|((plugin, streams, watch), problems)| {
                (
                    plugin.to_string(),
                    PluginStreams {
                        streams: streams.clone(),
                        watch: watch.clone(),
                        counts: queues.get(plugin).map(|q| q.counts).unwrap_or_default(),
                        problems,
                    },
                )
            })
            .collect()
    }
}

fn same_patterns(
    a: &nodestatus_runtime::reactor::Stream,
    b: &nodestatus_runtime::reactor::Stream,
) -> bool {
    a.patterns.len() == b.patterns.len()
        && a.patterns
            .iter()
            .zip(b.patterns.iter())
            .all(|(x, y)| x.as_str() == y.as_str())
}

/// Opens the reader's source.
fn open(
    source: &StreamSource,
    start: Start,
    lookback: Duration,
    generation: u64,
) -> std::io::Result<Box<dyn Source>> {
    Ok(match source {
        StreamSource::Kmsg => Box::new(Kmsg::open(std::path::Path::new(source::KMSG), start)?),
        StreamSource::File(p) => Box::new(FollowFile::new(p.clone(), start).continuing(generation)),
        StreamSource::Journal(_) => Box::new(Journal::open(lookback.as_secs())?),
    })
}

/// A reader's thread: reads its source, feeds every matcher, queues the
/// matches and wakes the agent; opens the source again after a failure
/// (every [`REOPEN_AFTER`]) or when a subscription that looks back came.
fn read_loop(shared: Arc<ReaderShared>, sink: Arc<Sink>, first: Start) {
    let mut start = first;
    let mut reported: Option<String> = None;
    'open: while !shared.stop.load(Ordering::Relaxed) {
        let lookback = shared
            .matchers
            .lock()
            .expect("matchers lock")
            .iter()
            .map(|m| m.stream.lookback)
            .max()
            .unwrap_or_default();
        let generation = shared.generation.load(Ordering::Relaxed);
        let mut src = match open(&shared.source, start, lookback, generation) {
            Ok(s) => s,
            Err(e) => {
                fail(&shared, &mut reported, e.to_string());
                std::thread::sleep(REOPEN_AFTER);
                continue;
            }
        };
        start = Start::End;
        while !shared.stop.load(Ordering::Relaxed) {
            if shared.restart.swap(false, Ordering::Relaxed) {
                start = Start::Back;
                continue 'open;
            }
            let record = match src.next(READ_WAIT) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    publish(&shared, src.position());
                    continue;
                }
                Err(e) => {
                    fail(&shared, &mut reported, e.to_string());
                    std::thread::sleep(REOPEN_AFTER);
                    continue 'open;
                }
            };
            if reported.take().is_some() {
                tracing::info!(source = %shared.source, "stream readable again");
                *shared.problem.lock().expect("problem lock") = None;
            }
            if feed(&shared, &sink, &record) {
                sink.wake();
            }
            publish(&shared, src.position());
        }
    }
}

fn publish(shared: &ReaderShared, at: matcher::Position) {
    shared.generation.store(at.generation, Ordering::Relaxed);
    shared.offset.store(at.offset, Ordering::Relaxed);
}

fn fail(shared: &ReaderShared, reported: &mut Option<String>, e: String) {
    if reported.as_deref() != Some(e.as_str()) {
        tracing::warn!(source = %shared.source, "cannot read the stream (tried again every {REOPEN_AFTER:?}): {e}");
        *reported = Some(e.clone());
    }
    *shared.problem.lock().expect("problem lock") = Some(e);
}

/// Feeds `record` to every matcher of the reader; whether anything was
/// queued.
fn feed(shared: &ReaderShared, sink: &Sink, record: &Record) -> bool {
    let line = Line {
        text: &record.text,
        time_ms: record.time_ms,
        at: record.at,
    };
    let mut queued = false;
    let mut matchers = shared.matchers.lock().expect("matchers lock");
    for m in matchers.iter_mut() {
        if let (StreamSource::Journal(units), Some(unit)) = (&m.stream.source, &record.unit)
            && !units.is_empty()
            && !units.iter().any(|u| u == unit)
        {
            continue;
        }
        let mut cut = 0;
        for found in m.feed(&line, &mut cut) {
            sink.push(&m.plugin, found, cut);
            cut = 0;
            queued = true;
        }
    }
    queued
}

/// A watcher of `paths` that wakes the agent on a change (the plugins it
/// calls are counted); `None` when nothing is watched or the watcher
/// cannot start (said in the log).
fn watch_paths(
    paths: &HashMap<PathBuf, Vec<Arc<str>>>,
    sink: Arc<Sink>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    if paths.is_empty() {
        return None;
    }
    let owners = paths.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        // No path: the watcher lost track (an overflow); wake to be safe.
        let mut relevant = event.paths.is_empty();
        let mut queues = sink.queues.lock().expect("queues lock");
        for (path, plugins) in &owners {
            if event.paths.iter().any(|p| p.starts_with(path)) {
                relevant = true;
                for p in plugins {
                    queues.entry(p.clone()).or_default().counts.triggered += 1;
                }
            }
            // The path itself, or a directory on the way to it: what is
            // watched for it changes.
            if event.paths.iter().any(|p| path.starts_with(p)) {
                relevant = true;
                sink.rearm.store(true, Ordering::Relaxed);
            }
        }
        drop(queues);
        // Another file of a directory watched on the way to a path that
        // does not exist yet (`/etc`, for a missing `/etc/kubernetes/...`)
        // wakes nothing.
        if relevant {
            sink.wake();
        }
    })
    .map_err(|e| tracing::warn!("cannot watch the plugins' paths: {e}"))
    .ok()?;
    for path in paths.keys() {
        // A path that does not exist yet is watched through the nearest
        // directory on the way to it that does, and again on the path
        // itself once it appears (`Sink::rearm`).
        let target = path
            .ancestors()
            .find(|a| a.exists())
            .unwrap_or(path)
            .to_path_buf();
        if let Err(e) = watcher.watch(&target, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(path = %path.display(), "cannot watch the path: {e}");
        }
    }
    Some(watcher)
}

#[cfg(test)]
mod tests;
