//! The fault rig (issue 10, item 7): the engine, as a real process with its
//! default periods, behind a fault-injecting proxy to a real kube-apiserver,
//! with the real node lifecycle controller (Kubernetes 1.37, its default
//! grace period of 50 s) and the apiserver's audit log.
//!
//! The scenarios wait for outages and periods (65 s, 60 s, 30 s), so they run
//! all at once, each with its own node, identity, proxy and engine, sharing
//! one control plane: the whole rig takes about as long as its longest
//! scenario. That is why this binary has its own small harness
//! (`harness = false`) rather than libtest, which runs as many tests at once
//! as there are cores. It takes libtest's usual arguments: name filters,
//! `--exact`, `--skip`, `--ignored`, `--include-ignored` and `--list`; the
//! others (`--nocapture`, `--test-threads`, ...) are accepted and ignored.
//!
//! Each scenario prints one line with what it measured; the table in
//! `docs/reliability.md` comes from those lines.

mod proxy;
mod rig;
mod scenarios;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use rig::{Outcome, Rig};

type Run = fn(Arc<Rig>) -> Pin<Box<dyn Future<Output = anyhow::Result<Outcome>> + Send>>;

/// A scenario: its name, what it does, and, when it is known to fail, why
/// (it is then skipped unless `--ignored` or `--include-ignored` is given,
/// like a libtest `#[ignore = "..."]`).
struct Case {
    name: &'static str,
    fault: &'static str,
    ignore: Option<&'static str>,
    run: Run,
}

macro_rules! case {
    ($f:ident, $fault:expr) => {
        case!($f, $fault, None)
    };
    ($f:ident, $fault:expr, $ignore:expr) => {
        Case {
            name: stringify!($f),
            fault: $fault,
            ignore: $ignore,
            run: |rig| Box::pin(scenarios::$f(rig)),
        }
    };
}

fn cases() -> Vec<Case> {
    vec![
        case!(apiserver_unreachable_60s, "connections refused for 60 s"),
        case!(
            connections_hang_30s,
            "open connections stop answering for good; new ones hang for 30 s"
        ),
        case!(
            sigterm_while_connections_hang,
            "SIGTERM while every connection hangs"
        ),
        case!(lease_conflict_storm_30s, "409 on every lease PUT for 30 s"),
        case!(server_error_bursts, "500, 503, 504 bursts of 8 s"),
        case!(
            throttled_429_30s,
            "429 with Retry-After: 1 on every request for 30 s (API Priority and Fairness)"
        ),
        case!(slow_responses_5s, "every response 5 s late for 60 s"),
        case!(unauthorized_30s, "401 on every request for 30 s"),
        case!(forbidden_30s, "403 on every request for 30 s"),
        case!(
            forbidden_during_status_reports,
            "403 on every request for 30 s, report period 10 s"
        ),
        case!(node_deleted, "the admin deletes the Node"),
        case!(lease_deleted, "the admin deletes the Lease"),
        case!(
            process_frozen_65s,
            "SIGSTOP 65 s (grace period 50 s, the controller's default), then SIGCONT"
        ),
        case!(
            restart_watched_by_a_poller,
            "SIGTERM and start again, Ready polled every 100 ms"
        ),
        case!(
            idle_api_load,
            "none: an idle node's requests in 60 s (audit log)"
        ),
    ]
}

/// The node name each scenario uses: every identity must be in the token
/// file before the apiserver starts.
const NODES: &[&str] = &[
    "fault-unreachable",
    "fault-hang",
    "fault-hang-term",
    "fault-conflict",
    "fault-5xx",
    "fault-slow",
    "fault-429",
    "fault-401",
    "fault-403",
    "fault-403-reports",
    "fault-node-deleted",
    "fault-lease-deleted",
    "fault-frozen",
    "fault-restart",
    "fault-idle",
];

#[derive(Default)]
struct Args {
    filters: Vec<String>,
    skip: Vec<String>,
    exact: bool,
    ignored: bool,
    include_ignored: bool,
    list: bool,
}

fn parse_args() -> Args {
    let mut a = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--exact" => a.exact = true,
            "--ignored" => a.ignored = true,
            "--include-ignored" => a.include_ignored = true,
            "--list" => a.list = true,
            "--skip" => a.skip.extend(it.next()),
            // libtest flags with a value, accepted and ignored.
            "--test-threads" | "--color" | "--format" | "-Z" | "--logfile" => {
                it.next();
            }
            s if s.starts_with('-') => {}
            s => a.filters.push(s.to_owned()),
        }
    }
    a
}

impl Args {
    fn selects(&self, c: &Case) -> bool {
        let matches = |f: &String| {
            if self.exact {
                c.name == f
            } else {
                c.name.contains(f.as_str())
            }
        };
        (self.filters.is_empty() || self.filters.iter().any(matches))
            && !self.skip.iter().any(|s| c.name.contains(s.as_str()))
    }

    fn runs(&self, c: &Case) -> bool {
        match c.ignore {
            Some(_) => self.ignored || self.include_ignored,
            None => !self.ignored,
        }
    }
}

fn secs(v: Option<f64>) -> String {
    v.map(|s| format!("{s:.1} s")).unwrap_or_else(|| "-".into())
}

fn main() -> ExitCode {
    let args = parse_args();
    let cases: Vec<Case> = cases().into_iter().filter(|c| args.selects(c)).collect();
    if args.list {
        for c in &cases {
            println!("{}: test", c.name);
        }
        return ExitCode::SUCCESS;
    }
    let (run, ignored): (Vec<Case>, Vec<Case>) = cases.into_iter().partition(|c| args.runs(c));
    println!("\nrunning {} tests", run.len() + ignored.len());
    for c in &ignored {
        println!("test {} ... ignored, {}", c.name, c.ignore.unwrap_or(""));
    }
    if run.is_empty() {
        println!(
            "\ntest result: ok. 0 passed; 0 failed; {} ignored\n",
            ignored.len()
        );
        return ExitCode::SUCCESS;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    // The cluster's processes die with the thread that started them: start
    // it from this (the main) thread, inside block_on.
    let started = Instant::now();
    let failed = rt.block_on(async {
        let dir = tempfile::Builder::new()
            .prefix("nodestatus-faults")
            .tempdir()
            .expect("a temp dir");
        let rig = match Rig::start(dir.path(), NODES).await {
            Ok(r) => Arc::new(r),
            Err(e) => {
                println!("the rig did not start: {e:#}");
                return run.len();
            }
        };
        println!(
            "rig: kube-apiserver, kube-controller-manager (grace {:?}) ready in {:.1} s; state in {}",
            rig::GRACE,
            started.elapsed().as_secs_f64(),
            dir.path().display()
        );
        let mut set = tokio::task::JoinSet::new();
        for c in run.iter() {
            let (rig, f, name, fault) = (rig.clone(), c.run, c.name, c.fault);
            set.spawn(async move {
                let t = Instant::now();
                let r = f(rig).await;
                (name, fault, t.elapsed(), r)
            });
        }
        let mut failed = 0;
        let mut table = Vec::new();
        while let Some(j) = set.join_next().await {
            let (name, fault, took, r) = j.expect("a scenario task");
            match r {
                Ok(o) => {
                    println!("test {name} ... ok ({:.0} s)", took.as_secs_f64());
                    table.push(format!(
                        "FAULTS| {name} | {fault} | ok | lease {} | Ready {} | {} | {}",
                        secs(o.lease_s),
                        secs(o.ready_s),
                        o.ready_during,
                        o.note
                    ));
                }
                Err(e) => {
                    failed += 1;
                    println!(
                        "test {name} ... FAILED ({:.0} s)\n---- {name} ----\n{e:#}\n",
                        took.as_secs_f64()
                    );
                    let first = format!("{e:#}");
                    let first = first.lines().next().unwrap_or("").to_owned();
                    table.push(format!("FAULTS| {name} | {fault} | FAILED | {first}"));
                }
            }
        }
        println!("\nmeasured:");
        for l in &table {
            println!("{l}");
        }
        // Keep the state of a failed run for a look.
        if failed > 0 {
            let kept = dir.keep();
            println!("state kept in {}", kept.display());
        }
        failed
    });
    println!(
        "\ntest result: {}. {} passed; {failed} failed; {} ignored; finished in {:.1} s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        run.len() - failed,
        ignored.len(),
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
