//! `log-rules`: node-problem-detector's system-log-monitor configs, as they
//! are written, run as a nodestatus plugin.
//!
//! Its settings are one NPD monitor config (`kernel-monitor.json`,
//! `readonly-monitor.json`, `docker-monitor.json`, `systemd-monitor.json`,
//! ...) or `{"monitors": [...]}` with several. Each monitor is one stream
//! (`plugin: kmsg` the kernel log, `filelog` its `logPath` with
//! `pluginConfig.message` taking the message out of each line, `journald`
//! the journal of `pluginConfig.source`), read from `lookback` back, its
//! patterns spanning `bufferSize` lines and anchored at the end of the
//! newest line as NPD anchors them. The host matches them; this plugin
//! turns each match into what NPD makes of it:
//!
//! - `type: temporary`: a Warning event, reason the rule's, message the
//!   matched lines (with `; patternGeneratedMessageSuffix`);
//! - `type: permanent`: the rule's `condition` set True with the rule's
//!   reason and the matched lines as message, and, when it changed, the
//!   event NPD records (`Node condition X is now: True, reason: R,
//!   message: "..."`);
//! - each of `conditions` starts False with its reason and message.
//!
//! Where NPD's users complain, it does better:
//! - a condition lives in the node, not in the process: a restart keeps
//!   it (NPD #304), and a lookback that covers the boot finds it again on
//!   a new node;
//! - a rule or condition removed from the config releases its condition
//!   (the host removes the fields a plugin no longer sets: NPD #470,
//!   #1011);
//! - a permanent condition has ways back (NPD #215): a rule of `type:
//!   resolve` (nodestatus's) whose pattern sets its `condition` back to
//!   False, and `clearAfter` on a condition (a Go duration: a True
//!   condition not matched again for that long goes back to False).

use std::collections::HashMap;

use nodestatus_sdk::reactor::{Lines, Reactor, Stream, Subscriptions};
use nodestatus_sdk::{ConditionStatus, EventType, Metadata, Node, Setter, host};
use serde::Deserialize;

/// The plugin.
pub struct LogRules;

/// The settings: one monitor, or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Settings {
    /// `{"monitors": [...]}`.
    Many {
        /// The monitors.
        monitors: Vec<Monitor>,
    },
    /// One NPD monitor config.
    One(Box<Monitor>),
}

impl Settings {
    /// The monitors, in order.
    pub fn monitors(&self) -> &[Monitor] {
        match self {
            Self::Many { monitors } => monitors,
            Self::One(m) => std::slice::from_ref(&**m),
        }
    }
}

/// One NPD system-log-monitor config (`pkg/systemlogmonitor/config.go`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Monitor {
    /// `kmsg`, `filelog` or `journald`.
    pub plugin: String,
    /// filelog: `message` (and `timestamp`, `timestampFormat`, not used);
    /// journald: `source`, the identifier.
    #[serde(default)]
    pub plugin_config: HashMap<String, String>,
    /// The file of `filelog`.
    #[serde(default)]
    pub log_path: String,
    /// How far back to start (a Go duration; `0` by default).
    #[serde(default)]
    pub lookback: Option<String>,
    /// How many lines a pattern may span (10 by default).
    #[serde(default)]
    pub buffer_size: Option<u32>,
    /// The event source (`kernel-monitor`); also the stream's name.
    #[serde(default)]
    pub source: String,
    /// The conditions it owns, with their healthy defaults.
    #[serde(default)]
    pub conditions: Vec<DefaultCondition>,
    /// The rules.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// A condition's healthy default.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefaultCondition {
    /// Its type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its reason while False.
    #[serde(default)]
    pub reason: String,
    /// Its message while False.
    #[serde(default)]
    pub message: String,
    /// nodestatus: a True condition not matched again for this long (a Go
    /// duration) goes back to False.
    #[serde(default)]
    pub clear_after: Option<String>,
}

/// One rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// `temporary`, `permanent`, or nodestatus's `resolve`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The condition of a permanent or resolve rule.
    #[serde(default)]
    pub condition: String,
    /// The event's or condition's reason.
    #[serde(default)]
    pub reason: String,
    /// The pattern (Go's RE2 syntax).
    pub pattern: String,
    /// Appended to the message after `; `.
    #[serde(default)]
    pub pattern_generated_message_suffix: String,
}

/// The settings, read and checked: every permanent or resolve rule names
/// a condition of its monitor, every type is known, durations parse.
pub fn settings() -> Result<Settings, String> {
    let s: Settings = host::config().map_err(|e| e.to_string())?;
    check(&s)?;
    Ok(s)
}

/// Checks settings as [`settings`] does.
pub fn check(s: &Settings) -> Result<(), String> {
    for (i, m) in s.monitors().iter().enumerate() {
        let at = |what: String| format!("monitor {i} ({}): {what}", m.source);
        match m.plugin.as_str() {
            "kmsg" | "journald" => {}
            "filelog" if m.log_path.starts_with('/') => {}
            "filelog" => return Err(at("filelog needs logPath, an absolute path".into())),
            other => {
                return Err(at(format!(
                    "plugin {other:?} is not kmsg, filelog or journald"
                )));
            }
        }
        if let Some(l) = &m.lookback {
            go_duration(l).map_err(|e| at(format!("lookback: {e}")))?;
        }
        for c in &m.conditions {
            if let Some(d) = &c.clear_after {
                go_duration(d)
                    .map_err(|e| at(format!("condition {}: clearAfter: {e}", c.type_)))?;
            }
        }
        for (j, r) in m.rules.iter().enumerate() {
            match r.type_.as_str() {
                "temporary" => {}
                "permanent" | "resolve" => {
                    if !m.conditions.iter().any(|c| c.type_ == r.condition) {
                        return Err(at(format!(
                            "rule {j} ({}) names condition {:?}, which is not among its conditions",
                            r.reason, r.condition
                        )));
                    }
                }
                other => {
                    return Err(at(format!(
                        "rule {j} ({}) has type {other:?}: write temporary, permanent or resolve",
                        r.reason
                    )));
                }
            }
        }
    }
    Ok(())
}

/// A Go duration (`300ms`, `5m`, `1h30m`, `0`), in seconds.
pub fn go_duration(text: &str) -> Result<f64, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(0.0);
    }
    let (mut total, mut rest) = (0.0, t);
    if rest.is_empty() {
        return Err(format!("{text:?} is not a duration such as 5m or 1h30m"));
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{text:?} has a number without a unit (s, m, h)"))?;
        let value: f64 = rest[..n]
            .parse()
            .map_err(|_| format!("{text:?} is not a duration such as 5m or 1h30m"))?;
        let rest_unit = &rest[n..];
        let u = rest_unit
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest_unit.len());
        let unit = match &rest_unit[..u] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => {
                return Err(format!(
                    "{text:?} has the unit {other:?}; use ms, s, m or h"
                ));
            }
        };
        total += value * unit;
        rest = &rest_unit[u..];
    }
    Ok(total)
}

/// Each monitor's stream name: its `source`, made unique by its index.
fn stream_names(s: &Settings) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    s.monitors()
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let base: String = match m.source.as_str() {
                "" => format!("monitor-{i}"),
                s => s.chars().take(50).collect(),
            };
            if seen.insert(base.clone()) {
                base
            } else {
                format!("{base}-{i}")
            }
        })
        .collect()
}

/// What the settings follow: one stream per monitor.
pub fn subscriptions(s: &Settings) -> Subscriptions {
    let mut subs = Subscriptions::new();
    for (m, name) in s.monitors().iter().zip(stream_names(s)) {
        let mut stream = match m.plugin.as_str() {
            "kmsg" => Stream::kmsg(&name),
            "filelog" => Stream::file(&name, &m.log_path),
            _ => {
                let units: Vec<&str> = m
                    .plugin_config
                    .get("source")
                    .map(String::as_str)
                    .into_iter()
                    .collect();
                Stream::journal(&name, &units)
            }
        };
        for r in &m.rules {
            // As NPD compiles it: the pattern must match up to the end.
            stream = stream.pattern(&format!("{}\\z", r.pattern));
        }
        let lookback = m
            .lookback
            .as_deref()
            .and_then(|l| go_duration(l).ok())
            .unwrap_or(0.0);
        stream = stream
            .span(m.buffer_size.unwrap_or(10).clamp(1, 64))
            .lookback(lookback.ceil() as u64);
        if m.plugin == "filelog"
            && let Some(msg) = m.plugin_config.get("message")
        {
            stream = stream.extract(msg);
        }
        subs = subs.stream(stream);
    }
    subs
}

/// The message NPD makes of matched lines.
fn message(text: &str, suffix: &str) -> String {
    match suffix {
        "" => text.to_owned(),
        s => format!("{text}; {s}"),
    }
}

/// Writes every condition of `s` on `node`: as the node holds it (a True
/// one past its `clearAfter` goes back to False), or its default when
/// absent. `now_s` is the time, in seconds since the epoch.
pub fn keep_conditions(node: &mut Node, s: &Settings, now_s: f64) {
    for m in s.monitors() {
        for c in &m.conditions {
            let held = node.condition(&c.type_);
            let expired = held.as_ref().is_some_and(|h| {
                h.status == "True"
                    && c.clear_after
                        .as_deref()
                        .and_then(|d| go_duration(d).ok())
                        .is_some_and(|d| {
                            h.last_transition_time
                                .as_deref()
                                .and_then(nodestatus_sdk::time::unix_seconds)
                                .is_some_and(|t| now_s - t as f64 >= d)
                        })
            });
            match held {
                Some(h) if !expired && h.status == "True" => {
                    let (reason, message) =
                        (h.reason.unwrap_or_default(), h.message.unwrap_or_default());
                    node.set_condition(&c.type_, ConditionStatus::True, &reason, &message);
                }
                Some(h) if expired => {
                    node.set_condition(&c.type_, ConditionStatus::False, &c.reason, &c.message);
                    host::record_event(
                        EventType::Normal,
                        &c.reason,
                        &format!(
                            "Node condition {} is now: False, reason: {}, message: {:?} (no match for {}; it was {})",
                            c.type_,
                            c.reason,
                            c.message,
                            c.clear_after.as_deref().unwrap_or_default(),
                            h.reason.as_deref().unwrap_or_default()
                        ),
                    );
                }
                _ => {
                    node.set_condition(&c.type_, ConditionStatus::False, &c.reason, &c.message);
                }
            }
        }
    }
}

/// Applies matched lines: events for temporary rules, conditions for
/// permanent and resolve ones.
pub fn apply(node: &mut Node, s: &Settings, lines: &Lines) {
    let names = stream_names(s);
    for m in &lines.matches {
        let Some(i) = names.iter().position(|n| *n == m.stream) else {
            continue;
        };
        let monitor = &s.monitors()[i];
        let Some(rule) = monitor.rules.get(m.pattern as usize) else {
            continue;
        };
        let text = message(&m.text, &rule.pattern_generated_message_suffix);
        match rule.type_.as_str() {
            "temporary" => host::record_event(EventType::Warning, &rule.reason, &text),
            "permanent" => {
                let held = node.condition(&rule.condition);
                let changed = held.as_ref().is_none_or(|h| {
                    h.status != "True" || h.reason.as_deref() != Some(&rule.reason)
                });
                if changed {
                    node.set_condition(&rule.condition, ConditionStatus::True, &rule.reason, &text);
                    host::record_event(
                        EventType::Warning,
                        &rule.reason,
                        &format!(
                            "Node condition {} is now: True, reason: {}, message: {:?}",
                            rule.condition, rule.reason, text
                        ),
                    );
                }
            }
            _ => {
                // resolve: back to the default, when it is True.
                let held = node.condition(&rule.condition);
                if held.as_ref().is_some_and(|h| h.status == "True")
                    && let Some(d) = monitor
                        .conditions
                        .iter()
                        .find(|c| c.type_ == rule.condition)
                {
                    node.set_condition(&d.type_, ConditionStatus::False, &d.reason, &d.message);
                    host::record_event(
                        EventType::Normal,
                        &d.reason,
                        &format!(
                            "Node condition {} is now: False, reason: {}, message: {:?}",
                            d.type_, d.reason, text
                        ),
                    );
                }
            }
        }
    }
}

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Setter for LogRules {
    fn metadata() -> Metadata {
        Metadata::new("log-rules", env!("CARGO_PKG_VERSION"))
            .description("node-problem-detector's log rules: kernel log, file and journal lines become conditions and events")
    }

    fn set(node: &mut Node) -> nodestatus_sdk::Result<()> {
        let s = settings()?;
        keep_conditions(node, &s, now_s());
        Ok(())
    }
}

impl Reactor for LogRules {
    fn subscribe() -> Subscriptions {
        match settings() {
            Ok(s) => subscriptions(&s),
            Err(e) => {
                // `set` fails with the same message, so the node says it.
                host::warn(&format!("log-rules: {e}"));
                Subscriptions::new()
            }
        }
    }

    fn on_lines(node: &mut Node, lines: &Lines) -> nodestatus_sdk::Result<()> {
        let s = settings()?;
        if lines.dropped > 0 {
            host::warn(&format!(
                "{} matched lines were dropped by the host",
                lines.dropped
            ));
        }
        // The conditions as held first (with their defaults), then the
        // matches over them, in order.
        keep_conditions(node, &s, now_s());
        apply(node, &s, lines);
        Ok(())
    }
}

nodestatus_sdk::export_reactor!(LogRules);
