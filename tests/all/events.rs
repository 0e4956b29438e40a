//! Reacting plugins (WIT 0.2.1) against the real kernel log and the real
//! API server: `log-rules` running node-problem-detector's published
//! kernel-monitor and readonly-monitor configs, fed messages written to
//! `/dev/kmsg` (root may), with the status sync's period at 60 s so that
//! only the streams' trigger can write them in time.

use std::path::Path;
use std::time::{Duration, Instant};

use nodestatus_engine::streams::Streams;
use nodestatus_tests::{built, drop_plugin};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::kube::{TestAgent, admin, build_agent, condition, server_node, until};

/// One of NPD's published configs (plugins/log-rules/tests/npd), with its
/// lookback at 0 so that messages of an earlier run are not read again.
fn npd(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/log-rules/tests/npd")
        .join(format!("{name}.json"));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["lookback"] = json!("0");
    v
}

fn kmsg(line: &str) {
    std::fs::write("/dev/kmsg", format!("{line}\n"))
        .expect("this test writes to /dev/kmsg: run it as root");
}

/// An agent of node `name` running log-rules with `monitors`, its streams
/// followed, its regular pass every 60 s.
fn reacting(name: &str, monitors: Value) -> TestAgent {
    let settings = json!({"monitors": monitors});
    let section = format!("    streams: [kmsg]\n    config: {settings}\n");
    reacting_plugin(name, "log-rules", built::LOG_RULES, &section)
}

/// The `(type, message)` of each event about `node` of `reason`.
pub(crate) async fn events(node: &str, reason: &str) -> Vec<(String, String)> {
    kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(admin(), "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason) && e.involved_object.name.as_deref() == Some(node)
        })
        .map(|e| (e.type_.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

async fn condition_is(node: &str, t: &str, status: &str, reason: &str) -> bool {
    server_node(node).await.is_some_and(|n| {
        condition(&n, t).is_some_and(|c| c["status"] == status && c["reason"] == reason)
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn npd_kernel_rules_turn_kernel_messages_into_conditions_and_events_at_once() {
    let node = "events-npd";
    let monitors = json!([npd("kernel-monitor"), npd("readonly-monitor")]);
    let mut t = reacting(node, monitors.clone());
    let cancel = CancellationToken::new();
    let run = t.spawn(&cancel);
    // The healthy defaults, from the first pass.
    assert!(
        until(30, || condition_is(
            node,
            "KernelDeadlock",
            "False",
            "KernelHasNoDeadlock"
        ))
        .await,
        "the kernel-monitor's defaults never reached the node"
    );
    assert!(
        condition_is(
            node,
            "ReadonlyFilesystem",
            "False",
            "FilesystemIsNotReadOnly"
        )
        .await
    );
    // The next regular pass is a minute away: what follows is the trigger's.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // One line that two of kernel-monitor's rules match, as NPD matches
    // them: TaskHung (temporary: an event) and DockerHung (permanent:
    // KernelDeadlock True, and the event of the change).
    let hung = format!(
        "task docker:{} blocked for more than 120 seconds.",
        std::process::id()
    );
    let written = Instant::now();
    kmsg(&format!("<3>{hung}"));
    assert!(
        until(5, || condition_is(
            node,
            "KernelDeadlock",
            "True",
            "DockerHung"
        ))
        .await,
        "KernelDeadlock never became True"
    );
    let took = written.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "took {took:?}: not the trigger"
    );
    let c = condition(&server_node(node).await.unwrap(), "KernelDeadlock")
        .unwrap()
        .clone();
    assert_eq!(c["message"], hung.as_str());
    assert!(
        until(5, || async { !events(node, "TaskHung").await.is_empty() }).await,
        "no TaskHung event"
    );
    assert_eq!(
        events(node, "TaskHung").await,
        vec![("Warning".to_owned(), hung.clone())]
    );
    assert_eq!(
        events(node, "DockerHung").await,
        vec![(
            "Warning".to_owned(),
            format!(
                "Node condition KernelDeadlock is now: True, reason: DockerHung, message: {hung:?}"
            )
        )]
    );

    // readonly-monitor's rule, from another monitor of the same plugin.
    kmsg("<3>EXT4-fs (sdz1): Remounting filesystem read-only");
    assert!(
        until(5, || condition_is(
            node,
            "ReadonlyFilesystem",
            "True",
            "FilesystemIsReadOnly"
        ))
        .await,
        "ReadonlyFilesystem never became True"
    );
    // A temporary rule with a multi-line buffer: an OOM kill among noise.
    kmsg("<6>some unrelated kernel line");
    kmsg(
        "<3>Killed process 4242 (stress) total-vm:1000kB, anon-rss:500kB, file-rss:0kB, shmem-rss:0kB",
    );
    assert!(
        until(5, || async { !events(node, "OOMKilling").await.is_empty() }).await,
        "no OOMKilling event"
    );
    // A rule removed from the config releases its condition: the agent
    // starts again with kernel-monitor alone. KernelDeadlock stays True
    // (the node holds it: a restart does not reset it); ReadonlyFilesystem
    // goes.
    cancel.cancel();
    run.await.unwrap().unwrap();
    drop(t);
    let mut t = reacting(node, json!([npd("kernel-monitor")]));
    let cancel = CancellationToken::new();
    let run = t.spawn(&cancel);
    assert!(
        until(30, || async {
            server_node(node)
                .await
                .is_some_and(|n| condition(&n, "ReadonlyFilesystem").is_none())
        })
        .await,
        "the condition of the removed monitor stayed"
    );
    assert!(
        condition_is(node, "KernelDeadlock", "True", "DockerHung").await,
        "reset by a restart"
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
}

/// The CPU seconds (user and system) of thread `tid` of this process.
fn thread_cpu(tid: &str) -> f64 {
    stat_cpu(&format!("/proc/self/task/{tid}/stat"))
}

/// utime + stime of a `stat` file of /proc, in seconds.
fn stat_cpu(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map_or(vec![], |(_, r)| r.split(' ').collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The threads of this process whose name starts with `prefix`.
fn threads(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|t| {
            std::fs::read_to_string(format!("/proc/self/task/{t}/comm"))
                .is_ok_and(|c| c.trim().starts_with(prefix))
        })
        .collect()
}

/// This process's CPU seconds, its exited threads' included (the sum over
/// its live threads loses a thread's time once it ends: the flood's
/// writer's, which made the engine's figure negative).
fn process_cpu() -> f64 {
    stat_cpu("/proc/self/stat")
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Writes `lines` per second to /dev/kmsg for `secs` from a thread named
/// `kmsg-writer`, every `every`-th line the matched `matched(i)`, the rest
/// `unmatched`. It returns the lines written and its own CPU seconds, read
/// before it ends (its CPU is not the engine's).
fn flood(
    per_second: u64,
    secs: u64,
    every: u64,
    matched: impl Fn(u64) -> String + Send + 'static,
) -> std::thread::JoinHandle<(u64, f64)> {
    std::thread::Builder::new()
        .name("kmsg-writer".into())
        .spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/kmsg")
                .unwrap();
            let start = Instant::now();
            let mut written = 0u64;
            for i in 0..per_second * secs {
                let due = start + Duration::from_secs_f64(i as f64 / per_second as f64);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let line = match i % every {
                    0 => matched(i / every),
                    _ => format!("<7>nodestatus-bench noise {i} nothing any rule matches"),
                };
                if f.write_all(line.as_bytes()).is_ok() {
                    written += 1;
                }
            }
            (written, stat_cpu("/proc/thread-self/stat"))
        })
        .unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// The events bench (docs/benchmarks.md, "Reacting plugins"): run by
/// `scripts/bench-events.sh`, release build. It writes
/// `target/events-bench/result.json`; `scripts/events-figures.py` makes the
/// table from it.
///
/// - latency: 100 messages at gaps of 0.5 to 1.5 s, each flipping a
///   permanent rule's condition (fault / clear, log-rules' resolve rule):
///   the time from the write to the node's condition, and to its event,
///   both seen on the API server by watches;
/// - flood: 10,000 unmatched lines a second for 60 s with one matched line
///   a second: the engine's CPU (the process less the writer) and the
///   stream reader's, and the matched lines handled;
/// - matched: 1,000 matched lines a second for 60 s: RSS, the queue's
///   drops, and status patches a second.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a bench: scripts/bench-events.sh runs it on a release build"]
async fn bench() {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let node = "events-bench";
    let bench_monitor = json!({
        "plugin": "kmsg", "source": "bench", "bufferSize": 1,
        "conditions": [{"type": "BenchFault", "reason": "NoBenchFault", "message": "no fault"}],
        "rules": [
            {"type": "permanent", "condition": "BenchFault", "reason": "BenchFaultSeen", "pattern": "nodestatus-bench fault \\d+"},
            {"type": "resolve", "condition": "BenchFault", "pattern": "nodestatus-bench clear \\d+"},
            {"type": "temporary", "reason": "BenchEvent", "pattern": "nodestatus-bench event \\d+"}
        ]
    });
    let dir = tempfile::tempdir().unwrap();
    drop_plugin(dir.path(), "log-rules.wasm", Path::new(built::LOG_RULES));
    let settings = json!({"monitors": [npd("kernel-monitor"), bench_monitor]});
    let yaml = format!(
        "nodeName: {node}\nnodeStatusUpdateFrequency: 10s\nnodeStatusReportFrequency: 5m\npluginDir: {}\nplugins:\n  log-rules:\n    streams: [kmsg]\n    eventsPerMinute: 600\n    config: {settings}\n",
        dir.path().display()
    );
    let streams = Streams::new();
    let mut t = build_agent(node, node, &yaml, dir, None, {
        let s = streams.clone();
        move |a| a.with_streams(s)
    });
    let metrics = t.handle.metrics().clone();
    let cancel = CancellationToken::new();
    let run = t.spawn(&cancel);
    assert!(
        until(30, || condition_is(
            node,
            "BenchFault",
            "False",
            "NoBenchFault"
        ))
        .await
    );

    // Watches: the node's BenchFault message and the events, with the time
    // each was seen.
    let seen: std::sync::Arc<std::sync::Mutex<Vec<(String, Instant)>>> = Default::default();
    let node_watch = {
        let seen = seen.clone();
        let api = kube::Api::<k8s_openapi::api::core::v1::Node>::all(admin());
        tokio::spawn(async move {
            let cfg = watcher::Config::default().fields(&format!("metadata.name={node}"));
            let mut w = watcher(api, cfg).boxed();
            while let Some(Ok(e)) = w.next().await {
                if let watcher::Event::Apply(n) | watcher::Event::InitApply(n) = e {
                    let v = serde_json::to_value(&n).unwrap();
                    if let Some(c) = condition(&v, "BenchFault") {
                        let key = format!(
                            "node {} {}",
                            c["status"].as_str().unwrap_or(""),
                            c["message"].as_str().unwrap_or("")
                        );
                        seen.lock().unwrap().push((key, Instant::now()));
                    }
                }
            }
        })
    };
    let event_watch = {
        let seen = seen.clone();
        let api = kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(admin(), "default");
        tokio::spawn(async move {
            let cfg = watcher::Config::default().fields(&format!("involvedObject.name={node}"));
            let mut w = watcher(api, cfg).boxed();
            while let Some(Ok(e)) = w.next().await {
                if let watcher::Event::Apply(ev) = e {
                    seen.lock().unwrap().push((
                        format!("event {}", ev.message.unwrap_or_default()),
                        Instant::now(),
                    ));
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Latency.
    let run_id = std::process::id();
    let mut written = Vec::new();
    let mut gap_seed = 12345u64;
    for i in 0..100u64 {
        gap_seed = gap_seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let gap = 0.5 + (gap_seed >> 33) as f64 / (1u64 << 31) as f64;
        tokio::time::sleep(Duration::from_secs_f64(gap)).await;
        let (word, status) = if i.is_multiple_of(2) {
            ("fault", "True")
        } else {
            ("clear", "False")
        };
        let text = format!("nodestatus-bench {word} {run_id}{i:03}");
        kmsg(&format!("<4>{text}"));
        written.push((i, text, status, Instant::now()));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (mut to_node, mut to_event) = (Vec::new(), Vec::new());
    {
        let seen = seen.lock().unwrap();
        for (_, text, status, at) in &written {
            let first = |want: &dyn Fn(&str) -> bool| {
                seen.iter()
                    .find(|(k, t)| *t >= *at && want(k))
                    .map(|(_, t)| t.duration_since(*at).as_secs_f64())
            };
            let node_key = if *status == "True" {
                format!("node True {text}")
            } else {
                "node False no fault".to_owned()
            };
            if let Some(d) = first(&|k: &str| k == node_key) {
                to_node.push(d);
            }
            if let Some(d) = first(&|k: &str| k.starts_with("event ") && k.contains(text.as_str()))
            {
                to_event.push(d);
            }
        }
    }
    node_watch.abort();
    event_watch.abort();
    to_node.sort_by(f64::total_cmp);
    to_event.sort_by(f64::total_cmp);

    // Flood of unmatched lines, one matched a second.
    // The kernel takes the setting only with its newline (EINVAL without);
    // the guard puts the old one back however the bench ends.
    let devkmsg = DevkmsgSetting::set("on");
    let reader = threads("stream kmsg");
    let (cpu0, reader0) = (
        process_cpu(),
        reader.iter().map(|t| thread_cpu(t)).sum::<f64>(),
    );
    let handed0 = streams
        .status()
        .iter()
        .map(|(_, s)| s.counts.handed)
        .sum::<u64>();
    let started = Instant::now();
    let writer = flood(10_000, 60, 10_000, move |i| {
        format!("<4>nodestatus-bench event {run_id}9{i:04}")
    });
    while !writer.is_finished() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (flood_written, writer_cpu) = writer.join().unwrap();
    let flood_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let engine_cpu = process_cpu() - cpu0 - writer_cpu;
    let reader_cpu = reader.iter().map(|t| thread_cpu(t)).sum::<f64>() - reader0;
    let handed_flood = streams
        .status()
        .iter()
        .map(|(_, s)| s.counts.handed)
        .sum::<u64>()
        - handed0;

    // 1,000 matched lines a second.
    let patches0 = metrics.patches.get();
    let counts0 = streams.status();
    let started = Instant::now();
    let writer = flood(1_000, 60, 1, move |i| {
        format!("<4>nodestatus-bench event {run_id}8{i:05}")
    });
    let mut rss = Vec::new();
    let mut patches_per_s = Vec::new();
    let mut last = patches0;
    while !writer.is_finished() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        rss.push(rss_mb());
        let p = metrics.patches.get();
        patches_per_s.push(p - last);
        last = p;
    }
    let (matched_written, _) = writer.join().unwrap();
    let matched_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(devkmsg);
    let counts1 = streams.status();
    let delta = |f: fn(&nodestatus_engine::streams::Counts) -> u64| {
        counts1.iter().map(|(_, s)| f(&s.counts)).sum::<u64>()
            - counts0.iter().map(|(_, s)| f(&s.counts)).sum::<u64>()
    };
    cancel.cancel();
    run.await.unwrap().unwrap();

    let result = json!({
        "date": std::process::Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]).output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default(),
        "commit": std::process::Command::new("git").args(["rev-parse", "--short", "HEAD"]).output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default(),
        "load": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "latency": {
            "messages": written.len(),
            "to_node_seen": to_node.len(),
            "to_node_p50_s": percentile(&to_node, 0.5),
            "to_node_p99_s": percentile(&to_node, 0.99),
            "to_node_max_s": to_node.last().copied().unwrap_or(f64::NAN),
            "to_event_seen": to_event.len(),
            "to_event_p50_s": percentile(&to_event, 0.5),
            "to_event_p99_s": percentile(&to_event, 0.99),
            "to_event_max_s": to_event.last().copied().unwrap_or(f64::NAN),
        },
        "flood": {
            "lines_written": flood_written,
            "seconds": flood_secs,
            "engine_cpu_s": engine_cpu,
            "engine_core_share": engine_cpu / flood_secs,
            "reader_cpu_s": reader_cpu,
            "matched_written": flood_written.div_ceil(10_000),
            "matched_handed": handed_flood,
        },
        "matched": {
            "lines_written": matched_written,
            "seconds": matched_secs,
            "queued": delta(|c| c.matched),
            "dropped": delta(|c| c.dropped),
            "handed": delta(|c| c.handed),
            "rss_mb_max": rss.iter().copied().fold(0.0, f64::max),
            "rss_mb_first": rss.first().copied().unwrap_or(0.0),
            "patches": metrics.patches.get() - patches0,
            "patches_per_s_max": patches_per_s.iter().copied().max().unwrap_or(0),
        },
    });
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/events-bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join("result.json"),
        serde_json::to_string_pretty(&result).unwrap(),
    )
    .unwrap();
    println!("{}", serde_json::to_string_pretty(&result).unwrap());
}

/// An agent of node `name` running `plugin` (a file of `built`) with the
/// config section `section` (YAML, indented under the plugin's name),
/// its streams followed, its regular pass every 60 s.
pub(crate) fn reacting_plugin(
    name: &str,
    plugin: &str,
    built_path: &str,
    section: &str,
) -> TestAgent {
    let dir = tempfile::tempdir().unwrap();
    drop_plugin(dir.path(), &format!("{plugin}.wasm"), Path::new(built_path));
    let yaml = format!(
        "nodeName: {name}\nnodeStatusUpdateFrequency: 60s\nnodeStatusReportFrequency: 5m\nnodeLeaseDurationSeconds: 40\npluginDir: {}\nplugins:\n  {plugin}:\n{section}",
        dir.path().display()
    );
    build_agent(name, name, &yaml, dir, None, |a| {
        a.with_streams(Streams::new())
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gpu_xid_in_the_kernel_log_marks_the_gpu_unhealthy_until_the_driver_is_loaded_again() {
    use crate::reporters::{copy_tree, gpu_fixture, sysfs_with_links};
    let node = "events-gpu";
    // A machine of two H100s with their driver loaded, served to the
    // plugin through mapped grants.
    let machine = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    sysfs_with_links(&gpu_fixture("nvidia-2gpu/sys"), &machine.path().join("sys"));
    let nv = machine.path().join("proc/driver/nvidia");
    copy_tree(&gpu_fixture("nvidia-2gpu/proc/driver/nvidia"), &nv);
    let section = format!(
        "    streams: [kmsg]\n    paths: [{{path: /sys, from: {}}}, {{path: /proc/driver/nvidia, from: {}}}]\n    config: {{xidLookback: 0}}\n",
        machine.path().join("sys").display(),
        nv.display()
    );
    let mut t = reacting_plugin(node, "gpu", built::GPU, &section);
    let cancel = CancellationToken::new();
    let run = t.spawn(&cancel);
    assert!(
        until(30, || condition_is(
            node,
            "GPUHealthy",
            "True",
            "GPUsHealthy"
        ))
        .await
    );
    let n = server_node(node).await.unwrap();
    let labels = &n["metadata"]["labels"];
    assert_eq!(labels["nvidia.com/gpu.family"], "hopper");
    assert_eq!(labels["nvidia.com/gpu.compute.major"], "9");
    assert_eq!(labels["nvidia.com/cuda.driver-version.full"], "535.129.03");
    tokio::time::sleep(Duration::from_secs(1)).await;

    kmsg("<4>NVRM: Xid (PCI:0000:17:00): 79, pid=4242, name=train, GPU has fallen off the bus.");
    assert!(
        until(5, || condition_is(
            node,
            "GPUHealthy",
            "False",
            "GPUXidError"
        ))
        .await,
        "XID 79 did not reach GPUHealthy"
    );
    let c = condition(&server_node(node).await.unwrap(), "GPUHealthy")
        .unwrap()
        .clone();
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .starts_with("XID 79 on GPU 0000:17:00.0"),
        "{c}"
    );
    assert!(until(5, || async { !events(node, "GPUXid").await.is_empty() }).await);
    // An application XID records an event and changes nothing.
    kmsg("<4>NVRM: Xid (PCI:0000:17:00): 13, Graphics SM Warp Exception");
    assert!(until(5, || async { events(node, "GPUXid").await.len() == 2 }).await);
    assert!(condition_is(node, "GPUHealthy", "False", "GPUXidError").await);
    // The driver loaded again: the GPUs' own state.
    kmsg(
        "<6>NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023",
    );
    assert!(
        until(5, || condition_is(
            node,
            "GPUHealthy",
            "True",
            "GPUsHealthy"
        ))
        .await,
        "the driver's reload did not bring GPUHealthy back"
    );
    assert_eq!(events(node, "GPUDriverReloaded").await.len(), 1);
    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_disks_io_errors_in_the_kernel_log_make_its_condition_true() {
    let node = "events-disk";
    let mut t = reacting_plugin(
        node,
        "disk",
        built::DISK,
        "    streams: [kmsg]\n    config: {ioErrors: {devices: [sdz, nvme9n1], lookback: 0}}\n",
    );
    let cancel = CancellationToken::new();
    let run = t.spawn(&cancel);
    assert!(
        until(30, || condition_is(
            node,
            "DiskIOErrors-sdz",
            "False",
            "NoIOErrors"
        ))
        .await
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    kmsg(
        "<3>blk_update_request: I/O error, dev sdz, sector 2048 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0",
    );
    kmsg("<3>Buffer I/O error on dev sdz1, logical block 256, async page read");
    assert!(
        until(5, || condition_is(
            node,
            "DiskIOErrors-sdz",
            "True",
            "IOErrorsSeen"
        ))
        .await,
        "the I/O error did not reach the condition: {:#}\nstreams: {:?}\nlast pass: {:?}",
        server_node(node).await.unwrap()["status"]["conditions"],
        t.handle.streams().map(|s| s.status()),
        t.handle.last_pass()
    );
    assert!(until(5, || async { events(node, "DiskIOError").await.len() == 2 }).await);
    let n = server_node(node).await.unwrap();
    let count: Value = serde_json::from_str(
        n["metadata"]["annotations"]["disk.nodestatus.io/io-errors-sdz"]
            .as_str()
            .unwrap_or_else(|| {
                panic!(
                    "no count annotation: {:#}\nlast pass: {:?}",
                    n["metadata"],
                    t.handle.last_pass()
                )
            }),
    )
    .unwrap();
    assert_eq!(count["count"], 2);
    assert_eq!(
        condition(&n, "DiskIOErrors-nvme9n1").unwrap()["status"],
        "False"
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
}

/// One pass over a disk plugin with matched lines waiting: its part (the
/// condition and the count's annotation) is in the pass's node, and the
/// next pass, over that node, keeps both (the pipeline's layer, without an
/// API server).
#[test]
fn a_pass_hands_the_matches_to_on_lines_and_the_next_keeps_its_part() {
    use crate::common::{condition_of, plugin_dir, settings};
    use nodestatus_runtime::{PluginSettings, reactor::StreamGrant};
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        streams: vec![StreamGrant::Kmsg],
        config: json!({"ioErrors": {"devices": ["sdy"], "lookback": 0}}),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "disk.wasm", Path::new(built::DISK));
    dir.rescan();
    let set = dir.current();
    assert!(
        set.setters()[0].plugin().subscriptions().is_some(),
        "disk follows the kernel log"
    );
    let streams = Streams::new();
    streams.update(set.setters().iter().map(|s| &**s.plugin()));
    std::thread::sleep(Duration::from_millis(500));
    kmsg(
        "<3>blk_update_request: I/O error, dev sdy, sector 8 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0",
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while streams.status()[0].1.counts.matched == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ctx = nodestatus_runtime::CallContext::default();
    let pass = |node: &Value| {
        let (out, report) = nodestatus_engine::pipeline::pass_with(
            dir.runtime(),
            &set,
            node,
            &ctx,
            Default::default(),
            Some(&streams),
            None,
        );
        assert!(report.setters[0].outcome.is_ok(), "{:?}", report.setters[0]);
        (out, report.setters[0].lines)
    };
    let (node, lines) = pass(&nodestatus_tests::nodes::small_node("n1"));
    assert_eq!(lines, 1, "the match was handed over");
    assert_eq!(
        condition_of(&node, "DiskIOErrors-sdy").unwrap()["status"],
        "True",
        "{node:#}"
    );
    assert!(
        node["metadata"]["annotations"]["disk.nodestatus.io/io-errors-sdy"].is_string(),
        "{:#}",
        node["metadata"]
    );
    let (next, lines) = pass(&node);
    assert_eq!(lines, 0);
    assert_eq!(
        condition_of(&next, "DiskIOErrors-sdy").unwrap()["status"],
        "True",
        "{next:#}"
    );
}

/// `kernel.printk_devkmsg` set for the bench's floods, and put back when
/// dropped (the bench's end, or its panic).
struct DevkmsgSetting(String);

impl DevkmsgSetting {
    const PATH: &str = "/proc/sys/kernel/printk_devkmsg";

    fn set(value: &str) -> Self {
        let old = std::fs::read_to_string(Self::PATH).unwrap_or_default();
        std::fs::write(Self::PATH, format!("{value}\n"))
            .unwrap_or_else(|e| panic!("{}: {value}: {e}", Self::PATH));
        Self(old.trim().to_owned())
    }
}

impl Drop for DevkmsgSetting {
    fn drop(&mut self) {
        if !self.0.is_empty()
            && let Err(e) = std::fs::write(Self::PATH, format!("{}\n", self.0))
        {
            eprintln!("{}: could not put back {:?}: {e}", Self::PATH, self.0);
        }
    }
}
