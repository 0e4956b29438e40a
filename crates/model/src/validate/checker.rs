//! The checker behind [`super::problems`]: one walk over a node that
//! records every problem, by the API server's rules and nodestatus's own.

use std::collections::HashSet;
use std::fmt;

use nodestatus_apimachinery::MAX_NODE_BYTES;
use nodestatus_apimachinery::names::{label_value, qualified_name};
use nodestatus_apimachinery::quantity;
use nodestatus_apimachinery::time::go_rfc3339;
use serde_json::{Map, Value};

use super::measure::{is_integer_resource, json_size};
use super::{
    MAX_PROBLEMS, NODE_INFO_FIELDS, PREFER_AVOID_PODS_ANNOTATION, Problem, Rule, TAINTS_ANNOTATION,
    TOTAL_ANNOTATION_SIZE_LIMIT,
};

#[derive(Default)]
pub(super) struct Checker {
    pub(super) out: Vec<Problem>,
}

/// The JSON types of Go's decoder, for messages.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

impl Checker {
    fn push(&mut self, path: impl fmt::Display, rule: Rule, detail: impl Into<String>) {
        if self.out.len() < MAX_PROBLEMS {
            self.out.push(Problem {
                path: path.to_string(),
                rule,
                detail: detail.into(),
            });
        }
    }

    fn full(&self) -> bool {
        self.out.len() >= MAX_PROBLEMS
    }

    fn wrong_type(&mut self, path: impl fmt::Display, want: &str, got: &Value) {
        let got = json_type(got);
        self.push(path, Rule::Type, format!("must be {want}, not {got}"));
    }

    /// `get` of the value, or nothing for null or absent (Go decodes null
    /// into the zero value); another JSON type is a problem.
    fn typed<'a, T>(
        &mut self,
        path: impl fmt::Display,
        v: Option<&'a Value>,
        want: &str,
        get: impl Fn(&'a Value) -> Option<T>,
    ) -> Option<T> {
        match v {
            None | Some(Value::Null) => None,
            Some(x) => {
                let got = get(x);
                if got.is_none() {
                    self.wrong_type(path, want, x);
                }
                got
            }
        }
    }

    /// An object or null.
    fn object<'a>(&mut self, path: &str, v: Option<&'a Value>) -> Option<&'a Map<String, Value>> {
        self.typed(path, v, "an object", Value::as_object)
    }

    /// A list or null (empty).
    fn list<'a>(&mut self, path: &str, v: Option<&'a Value>) -> &'a [Value] {
        self.typed(path, v, "a list", |x| x.as_array().map(Vec::as_slice))
            .unwrap_or(&[])
    }

    /// A string or null; returns the string.
    fn string<'a>(&mut self, path: impl fmt::Display, v: Option<&'a Value>) -> Option<&'a str> {
        self.typed(path, v, "a string", Value::as_str)
    }

    /// An integer in `[min, max]` or null.
    fn integer(&mut self, path: impl fmt::Display, v: Option<&Value>, min: i64, max: i64) {
        match v {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) => {
                if !n.as_i64().is_some_and(|i| (min..=max).contains(&i)) {
                    self.push(
                        path,
                        Rule::Type,
                        format!("{n} is not an integer from {min} to {max}"),
                    );
                }
            }
            Some(other) => self.wrong_type(path, "an integer", other),
        }
    }

    fn time(&mut self, path: impl fmt::Display, v: Option<&Value>) {
        if let Some(t) = self.string(&path, v)
            && let Err(e) = go_rfc3339(t)
        {
            self.push(
                path,
                Rule::Time,
                format!("{t:?} is not an RFC 3339 time: {e}"),
            );
        }
    }

    fn string_map<'a>(&mut self, path: &str, v: Option<&'a Value>) -> Vec<(&'a str, &'a str)> {
        let Some(m) = self.object(path, v) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(m.len());
        for (k, v) in m {
            if let Some(s) = self.string(format_args!("{path}[{k}]"), Some(v)) {
                out.push((k.as_str(), s));
            }
        }
        out
    }

    pub(super) fn node(&mut self, node: &Value) {
        let size = json_size(node);
        if size > MAX_NODE_BYTES {
            self.push(
                "",
                Rule::TooLarge,
                format!(
                    "the node is {size} bytes of JSON, over the {MAX_NODE_BYTES}-byte bound (etcd refuses requests over 1.5 MiB)"
                ),
            );
        }
        let Some(obj) = node.as_object() else {
            self.wrong_type("", "an object", node);
            return;
        };
        if let Some(meta) = self.object("metadata", obj.get("metadata")) {
            self.string("metadata.name", meta.get("name"));
            self.labels(meta.get("labels"));
            self.annotations(meta.get("annotations"));
        }
        if let Some(status) = self.object("status", obj.get("status")) {
            self.status(status);
        }
    }

    fn labels(&mut self, v: Option<&Value>) {
        for (k, val) in self.string_map("metadata.labels", v) {
            if let Err(e) = qualified_name(k) {
                self.push(
                    format_args!("metadata.labels[{k}]"),
                    Rule::LabelKey,
                    format!("invalid label key: {e}"),
                );
            }
            if let Err(e) = label_value(val) {
                self.push(format_args!("metadata.labels[{k}]"), Rule::LabelValue, e);
            }
        }
    }

    fn annotations(&mut self, v: Option<&Value>) {
        let mut total = 0usize;
        for (k, val) in self.string_map("metadata.annotations", v) {
            total += k.len() + val.len();
            if let Err(e) = qualified_name(&k.to_lowercase()) {
                self.push(
                    format_args!("metadata.annotations[{k}]"),
                    Rule::AnnotationKey,
                    format!("invalid annotation key: {e}"),
                );
            }
            if k == PREFER_AVOID_PODS_ANNOTATION
                && !val.is_empty()
                && let Err(e) = prefer_avoid_pods(val)
            {
                self.push(
                    format_args!("metadata.annotations[{k}]"),
                    Rule::PreferAvoidPods,
                    e,
                );
            }
            if k == TAINTS_ANNOTATION
                && !val.is_empty()
                && let Err(e) = taints_annotation(val)
            {
                self.push(
                    format_args!("metadata.annotations[{k}]"),
                    Rule::TaintsAnnotation,
                    e,
                );
            }
        }
        if total > TOTAL_ANNOTATION_SIZE_LIMIT {
            self.push(
                "metadata.annotations",
                Rule::AnnotationsTooLarge,
                format!(
                    "the annotations are {total} bytes (keys plus values), over the API server's limit of {TOTAL_ANNOTATION_SIZE_LIMIT}"
                ),
            );
        }
    }

    fn status(&mut self, status: &Map<String, Value>) {
        for which in ["capacity", "allocatable"] {
            let path = format!("status.{which}");
            let Some(m) = self.object(&path, status.get(which)) else {
                continue;
            };
            for (k, v) in m {
                self.resource(&path, k, v);
            }
        }
        self.conditions(status.get("conditions"));
        self.addresses(status.get("addresses"));
        if let Some(de) = self.object("status.daemonEndpoints", status.get("daemonEndpoints")) {
            let p = "status.daemonEndpoints.kubeletEndpoint";
            if let Some(ke) = self.object(p, de.get("kubeletEndpoint")) {
                self.integer(
                    format_args!("{p}.Port"),
                    ke.get("Port"),
                    i32::MIN.into(),
                    i32::MAX.into(),
                );
            }
        }
        if let Some(info) = self.object("status.nodeInfo", status.get("nodeInfo")) {
            // Go ignores fields it does not know, whatever their type.
            for k in NODE_INFO_FIELDS {
                self.string(format_args!("status.nodeInfo.{k}"), info.get(*k));
            }
        }
        for (i, img) in self
            .list("status.images", status.get("images"))
            .iter()
            .enumerate()
        {
            let p = format!("status.images[{i}]");
            if let Some(img) = self.object(&p, Some(img)) {
                let names = self.list(&format!("{p}.names"), img.get("names"));
                for (j, n) in names.iter().enumerate() {
                    self.string(format_args!("{p}.names[{j}]"), Some(n));
                }
                self.integer(
                    format_args!("{p}.sizeBytes"),
                    img.get("sizeBytes"),
                    i64::MIN,
                    i64::MAX,
                );
            }
            if self.full() {
                return;
            }
        }
        let volumes = self.list("status.volumesInUse", status.get("volumesInUse"));
        for (i, v) in volumes.iter().enumerate() {
            self.string(format_args!("status.volumesInUse[{i}]"), Some(v));
            if self.full() {
                return;
            }
        }
        let attached = self.list("status.volumesAttached", status.get("volumesAttached"));
        for (i, v) in attached.iter().enumerate() {
            let p = format!("status.volumesAttached[{i}]");
            if let Some(v) = self.object(&p, Some(v)) {
                self.string(format_args!("{p}.name"), v.get("name"));
                self.string(format_args!("{p}.devicePath"), v.get("devicePath"));
            }
            if self.full() {
                return;
            }
        }
        self.string("status.phase", status.get("phase"));
        self.object("status.config", status.get("config"));
        self.current_kubelet_fields(status);
    }

    /// The fields a current kubelet writes (Kubernetes 1.30 to 1.37), typed
    /// as the API server decodes them.
    fn current_kubelet_fields(&mut self, status: &Map<String, Value>) {
        let boolean = |v: &Value| v.as_bool();
        for (i, h) in self
            .list("status.runtimeHandlers", status.get("runtimeHandlers"))
            .iter()
            .enumerate()
        {
            let p = format!("status.runtimeHandlers[{i}]");
            if let Some(h) = self.object(&p, Some(h)) {
                self.string(format_args!("{p}.name"), h.get("name"));
                let f = format!("{p}.features");
                if let Some(f) = self.object(&f, h.get("features")) {
                    for k in ["recursiveReadOnlyMounts", "userNamespaces"] {
                        self.typed(
                            format_args!("{p}.features.{k}"),
                            f.get(k),
                            "a boolean",
                            boolean,
                        );
                    }
                }
            }
            if self.full() {
                return;
            }
        }
        if let Some(f) = self.object("status.features", status.get("features")) {
            self.typed(
                "status.features.supplementalGroupsPolicy",
                f.get("supplementalGroupsPolicy"),
                "a boolean",
                boolean,
            );
        }
        for (i, f) in self
            .list("status.declaredFeatures", status.get("declaredFeatures"))
            .iter()
            .enumerate()
        {
            self.string(format_args!("status.declaredFeatures[{i}]"), Some(f));
        }
        if let Some(info) = status.get("nodeInfo").and_then(Value::as_object) {
            if let Some(swap) = self.object("status.nodeInfo.swap", info.get("swap")) {
                self.integer(
                    "status.nodeInfo.swap.capacity",
                    swap.get("capacity"),
                    i64::MIN,
                    i64::MAX,
                );
            }
            self.typed(
                "status.nodeInfo.runningInUserNamespace",
                info.get("runningInUserNamespace"),
                "a boolean",
                boolean,
            );
        }
    }

    fn resource(&mut self, path: &str, name: &str, v: &Value) {
        let path = format!("{path}[{name}]");
        let text = match v {
            Value::Null => return,
            Value::String(s) => s.trim().to_owned(),
            // Go parses the raw number as a quantity; serde writes it so.
            Value::Number(n) => n.to_string(),
            other => return self.wrong_type(path, "a quantity string", other),
        };
        let q = match quantity::parse_go(&text) {
            Ok(q) => q,
            Err(quantity::ParseError::Syntax) => {
                return self.push(
                    path,
                    Rule::Quantity,
                    format!("{text:?} is not a quantity (for example 2, 500m, 16Gi, 1.5G, 1e3)"),
                );
            }
            Err(quantity::ParseError::OutOfRange) => {
                return self.push(
                    path,
                    Rule::QuantityOutOfRange,
                    format!("{text:?} is beyond the quantities nodestatus checks"),
                );
            }
        };
        if q.negative {
            self.push(
                &path,
                Rule::NegativeQuantity,
                format!("{text:?} is negative: capacity and allocatable must be non-negative"),
            );
        } else if is_integer_resource(name) {
            match q.milli_ceil() {
                Some(m) if m % 1000 == 0 => {}
                Some(_) => self.push(
                    path,
                    Rule::NonIntegerQuantity,
                    format!("{text:?} is not a whole number: {name} is counted in whole units"),
                ),
                None => self.push(
                    path,
                    Rule::QuantityOutOfRange,
                    format!("{text:?} is too large to check as a whole number"),
                ),
            }
        }
    }

    fn conditions(&mut self, v: Option<&Value>) {
        let list = self.list("status.conditions", v);
        let mut seen: HashSet<&str> = HashSet::with_capacity(list.len());
        for (i, c) in list.iter().enumerate() {
            if self.full() {
                return;
            }
            let p = format!("status.conditions[{i}]");
            let Some(o) = c.as_object() else {
                if c.is_null() {
                    self.push(
                        &p,
                        Rule::ConditionType,
                        "a condition is null: it has no type",
                    );
                } else {
                    self.wrong_type(&p, "an object", c);
                }
                continue;
            };
            match o.get("type") {
                None | Some(Value::Null) => self.push(
                    format_args!("{p}.type"),
                    Rule::ConditionType,
                    "a condition must have a type (the merge key of status.conditions)",
                ),
                Some(Value::String(t)) if t.is_empty() => self.push(
                    format_args!("{p}.type"),
                    Rule::EmptyConditionType,
                    "a condition type must not be empty",
                ),
                Some(Value::String(t)) => {
                    if !seen.insert(t) {
                        self.push(
                            format_args!("status.conditions[{t}]"),
                            Rule::DuplicateCondition,
                            format!("the type {t:?} is listed more than once"),
                        );
                    }
                }
                Some(other) => self.wrong_type(format_args!("{p}.type"), "a string", other),
            }
            match o.get("status") {
                Some(Value::String(s)) if matches!(s.as_str(), "True" | "False" | "Unknown") => {}
                Some(v) if !v.is_string() && !v.is_null() => {
                    self.wrong_type(format_args!("{p}.status"), "a string", v)
                }
                other => self.push(
                    format_args!("{p}.status"),
                    Rule::ConditionStatus,
                    format!(
                        "status must be True, False or Unknown, not {}",
                        other.map_or("nothing".to_owned(), Value::to_string)
                    ),
                ),
            }
            for k in ["reason", "message"] {
                self.string(format_args!("{p}.{k}"), o.get(k));
            }
            for k in ["lastHeartbeatTime", "lastTransitionTime"] {
                self.time(format_args!("{p}.{k}"), o.get(k));
            }
        }
    }

    fn addresses(&mut self, v: Option<&Value>) {
        let list = self.list("status.addresses", v);
        let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(list.len());
        for (i, a) in list.iter().enumerate() {
            if self.full() {
                return;
            }
            let p = format!("status.addresses[{i}]");
            let Some(o) = self.object(&p, Some(a)) else {
                if a.is_null() {
                    self.push(&p, Rule::AddressShape, "an address is null");
                }
                continue;
            };
            let t = self.string(format_args!("{p}.type"), o.get("type"));
            let addr = self.string(format_args!("{p}.address"), o.get("address"));
            let (t, addr) = (t.unwrap_or_default(), addr.unwrap_or_default());
            if t.is_empty() || addr.is_empty() {
                self.push(
                    &p,
                    Rule::AddressShape,
                    "an address needs a type and an address",
                );
            }
            if !seen.insert((t, addr)) {
                self.push(
                    &p,
                    Rule::DuplicateAddress,
                    format!("the address {t} {addr:?} is listed more than once"),
                );
            }
        }
    }
}

pub(super) fn prefer_avoid_pods(text: &str) -> Result<(), String> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("preferAvoidPods is not JSON: {e}"))?;
    let mut c = Checker::default();
    let Some(o) = c.object("", Some(&v)) else {
        return if v.is_null() {
            Ok(())
        } else {
            Err("preferAvoidPods must be a JSON object".into())
        };
    };
    for (i, e) in c
        .list("preferAvoidPods", o.get("preferAvoidPods"))
        .iter()
        .enumerate()
    {
        let p = format!("preferAvoidPods[{i}]");
        let Some(e) = c.object(&p, Some(e)) else {
            continue;
        };
        let sig = c.object(&format!("{p}.podSignature"), e.get("podSignature"));
        if sig
            .and_then(|s| s.get("podController"))
            .is_none_or(Value::is_null)
        {
            return Err(format!("{p}.podSignature.podController is required"));
        }
        c.time(format_args!("{p}.evictionTime"), e.get("evictionTime"));
        c.string(format_args!("{p}.reason"), e.get("reason"));
        c.string(format_args!("{p}.message"), e.get("message"));
    }
    match c.out.first() {
        Some(p) => Err(format!("preferAvoidPods: {p}")),
        None => Ok(()),
    }
}

pub(super) fn taints_annotation(text: &str) -> Result<(), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("taints are not JSON: {e}"))?;
    let mut c = Checker::default();
    let mut seen = HashSet::new();
    for (i, t) in c.list("taints", Some(&v)).iter().enumerate() {
        let p = format!("taints[{i}]");
        let Some(t) = c.object(&p, Some(t)) else {
            continue;
        };
        let key = c
            .string(format_args!("{p}.key"), t.get("key"))
            .unwrap_or("");
        let value = c
            .string(format_args!("{p}.value"), t.get("value"))
            .unwrap_or("");
        let effect = c
            .string(format_args!("{p}.effect"), t.get("effect"))
            .unwrap_or("");
        c.time(format_args!("{p}.timeAdded"), t.get("timeAdded"));
        qualified_name(key).map_err(|e| format!("{p}.key: {e}"))?;
        label_value(value).map_err(|e| format!("{p}.value: {e}"))?;
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            return Err(format!(
                "{p}.effect must be NoSchedule, PreferNoSchedule or NoExecute, not {effect:?}"
            ));
        }
        if !seen.insert((key, effect)) {
            return Err(format!("{p}: taints must be unique by key and effect"));
        }
    }
    match c.out.first() {
        Some(p) => Err(format!("taints: {p}")),
        None => Ok(()),
    }
}

// --- quantities (apimachinery api/resource/quantity.go) ---
