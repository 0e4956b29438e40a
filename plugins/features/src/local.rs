//! NFD's local feature files: one `name[=value]` a line in the files of a
//! directory (`/etc/kubernetes/node-feature-discovery/features.d`), written
//! by side-cars for the node's labels.
//!
//! The format, as NFD reads it:
//! - a line is `name=value`, or `name` for the value `true`; white space
//!   around a line is cut, empty lines are skipped;
//! - a name without a prefix (no `/`) gets `feature.node.kubernetes.io/`;
//! - `#` starts a comment; `# +expiry-time=<RFC 3339>` makes the lines after
//!   it (to the next expiry) expire then, `# +no-label` keeps the next
//!   feature line off the labels, `# +no-feature` off the raw features
//!   (which this plugin does not publish: it changes nothing here);
//! - a file whose name starts with `.` is skipped (writers write a dot file
//!   and rename it), and so is anything not a regular file;
//! - a file over 64 KiB is refused whole, as NFD refuses it;
//! - a later file's value of a name wins over an earlier file's (the files
//!   are read by name).
//!
//! Where NFD logs and goes on, so does this plugin, line by line: a line
//! that is not UTF-8, whose name or value is not a valid label (a line too
//! long is one of them), whose label the node may not set on itself
//! (NodeRestriction), an unknown directive, or an expiry time that does not
//! parse is refused and reported, and the rest of the file and the other
//! files apply. Unlike NFD, an expiry time that does not parse refuses the
//! lines it governs (to the next valid expiry): they are never taken as
//! "never expires".

use std::collections::BTreeMap;

use nodestatus_sdk::names;

use crate::sources::Root;

/// The prefix of a name written without one.
pub const DEFAULT_PREFIX: &str = "feature.node.kubernetes.io/";

/// The largest feature file read (NFD's `MaxFeatureFileSize`).
pub const MAX_FILE_SIZE: u64 = 64 << 10;

/// What the files say.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The labels, with their prefixes.
    pub labels: BTreeMap<String, String>,
    /// What was refused: `<file>:<line>: <why>` (`<file>: <why>` for a
    /// whole file).
    pub refused: Vec<String>,
    /// Feature lines skipped because their time expired.
    pub expired: usize,
}

/// Seconds since the epoch of an RFC 3339 time as Go's `time.RFC3339`
/// parses it (`Z` or an offset, an optional fraction).
pub fn rfc3339_seconds(s: &str) -> Result<i64, String> {
    nodestatus_sdk::time::go_rfc3339(s)?;
    // Go allows a one-digit hour: make it two, then read the UTC time.
    let (date, time) = s.split_at(11);
    let time = if time.as_bytes().get(1) == Some(&b':') {
        format!("0{time}")
    } else {
        time.to_owned()
    };
    let clock = &time[..8];
    let rest = &time[8..];
    let zone_at = rest.find(['Z', '+', '-']).unwrap_or(rest.len());
    let zone = &rest[zone_at..];
    let offset = match zone.as_bytes().first() {
        Some(b'+' | b'-') => {
            let h: i64 = zone[1..3].parse().map_err(|_| "bad offset hours")?;
            let m: i64 = zone[4..6].parse().map_err(|_| "bad offset minutes")?;
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            sign * (h * 3600 + m * 60)
        }
        _ => 0,
    };
    let utc = nodestatus_sdk::time::unix_seconds(&format!("{date}{clock}Z"))
        .ok_or_else(|| format!("{s:?} is not a date and time"))?;
    Ok(utc - offset)
}

/// Why a label may not be written, if it may not: not a valid name or
/// value, or one NodeRestriction refuses from a node's own credentials.
pub fn label_problem(name: &str, value: &str) -> Option<String> {
    if let Err(e) = names::qualified_name(name) {
        return Some(format!("invalid label name: {e}"));
    }
    if let Err(e) = names::label_value(value) {
        return Some(e);
    }
    let domain = name.split_once('/').map(|(d, _)| d)?;
    let within = |base: &str| domain == base || domain.ends_with(&format!(".{base}"));
    let kube = within("kubernetes.io") || within("k8s.io");
    let allowed = within("node.kubernetes.io") || within("kubelet.kubernetes.io");
    if within("node-restriction.kubernetes.io") || (kube && !allowed) {
        return Some(format!(
            "{name:?}: a node may not set a {domain} label on itself (NodeRestriction); use a name under feature.node.kubernetes.io/ or a domain of your own"
        ));
    }
    None
}

/// The state of the directives as a file is read.
struct Directives {
    /// `None`: never; `Some(Err)`: a time that did not parse.
    expiry: Option<Result<i64, ()>>,
    no_label: bool,
}

/// Reads one file's text (its lines as bytes) at `now` into `out`.
pub fn parse_file(file: &str, content: &[u8], now: i64, out: &mut Outcome) {
    let mut d = Directives {
        expiry: None,
        no_label: false,
    };
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for (i, raw) in content.split(|b| *b == b'\n').enumerate() {
        let at = format!("{file}:{}", i + 1);
        let Ok(line) = std::str::from_utf8(raw) else {
            out.refused.push(format!("{at}: not UTF-8 text"));
            continue;
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            if let Some(directive) = line.strip_prefix("# +") {
                directive_line(&at, directive, &mut d, out);
            }
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, "true"));
        let no_label = std::mem::take(&mut d.no_label);
        match d.expiry {
            Some(Err(())) => {
                out.refused.push(format!(
                    "{at}: {key:?} is under an expiry time that does not parse; it is not written"
                ));
                continue;
            }
            Some(Ok(t)) if t < now => {
                out.expired += 1;
                continue;
            }
            Some(Ok(_)) | None => {}
        }
        let name = if key.contains('/') {
            key.to_owned()
        } else {
            format!("{DEFAULT_PREFIX}{key}")
        };
        if no_label {
            // NFD also drops this file's earlier value of the name.
            labels.remove(&name);
            continue;
        }
        if let Some(why) = label_problem(&name, value) {
            out.refused.push(format!("{at}: {why}"));
            continue;
        }
        labels.insert(name, value.to_owned());
    }
    out.labels.extend(labels);
}

fn directive_line(at: &str, directive: &str, d: &mut Directives, out: &mut Outcome) {
    let (key, value) = match directive.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (directive, None),
    };
    match (key, value) {
        ("expiry-time", Some(v)) => match rfc3339_seconds(v.trim()) {
            Ok(t) => d.expiry = Some(Ok(t)),
            Err(e) => {
                out.refused.push(format!(
                    "{at}: the expiry time {:?} does not parse ({e}); the lines after it are not written until the next expiry time",
                    v.trim()
                ));
                d.expiry = Some(Err(()));
            }
        },
        ("expiry-time", None) => {
            out.refused.push(format!(
                "{at}: '# +expiry-time' without a time (write '# +expiry-time=2030-01-01T00:00:00Z'); the lines after it are not written until the next expiry time"
            ));
            d.expiry = Some(Err(()));
        }
        ("no-label", _) => d.no_label = true,
        ("no-feature", _) => {}
        _ => out.refused.push(format!(
            "{at}: unknown directive {key:?} (expiry-time, no-label and no-feature are known)"
        )),
    }
}

/// Reads every feature file of `dir` at `now`. A directory that is not
/// there (not created yet, or not granted) has no features and is no
/// error.
pub fn read_dir(root: &Root, dir: &str, now: i64) -> Outcome {
    let mut out = Outcome::default();
    for name in root.list(dir).unwrap_or_default() {
        if name.starts_with('.') {
            continue;
        }
        let path = root.path(&format!("{dir}/{name}"));
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if meta.len() > MAX_FILE_SIZE {
            out.refused.push(format!(
                "{name}: {} bytes, over NFD's limit of {MAX_FILE_SIZE} bytes a file: none of it is written",
                meta.len()
            ));
            continue;
        }
        match std::fs::read(&path) {
            Ok(content) => parse_file(&name, &content, now, &mut out),
            Err(e) => out.refused.push(format!("{name}: cannot be read: {e}")),
        }
    }
    out
}
