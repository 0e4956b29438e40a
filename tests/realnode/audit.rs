//! The apiserver's audit log of the node identity's writes, read back: which
//! writer (told apart by user agent, since the kubelet and nodestatus share
//! the node's credentials) changed which field of the Node, and whether one
//! ever undid the other or flapped.
//!
//! A write is a Node create, update or patch (of the node or its status),
//! logged at level `Request` with its body (`NodeParts::audit_node_writes`).
//! A body is flattened into field paths the way a strategic merge patch
//! reads: maps by key, `status.conditions` by `type` (a condition is one
//! path per field, `status.conditions[Ready].status`), other lists whole,
//! `null` and `{"$patch": "delete"}` as a removal, `$` directives skipped.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Who wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Writer {
    Kubelet,
    Nodestatus,
    /// The test's own probes (user agent [`TEST_AGENT`]).
    Test,
}

/// The user agent of the test's own clients.
pub const TEST_AGENT: &str = "nodestatus-realnode-test";

impl Writer {
    fn of(user_agent: &str) -> Self {
        if user_agent.starts_with("kubelet/") {
            Writer::Kubelet
        } else if user_agent.starts_with(TEST_AGENT) || user_agent.starts_with("kubectl/") {
            Writer::Test
        } else {
            Writer::Nodestatus
        }
    }
}

/// One successful write to the node.
#[derive(Debug, Clone)]
pub struct Write {
    pub writer: Writer,
    /// The fields it set (`Some`) or removed (`None`).
    pub fields: Vec<(String, Option<Value>)>,
}

/// What the audit log says about one node.
#[derive(Debug, Default)]
pub struct Report {
    /// Successful Node writes, in the order the apiserver received them.
    pub writes: Vec<Write>,
    /// Requests by writer, resource and verb (`kubelet leases update`),
    /// with their status codes.
    pub requests: BTreeMap<(Writer, String, String), BTreeMap<u16, usize>>,
    /// The user agents seen for each writer.
    pub agents: BTreeMap<Writer, BTreeSet<String>>,
}

/// Reads the audit log's events about node `node` (its Node and its
/// Lease).
pub fn read(text: &str, node: &str) -> Report {
    let mut events: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| {
            e["objectRef"]["name"] == node
                && matches!(
                    e["objectRef"]["resource"].as_str(),
                    Some("nodes" | "leases")
                )
        })
        .collect();
    events.sort_by(|a, b| {
        a["requestReceivedTimestamp"]
            .as_str()
            .cmp(&b["requestReceivedTimestamp"].as_str())
    });
    let mut r = Report::default();
    for e in events {
        let agent = e["userAgent"].as_str().unwrap_or("").to_owned();
        let writer = Writer::of(&agent);
        r.agents.entry(writer).or_default().insert(agent);
        let resource = e["objectRef"]["resource"].as_str().unwrap_or("").to_owned();
        let sub = e["objectRef"]["subresource"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let verb = e["verb"].as_str().unwrap_or("").to_owned();
        let code = e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16;
        let what = if sub.is_empty() {
            resource.clone()
        } else {
            format!("{resource}/{sub}")
        };
        *r.requests
            .entry((writer, what, verb.clone()))
            .or_default()
            .entry(code)
            .or_default() += 1;
        let is_write = matches!(verb.as_str(), "create" | "update" | "patch");
        if resource == "nodes" && is_write && (200..300).contains(&code) {
            let mut fields = Vec::new();
            flatten_node(&e["requestObject"], &mut fields);
            r.writes.push(Write { writer, fields });
        }
    }
    r
}

/// The Node's fields in a write's body: labels, annotations, spec, status.
pub fn flatten_node(body: &Value, out: &mut Vec<(String, Option<Value>)>) {
    for key in ["labels", "annotations"] {
        if let Some(m) = body["metadata"][key].as_object() {
            for (k, v) in m {
                out.push((format!("metadata.{key}[{k}]"), present(v)));
            }
        }
    }
    for top in ["spec", "status"] {
        if let Some(v) = body.get(top) {
            flatten(v, top, out);
        }
    }
}

fn present(v: &Value) -> Option<Value> {
    (!v.is_null()).then(|| v.clone())
}

fn flatten(v: &Value, path: &str, out: &mut Vec<(String, Option<Value>)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                if k.starts_with('$') {
                    continue;
                }
                let p = format!("{path}.{k}");
                if p == "status.conditions" {
                    for c in v.as_array().into_iter().flatten() {
                        let t = c["type"].as_str().unwrap_or("?");
                        let cp = format!("status.conditions[{t}]");
                        if c["$patch"] == "delete" {
                            out.push((cp, None));
                            continue;
                        }
                        for (f, fv) in c.as_object().into_iter().flatten() {
                            if f != "type" && !f.starts_with('$') {
                                out.push((format!("{cp}.{f}"), present(fv)));
                            }
                        }
                    }
                } else if v.is_object() {
                    flatten(v, &p, out);
                } else {
                    out.push((p, present(v)));
                }
            }
        }
        Value::Array(items) => {
            // A whole list, without the `{"$patch": "replace"}` directive.
            let items: Vec<Value> = items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect();
            out.push((path.to_owned(), Some(Value::Array(items))));
        }
        other => out.push((path.to_owned(), present(other))),
    }
}

/// A field one writer set and the other then changed (or removed).
#[derive(Debug, Clone)]
pub struct Undo {
    pub path: String,
    pub first: Writer,
    pub was: Option<Value>,
    pub then: Writer,
    pub to: Option<Value>,
}

/// A field whose value came back to an earlier one after a change
/// (`A, B, A`), by one writer.
#[derive(Debug, Clone)]
pub struct Flap {
    pub writer: Writer,
    pub path: String,
    pub values: Vec<Option<Value>>,
}

impl Report {
    /// Writes by `w` (node create, update and patch).
    pub fn writes_by(&self, w: Writer) -> usize {
        self.writes.iter().filter(|x| x.writer == w).count()
    }

    /// The paths `w` wrote.
    pub fn paths_by(&self, w: Writer) -> BTreeSet<String> {
        self.writes
            .iter()
            .filter(|x| x.writer == w)
            .flat_map(|x| x.fields.iter().map(|(p, _)| p.clone()))
            .collect()
    }

    /// Every time the kubelet or nodestatus changed a field whose last
    /// write was the other's, to another value.
    pub fn undos(&self) -> Vec<Undo> {
        let mut last: BTreeMap<&str, (Writer, &Option<Value>)> = BTreeMap::new();
        let mut out = Vec::new();
        for w in self.writes.iter().filter(|w| w.writer != Writer::Test) {
            for (p, v) in &w.fields {
                if let Some((first, was)) = last.get(p.as_str())
                    && *first != w.writer
                    && *was != v
                {
                    out.push(Undo {
                        path: p.clone(),
                        first: *first,
                        was: (*was).clone(),
                        then: w.writer,
                        to: v.clone(),
                    });
                }
                last.insert(p, (w.writer, v));
            }
        }
        out
    }

    /// Fields whose written values went back to an earlier value, per
    /// writer. Heartbeat and transition times move on every write and are
    /// not compared; the disk reporter's per-mount annotations are
    /// measurements (free bytes go up and down), so only their presence is.
    pub fn flaps(&self) -> Vec<Flap> {
        let mut seqs: BTreeMap<(Writer, &str), Vec<Option<Value>>> = BTreeMap::new();
        for w in self.writes.iter().filter(|w| w.writer != Writer::Test) {
            for (p, v) in &w.fields {
                if p.ends_with("Time") {
                    continue;
                }
                let v = if p.starts_with("metadata.annotations[disk.nodestatus.io/") {
                    v.as_ref().map(|_| Value::Bool(true))
                } else {
                    v.clone()
                };
                let s = seqs.entry((w.writer, p)).or_default();
                if s.last() != Some(&v) {
                    s.push(v);
                }
            }
        }
        seqs.into_iter()
            .filter(|(_, s)| s.iter().enumerate().any(|(i, v)| s[..i].contains(v)))
            .map(|((writer, path), values)| Flap {
                writer,
                path: path.to_owned(),
                values,
            })
            .collect()
    }
}

/// The analysis finds what it is meant to find, on a made-up log: the
/// kubelet's Ready changed by another writer, a label removed and set
/// again, and nothing in writes that stay apart. Run before the suite,
/// so that a clean real log means something.
pub fn self_check() -> Result<(), String> {
    let event = |agent: &str, at: &str, body: Value| {
        serde_json::json!({
            "stage": "ResponseComplete", "verb": "patch", "userAgent": agent,
            "requestReceivedTimestamp": at,
            "objectRef": {"resource": "nodes", "name": "n", "subresource": "status"},
            "responseStatus": {"code": 200}, "requestObject": body,
        })
        .to_string()
    };
    let kubelet = "kubelet/v1.37.2 (linux/amd64)";
    let ready =
        |s: &str| serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": s}]}});
    let label = |v: Value| serde_json::json!({"metadata": {"labels": {"example.com/x": v}}});
    let log = [
        event(kubelet, "2026-01-01T00:00:01Z", ready("True")),
        event("", "2026-01-01T00:00:02Z", label(Value::from("a"))),
        event("", "2026-01-01T00:00:03Z", ready("False")),
        event("", "2026-01-01T00:00:04Z", label(Value::Null)),
        event("", "2026-01-01T00:00:05Z", label(Value::from("a"))),
        event(kubelet, "2026-01-01T00:00:06Z", ready("True")),
    ]
    .join("\n");
    let r = read(&log, "n");
    let undos: Vec<String> = r.undos().into_iter().map(|u| u.path).collect();
    let flaps: Vec<String> = r.flaps().into_iter().map(|f| f.path).collect();
    let want_undos = ["status.conditions[Ready].status"; 2];
    if undos != want_undos || flaps != ["metadata.labels[example.com/x]"] {
        return Err(format!(
            "the audit analysis missed a planted fault: undos {undos:?} (want {want_undos:?}), flaps {flaps:?}"
        ));
    }
    // Apart, the same writers' fields raise nothing.
    let apart = [
        event(kubelet, "2026-01-01T00:00:01Z", ready("True")),
        event("", "2026-01-01T00:00:02Z", label(Value::from("a"))),
        event(kubelet, "2026-01-01T00:00:03Z", ready("True")),
    ]
    .join("\n");
    let r = read(&apart, "n");
    if !r.undos().is_empty() || !r.flaps().is_empty() {
        return Err("the audit analysis flagged writes that stay apart".into());
    }
    Ok(())
}
