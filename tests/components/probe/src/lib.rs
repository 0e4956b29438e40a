//! Test plugin. For each path in its config's `read` list it records, as an
//! annotation `probe.nodestatus.test/read-<i>`, either `ok:<bytes>` or
//! `err:<message>`; likewise `env-<i>` for each variable in `env`, and
//! `statvfs-<i>` for each path in `statvfs`. It also labels its own version.
//! With `stdout`, it writes that text to its stdout; with `stderr_lines`,
//! that many numbered lines of 64 bytes to its stderr (the sandbox
//! discards the one and keeps 4 KiB of the other).
use nodestatus_sdk::{ConditionStatus, Metadata, Node, Result, Setter, host};

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Config {
    read: Vec<String>,
    env: Vec<String>,
    statvfs: Vec<String>,
    /// When set, the condition `ProbeFlag` says whether this file exists.
    flag: Option<String>,
    /// Written to stdout.
    stdout: Option<String>,
    /// Lines `probe stderr line <n>` (64 bytes each, numbered from 0)
    /// written to stderr.
    stderr_lines: u32,
}

pub struct Probe;

impl Setter for Probe {
    fn metadata() -> Metadata {
        Metadata::new("probe", env!("CARGO_PKG_VERSION"))
            .description("reports what the sandbox lets it read")
            .path("/tmp")
            .path("/etc")
            .env("HOME")
            .env("PATH")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        {
            use std::io::Write;
            // Errors ignored: a full stderr buffer refuses the rest.
            if let Some(text) = &config.stdout {
                let mut out = std::io::stdout();
                let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
            }
            let mut err = std::io::stderr();
            for n in 0..config.stderr_lines {
                let _ = writeln!(err, "{:<63}", format!("probe stderr line {n}"));
            }
        }
        for (i, path) in config.read.iter().enumerate() {
            let v = match std::fs::read(path) {
                Ok(b) => format!("ok:{}", b.len()),
                Err(e) => format!("err:{}", e.kind()),
            };
            node.set_annotation(&format!("probe.nodestatus.test/read-{i}"), &v);
        }
        for (i, var) in config.env.iter().enumerate() {
            let v = match std::env::var(var) {
                Ok(v) => format!("ok:{v}"),
                Err(_) => "err:unset".to_owned(),
            };
            node.set_annotation(&format!("probe.nodestatus.test/env-{i}"), &v);
        }
        for (i, path) in config.statvfs.iter().enumerate() {
            let v = match host::fs_stats(path) {
                Ok(s) => format!("ok:{}", s.total_bytes > 0),
                Err(e) => format!("err:{e}"),
            };
            node.set_annotation(&format!("probe.nodestatus.test/statvfs-{i}"), &v);
        }
        if let Some(flag) = &config.flag {
            let on = std::path::Path::new(flag).exists();
            node.set_condition(
                "ProbeFlag",
                ConditionStatus::from_bool(on),
                if on { "FlagPresent" } else { "FlagAbsent" },
                flag,
            );
        }
        let version = &env!("CARGO_PKG_VERSION")[..1];
        node.set_label("probe.nodestatus.test/version", version);
        node.set_condition("ProbeRan", ConditionStatus::True, "ProbeRan", version);
        Ok(())
    }
}

nodestatus_sdk::export!(Probe);
