//! Test plugin. For each path in its config's `read` list it records, as an
//! annotation `probe.nodestatus.test/read-<i>`, either `ok:<bytes>` or
//! `err:<message>`; likewise `env-<i>` for each variable in `env`, and
//! `statvfs-<i>` for each path in `statvfs`. It also labels its own version.
use nodestatus_sdk::{ConditionStatus, Metadata, Node, Result, Setter, host};

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Config {
    read: Vec<String>,
    env: Vec<String>,
    statvfs: Vec<String>,
    /// When set, the condition `ProbeFlag` says whether this file exists.
    flag: Option<String>,
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
