//! The hub against real sources: a file written here, and the kernel's own
//! log (`/dev/kmsg`, written by root).

use super::*;
use nodestatus_runtime::reactor::{Stream, Subscriptions, compile};

fn subs(name: &str, source: StreamSource, patterns: &[&str], lookback: u64) -> Arc<Subscriptions> {
    Arc::new(Subscriptions {
        streams: vec![Stream {
            name: Arc::from(name),
            source,
            patterns: patterns
                .iter()
                .map(|p| compile(p).unwrap())
                .collect::<Vec<_>>()
                .into(),
            span: 1,
            lookback: Duration::from_secs(lookback),
            extract: None,
        }],
        watch: Vec::new(),
    })
}

/// Waits up to 5 s for a wake-up, then takes `plugin`'s batch.
fn wait_batch(s: &Streams, plugin: &str) -> Option<Batch> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if let Some(b) = s.take(plugin) {
            return Some(b);
        }
        rt.block_on(async {
            let _ = tokio::time::timeout(Duration::from_millis(200), s.woken()).await;
        });
    }
    None
}

fn append(path: &std::path::Path, text: &str) {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

#[test]
fn two_plugins_follow_one_file_each_gets_its_own_matches_and_unmatched_lines_cost_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "before\n").unwrap();
    let s = Streams::new();
    s.subscribe(vec![
        (
            Arc::from("a"),
            subs("app", StreamSource::File(log.clone()), &["ERROR (\\w+)"], 0),
        ),
        (
            Arc::from("b"),
            subs("app", StreamSource::File(log.clone()), &["WARN"], 0),
        ),
    ]);
    std::thread::sleep(Duration::from_millis(400));
    append(&log, "noise\nERROR disk\nWARN slow\nnoise\n");
    let a = wait_batch(&s, "a").expect("a's match");
    assert_eq!(a.matches.len(), 1);
    assert_eq!(a.matches[0].text, "ERROR disk");
    let b = wait_batch(&s, "b").expect("b's match");
    assert_eq!(b.matches[0].text, "WARN slow");
    assert_eq!(s.take("a"), None, "nothing more");
    let status = s.status();
    assert_eq!(status.len(), 2);
    assert_eq!(status[0].1.counts.matched, 1);
}

#[test]
fn a_full_queue_drops_and_counts_and_the_next_batch_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("flood.log");
    std::fs::write(&log, "").unwrap();
    let s = Streams::new();
    s.subscribe(vec![(
        Arc::from("a"),
        subs("f", StreamSource::File(log.clone()), &["hit"], 0),
    )]);
    std::thread::sleep(Duration::from_millis(400));
    append(&log, &"hit\n".repeat(QUEUE_CAPACITY + 100));
    // Let the reader read it all before taking anything.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.status()[0].1.counts.dropped < 100 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let first = s.take("a").unwrap();
    assert_eq!(first.matches.len(), MAX_BATCH);
    assert_eq!(first.dropped, 100);
    let counts = s.status()[0].1.counts;
    assert_eq!(
        (counts.matched, counts.dropped),
        (QUEUE_CAPACITY as u64, 100)
    );
    let second = s.take("a").unwrap();
    assert_eq!(second.dropped, 0, "counted once");
}

/// `/status` reads the streams while their readers queue matches: the two
/// take the same locks, in the same order (a reader holds its matchers while
/// it queues). In the other order, the first status read during a flood
/// deadlocked the reader and the caller (found by the full-queue test
/// above hanging in a full run).
#[test]
fn status_read_during_a_flood_never_deadlocks_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("flood.log");
    std::fs::write(&log, "").unwrap();
    let s = Arc::new(Streams::new());
    s.subscribe(vec![(
        Arc::from("a"),
        subs("f", StreamSource::File(log.clone()), &["hit"], 0),
    )]);
    std::thread::sleep(Duration::from_millis(400));
    let lines = 200_000u64;
    let (done, finished) = std::sync::mpsc::channel();
    let reader = s.clone();
    std::thread::spawn(move || {
        // Read the status as often as it can while the reader works, and
        // take the queue now and then so that it keeps matching.
        loop {
            let counts = reader.status()[0].1.counts;
            if counts.matched + counts.dropped >= lines {
                let _ = done.send(counts);
                return;
            }
            let _ = reader.take("a");
        }
    });
    append(&log, &"hit\n".repeat(lines as usize));
    let counts = finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the status reads and the reader deadlocked (or the reader stopped)");
    assert_eq!(counts.matched + counts.dropped, lines);
}

#[test]
fn a_subscription_kept_across_an_update_hands_no_line_twice_and_a_new_one_that_looks_back_reads_again()
 {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "hit old\n").unwrap();
    let s = Streams::new();
    let a = subs("app", StreamSource::File(log.clone()), &["hit"], 0);
    s.subscribe(vec![(Arc::from("a"), a.clone())]);
    std::thread::sleep(Duration::from_millis(400));
    append(&log, "hit one\n");
    assert_eq!(wait_batch(&s, "a").unwrap().matches[0].text, "hit one");
    // A second plugin that looks back: the file is read again from its
    // start for it; `a` gets nothing twice.
    s.subscribe(vec![
        (Arc::from("a"), a.clone()),
        (
            Arc::from("b"),
            subs("app", StreamSource::File(log.clone()), &["hit"], 3600),
        ),
    ]);
    // The reader may hand the two lines over in one batch or two.
    let mut texts: Vec<String> = Vec::new();
    while texts.len() < 2 {
        let Some(b) = wait_batch(&s, "b") else { break };
        texts.extend(b.matches.into_iter().map(|m| m.text));
    }
    assert_eq!(texts, ["hit old", "hit one"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.take("a"), None, "a saw these already");
}

#[test]
fn a_file_that_cannot_be_read_is_a_problem_of_its_plugin_alone() {
    let dir = tempfile::tempdir().unwrap();
    let s = Streams::new();
    let not_file = dir.path().to_path_buf();
    s.subscribe(vec![(
        Arc::from("a"),
        subs("dir", StreamSource::File(not_file), &["x"], 0),
    )]);
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while s.status()[0].1.problems.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let problems = &s.status()[0].1.problems;
    assert!(
        problems[0].contains("is not a regular file"),
        "{problems:?}"
    );
}

/// The kernel's own log: root writes a message to /dev/kmsg and the
/// subscriber gets it, with the kernel's time.
#[test]
fn a_message_written_to_the_kernel_log_reaches_its_subscriber() {
    assert!(
        std::fs::OpenOptions::new()
            .write(true)
            .open(source::KMSG)
            .is_ok(),
        "this test writes to /dev/kmsg: run it as root"
    );
    let s = Streams::new();
    let tag = format!("nodestatus-test-{}", std::process::id());
    s.subscribe(vec![(
        Arc::from("k"),
        subs(
            "kernel",
            StreamSource::Kmsg,
            &[&format!("{tag}: (\\w+)")],
            0,
        ),
    )]);
    std::thread::sleep(Duration::from_millis(400));
    std::fs::write(source::KMSG, format!("<3>{tag}: hello\n")).unwrap();
    let before = source::now_ms();
    let b = wait_batch(&s, "k").expect("the kernel message");
    assert_eq!(b.matches.len(), 1);
    assert!(
        b.matches[0].text.ends_with(&format!("{tag}: hello")),
        "{:?}",
        b.matches[0].text
    );
    let t = b.matches[0].time_ms;
    assert!(
        t.abs_diff(before) < 2000,
        "the kernel's time {t} vs {before}"
    );
}

#[test]
fn a_watched_directory_wakes_on_a_file_dropped_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = Streams::new();
    s.subscribe(vec![(
        Arc::from("f"),
        Arc::new(Subscriptions {
            streams: Vec::new(),
            watch: vec![dir.path().to_path_buf()],
        }),
    )]);
    std::fs::write(dir.path().join("gpu.txt"), "x=1\n").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let woke = rt.block_on(async { tokio::time::timeout(Duration::from_secs(3), s.woken()).await });
    assert!(woke.is_ok(), "no wake-up");
    assert!(s.status()[0].1.counts.triggered >= 1);
}

/// Whether `s` wakes within `within`.
fn wakes_within(s: &Streams, within: Duration) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async { tokio::time::timeout(within, s.woken()).await })
        .is_ok()
}

/// Whether `s` wakes within 3 s.
fn wakes(s: &Streams) -> bool {
    wakes_within(s, Duration::from_secs(3))
}

/// A feature files' directory that a side-car creates after the plugin
/// loaded, with its parent, and later removes and creates again: each
/// file dropped into it wakes the agent. (It used to be watched through
/// its parent only when that existed at load, and never itself.)
#[test]
fn a_watched_directory_created_later_or_again_wakes_on_files_dropped_into_it() {
    let root = tempfile::tempdir().unwrap();
    let parent = root.path().join("node-feature-discovery");
    let dir = parent.join("features.d");
    let s = Streams::new();
    s.subscribe(vec![(
        Arc::from("features"),
        Arc::new(Subscriptions {
            streams: Vec::new(),
            watch: vec![dir.clone()],
        }),
    )]);
    // Watched from `root` meanwhile: another file there wakes nothing.
    std::fs::write(root.path().join("unrelated"), "x").unwrap();
    assert!(
        !wakes_within(&s, Duration::from_millis(500)),
        "an unrelated file"
    );
    std::fs::create_dir(&parent).unwrap();
    assert!(wakes(&s), "the parent's creation");
    std::fs::create_dir(&dir).unwrap();
    assert!(wakes(&s), "the directory's creation");
    let triggered = s.status()[0].1.counts.triggered;
    std::fs::write(dir.join("gpu"), "x=1\n").unwrap();
    assert!(wakes(&s), "a file dropped into the new directory");
    assert!(s.status()[0].1.counts.triggered > triggered);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(wakes(&s), "the directory's removal");
    std::fs::create_dir(&dir).unwrap();
    assert!(wakes(&s), "the directory created again");
    std::fs::write(dir.join("gpu"), "x=2\n").unwrap();
    assert!(wakes(&s), "a file dropped into the directory created again");
}

/// A systemd-journald for the test: the machine's when one runs, else one
/// started by hand (this machine has no systemd as PID 1) and stopped with
/// the guard.
struct Journald(Option<std::process::Child>);

impl Journald {
    fn ensure() -> Self {
        let running = std::process::Command::new("pgrep")
            .args(["-f", "systemd-journald"])
            .status()
            .is_ok_and(|s| s.success());
        if running {
            return Self(None);
        }
        let child = std::process::Command::new("/lib/systemd/systemd-journald")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("systemd-journald (Debian's systemd package) runs by hand here");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !std::path::Path::new("/run/systemd/journal/stdout").exists()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        Self(Some(child))
    }
}

impl Drop for Journald {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The real journal: entries written by `systemd-cat` under an identifier
/// reach the stream of that identifier, and only those.
#[test]
fn journal_entries_of_the_followed_identifier_reach_their_subscriber() {
    let _journald = Journald::ensure();
    let id = format!("nsprobe-{}", std::process::id());
    let s = Streams::new();
    s.subscribe(vec![(
        Arc::from("j"),
        subs(
            "journal",
            StreamSource::Journal(vec![id.clone()]),
            &["disk (\\w+) failed"],
            0,
        ),
    )]);
    std::thread::sleep(Duration::from_millis(1500));
    let cat = |ident: &str, text: &str| {
        use std::io::Write;
        let mut c = std::process::Command::new("systemd-cat")
            .args(["-t", ident])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        assert!(c.wait().unwrap().success());
    };
    cat("someone-else", "disk sdq failed\n");
    cat(&id, "all fine\ndisk sdb failed\n");
    let b = wait_batch(&s, "j").expect("the journal entry");
    assert_eq!(b.matches.len(), 1, "{:?}", b.matches);
    assert_eq!(b.matches[0].text, "disk sdb failed");
}
