//! Node validation: the API server's own rules, checked before any PATCH.
//!
//! One refused field fails the whole status update, so a single plugin's bad
//! value would stop every status write of the node (and the node goes
//! NotReady). The host therefore checks each plugin's output, and the whole
//! node before it is sent, against the rules the API server applies to a
//! `nodes/<name>/status` PATCH. Each rule cites where the API server (1.20,
//! the version the tests run against; the rules are unchanged in later
//! releases for these fields) enforces it:
//!
//! | Rule | Where the API server enforces it |
//! |---|---|
//! | [`Rule::Type`] | decoding the patched JSON into `v1.Node` (`encoding/json`-compatible: a string field must be a string, `int32`/`int64` fields integers in range, lists lists, objects objects) |
//! | [`Rule::Time`] | `metav1.Time.UnmarshalJSON`: Go's `time.Parse(time.RFC3339, …)` (second 60 is out of range) |
//! | [`Rule::Quantity`] | `resource.Quantity.UnmarshalJSON` / `ParseQuantity` (apimachinery `api/resource/quantity.go`) |
//! | [`Rule::NegativeQuantity`], [`Rule::NonIntegerQuantity`] | `ValidateNodeResources` → `ValidateResourceQuantityValue` (`pkg/apis/core/validation/validation.go`): non-negative, and whole for `pods` and extended resources (`helper.IsIntegerResourceName`) |
//! | [`Rule::LabelKey`], [`Rule::LabelValue`] | `ValidateObjectMetaUpdate` → `v1validation.ValidateLabels`: `IsQualifiedName` (63-character name, 253-character DNS-subdomain prefix), `IsValidLabelValue` |
//! | [`Rule::AnnotationKey`], [`Rule::AnnotationsTooLarge`] | `ValidateAnnotations` (apimachinery `api/validation/objectmeta.go`): `IsQualifiedName(lower(key))`, keys plus values at most 256 KiB in all |
//! | [`Rule::PreferAvoidPods`], [`Rule::TaintsAnnotation`] | `ValidateNodeSpecificAnnotations`: `scheduler.alpha.kubernetes.io/preferAvoidPods` and `…/taints` must be JSON of their types |
//! | [`Rule::DuplicateAddress`] | `ValidateNodeUpdate`: no two equal `status.addresses` entries |
//! | [`Rule::ConditionType`] | the strategic merge patch: a condition entry without its merge key `type` fails the patch |
//! | [`Rule::TooLarge`] | etcd's request limit (`--max-request-bytes`, 1.5 MiB): the node is stored whole on every write |
//!
//! Some rules are nodestatus's own ([`Origin::Nodestatus`]): the API server
//! accepts them, but they would let a plugin bypass the policy or confuse
//! the node's consumers. A condition type listed twice lets a plugin denied
//! `Ready` flip Ready (the server keeps one of the two entries); a condition
//! status other than True, False or Unknown means nothing to the node
//! lifecycle controller; an address without a type or an address is not one.
//! [`node`] checks only the API server's rules, so a node that the server
//! already holds is never refused by a rule of ours; [`problems`] checks both.
//!
//! [`MAX_NODE_BYTES`] is deliberately below etcd's limit: the stored object
//! is protobuf, close to its JSON size for a node, and the request to etcd
//! carries the key and framing.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

pub use nodestatus_apimachinery::MAX_NODE_BYTES;
pub use nodestatus_apimachinery::names::{label_value, qualified_name};
use nodestatus_apimachinery::quantity;
pub use nodestatus_apimachinery::time::go_rfc3339;

/// `totalAnnotationSizeLimitB`: keys plus values of all annotations.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
/// The annotation the API server parses as `v1.AvoidPods`.
pub const PREFER_AVOID_PODS_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/preferAvoidPods";
/// The annotation the API server parses as a list of taints.
pub const TAINTS_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/taints";
/// The fields of `v1.NodeSystemInfo`.
const NODE_INFO_FIELDS: &[&str] = &[
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
];
/// At most this many problems are listed for one node.
pub const MAX_PROBLEMS: usize = 100;

/// Who refuses a value that breaks a [`Rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// The API server (or etcd behind it) refuses the whole update.
    ApiServer,
    /// The API server would accept it; nodestatus refuses it on purpose.
    Nodestatus,
}

/// A rule a node breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// A field has the wrong JSON type, or an integer is out of its range.
    Type,
    /// Not an RFC 3339 time that Go parses.
    Time,
    /// Not a Kubernetes quantity.
    Quantity,
    /// A negative capacity or allocatable.
    NegativeQuantity,
    /// A fraction for a resource counted in whole units (`pods`, extended
    /// resources).
    NonIntegerQuantity,
    /// A quantity with an exponent or a size that nodestatus does not check
    /// (beyond ±1000 or 10^38): the API server's results there are
    /// implementation accidents.
    QuantityOutOfRange,
    /// A label key that is not a qualified name.
    LabelKey,
    /// A label value over 63 characters or with other characters than
    /// `[A-Za-z0-9_.-]`.
    LabelValue,
    /// An annotation key that is not a qualified name.
    AnnotationKey,
    /// Annotations over 256 KiB in all.
    AnnotationsTooLarge,
    /// A `preferAvoidPods` annotation that is not JSON of `v1.AvoidPods`.
    PreferAvoidPods,
    /// A taints annotation that is not JSON of a list of valid taints.
    TaintsAnnotation,
    /// Two equal addresses.
    DuplicateAddress,
    /// An address without a type or an address.
    AddressShape,
    /// A condition without a `type`.
    ConditionType,
    /// A condition with an empty type.
    EmptyConditionType,
    /// Two conditions of the same type.
    DuplicateCondition,
    /// A condition status other than True, False or Unknown.
    ConditionStatus,
    /// The node is over [`MAX_NODE_BYTES`].
    TooLarge,
}

impl Rule {
    /// Who refuses it.
    pub fn origin(self) -> Origin {
        match self {
            Self::QuantityOutOfRange
            | Self::AddressShape
            | Self::EmptyConditionType
            | Self::DuplicateCondition
            | Self::ConditionStatus => Origin::Nodestatus,
            _ => Origin::ApiServer,
        }
    }

    /// A short name, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Type => "type",
            Self::Time => "time",
            Self::Quantity => "quantity",
            Self::NegativeQuantity => "negative-quantity",
            Self::NonIntegerQuantity => "non-integer-quantity",
            Self::QuantityOutOfRange => "quantity-out-of-range",
            Self::LabelKey => "label-key",
            Self::LabelValue => "label-value",
            Self::AnnotationKey => "annotation-key",
            Self::AnnotationsTooLarge => "annotations-too-large",
            Self::PreferAvoidPods => "prefer-avoid-pods",
            Self::TaintsAnnotation => "taints-annotation",
            Self::DuplicateAddress => "duplicate-address",
            Self::AddressShape => "address-shape",
            Self::ConditionType => "condition-type",
            Self::EmptyConditionType => "empty-condition-type",
            Self::DuplicateCondition => "duplicate-condition",
            Self::ConditionStatus => "condition-status",
            Self::TooLarge => "too-large",
        }
    }
}

/// One thing wrong with a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{path}: {detail}")]
pub struct Problem {
    /// Where, e.g. `status.capacity[pods]` or `status.conditions[2].type`.
    pub path: String,
    /// Which rule.
    pub rule: Rule,
    /// What is wrong, for people.
    pub detail: String,
}

impl Problem {
    fn key(&self) -> (&str, Rule) {
        (&self.path, self.rule)
    }
}

/// This module's error, for a caller that stops on problems (the agent
/// before a PATCH): `validate::update(&old, &new).map_err(Error::Refused)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The API server would refuse the node; nothing was sent.
    #[error(
        "not sent: the API server would refuse the node ({}); the setter that wrote it should have been dropped, please report this",
        describe(.0)
    )]
    Refused(Vec<Problem>),
}

/// The problems, joined for a message (the first few, and how many more).
pub fn describe(problems: &[Problem]) -> String {
    const SHOWN: usize = 5;
    let mut s = problems
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if problems.len() > SHOWN {
        s.push_str(&format!("; and {} more", problems.len() - SHOWN));
    }
    s
}

/// What the API server would refuse in `node`: the final check before a
/// PATCH. A node it refuses would fail the whole status update.
pub fn node(node: &Value) -> Result<(), Vec<Problem>> {
    let p: Vec<Problem> = problems(node)
        .into_iter()
        .filter(|p| p.rule.origin() == Origin::ApiServer)
        .collect();
    if p.is_empty() { Ok(()) } else { Err(p) }
}

/// What the API server would refuse in `new` that it does not already hold
/// in `old` (the node on the server). Use it before patching `old` into
/// `new`: a problem that the server already stores (a rule that changed
/// between releases, a field written by another agent) never blocks the
/// update.
pub fn update(old: &Value, new: &Value) -> Result<(), Vec<Problem>> {
    let before = problems(old);
    let p: Vec<Problem> = introduced(&before, problems(new))
        .into_iter()
        .filter(|p| p.rule.origin() == Origin::ApiServer)
        .collect();
    if p.is_empty() { Ok(()) } else { Err(p) }
}

/// The problems of `after` that `before` does not have (by path and rule).
pub fn introduced(before: &[Problem], after: Vec<Problem>) -> Vec<Problem> {
    let known: HashSet<(&str, Rule)> = before.iter().map(Problem::key).collect();
    after
        .into_iter()
        .filter(|p| !known.contains(&p.key()))
        .collect()
}

/// Every problem of `node`, by the API server's rules and nodestatus's own,
/// up to [`MAX_PROBLEMS`].
pub fn problems(node: &Value) -> Vec<Problem> {
    let mut c = Checker::default();
    c.node(node);
    c.out
}

#[derive(Default)]
struct Checker {
    out: Vec<Problem>,
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

    fn node(&mut self, node: &Value) {
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

/// The size of `v` as compact JSON, without building the text.
pub fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    serde_json::to_writer(&mut c, v).expect("a Value serializes");
    c.0
}

// --- node annotations the API server parses ---

fn prefer_avoid_pods(text: &str) -> Result<(), String> {
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

fn taints_annotation(text: &str) -> Result<(), String> {
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

/// `helper.IsIntegerResourceName`: `pods` (and the quota counts), and every
/// extended resource: a name with a domain outside `kubernetes.io` that is
/// not under `requests.` and makes a qualified name as `requests.<name>`.
pub fn is_integer_resource(name: &str) -> bool {
    const INTEGER: &[&str] = &[
        "pods",
        "count/quotas",
        "quotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    ];
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    INTEGER.contains(&name)
        || (!native
            && !name.starts_with("requests.")
            && qualified_name(&format!("requests.{name}")).is_ok())
}

#[cfg(test)]
mod tests;
