//! The field policy: which parts of the Node a plugin may change.
//!
//! The host compares each plugin's output with its input and names every
//! changed field with a [`FieldPath`], at the granularity that ownership and
//! patches need: one label, one condition type, one capacity resource, one
//! `nodeInfo` field, or a whole list such as `status.addresses`.
//!
//! An [`Allowance`] is a list of allow patterns and deny patterns over the
//! paths' text form. `@default` stands for the built-in allowance:
//!
//! ```text
//! status.conditions[*]  status.capacity[*]  status.allocatable[*]
//! status.addresses  status.nodeInfo.*  status.images  status.volumesInUse
//! status.volumesAttached  status.daemonEndpoints
//! metadata.labels[@node-restriction]  metadata.annotations[@node-restriction]
//! ```
//!
//! `[@node-restriction]` matches the keys that the NodeRestriction admission
//! plugin accepts from a node's own credentials. Some paths are refused whatever
//! the allowance says: identity and bookkeeping fields (`metadata.name`, `uid`,
//! `resourceVersion`, `ownerReferences`, ...), `spec` (the status subresource
//! would drop it anyway), anything under `node-restriction.kubernetes.io`, and
//! the host's own `nodestatus.io/` annotations.

use std::fmt;

use serde_json::{Map, Value};

/// The annotation domain the host reserves for itself.
pub const RESERVED_ANNOTATION_PREFIX: &str = "nodestatus.io/";

/// One field of a Node, as the policy and ownership see it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldPath {
    /// A top-level field other than metadata, spec and status (`kind`).
    Top(String),
    /// `metadata.<key>`, other than labels and annotations.
    Meta(String),
    /// `metadata.labels[<key>]`.
    Label(String),
    /// `metadata.annotations[<key>]`.
    Annotation(String),
    /// `spec.<key>`.
    Spec(String),
    /// `status.conditions[<type>]`.
    Condition(String),
    /// `status.capacity[<resource>]`.
    Capacity(String),
    /// `status.allocatable[<resource>]`.
    Allocatable(String),
    /// `status.nodeInfo.<field>`.
    NodeInfo(String),
    /// `status.<key>`, as a whole (addresses, images, ...).
    Status(String),
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Top(k) => write!(f, "{k}"),
            Self::Meta(k) => write!(f, "metadata.{k}"),
            Self::Label(k) => write!(f, "metadata.labels[{k}]"),
            Self::Annotation(k) => write!(f, "metadata.annotations[{k}]"),
            Self::Spec(k) => write!(f, "spec.{k}"),
            Self::Condition(k) => write!(f, "status.conditions[{k}]"),
            Self::Capacity(k) => write!(f, "status.capacity[{k}]"),
            Self::Allocatable(k) => write!(f, "status.allocatable[{k}]"),
            Self::NodeInfo(k) => write!(f, "status.nodeInfo.{k}"),
            Self::Status(k) => write!(f, "status.{k}"),
        }
    }
}

impl std::str::FromStr for FieldPath {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let keyed = |prefix: &str| {
            s.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(']'))
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
        };
        let dotted = |prefix: &str| {
            s.strip_prefix(prefix)
                .filter(|k| !k.is_empty() && !k.contains(['.', '[', ']']))
                .map(str::to_owned)
        };
        keyed("metadata.labels[")
            .map(Self::Label)
            .or_else(|| keyed("metadata.annotations[").map(Self::Annotation))
            .or_else(|| keyed("status.conditions[").map(Self::Condition))
            .or_else(|| keyed("status.capacity[").map(Self::Capacity))
            .or_else(|| keyed("status.allocatable[").map(Self::Allocatable))
            .or_else(|| dotted("status.nodeInfo.").map(Self::NodeInfo))
            .or_else(|| dotted("status.").map(Self::Status))
            .or_else(|| dotted("metadata.").map(Self::Meta))
            .or_else(|| dotted("spec.").map(Self::Spec))
            .or_else(|| {
                (!s.is_empty() && !s.contains(['.', '[', ']'])).then(|| Self::Top(s.to_owned()))
            })
            .ok_or_else(|| format!("{s:?} is not a node field path"))
    }
}

impl serde::Serialize for FieldPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for FieldPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The labels the kubelet may set on its own Node under `kubernetes.io` and
/// `k8s.io` (NodeRestriction's well-known list).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

fn key_domain(key: &str) -> Option<&str> {
    key.split_once('/').map(|(d, _)| d)
}

fn in_domain(domain: &str, base: &str) -> bool {
    domain == base || domain.ends_with(&format!(".{base}"))
}

/// Whether NodeRestriction lets a node set this label on itself.
pub fn node_restriction_allows_label(key: &str) -> bool {
    let Some(domain) = key_domain(key) else {
        return true;
    };
    if in_domain(domain, "node-restriction.kubernetes.io") {
        return false;
    }
    if !(in_domain(domain, "kubernetes.io") || in_domain(domain, "k8s.io")) {
        return true;
    }
    KUBELET_LABELS.contains(&key)
        || in_domain(domain, "kubelet.kubernetes.io")
        || in_domain(domain, "node.kubernetes.io")
}

fn node_restriction_allows_annotation(key: &str) -> bool {
    !key_domain(key).is_some_and(|d| in_domain(d, "node-restriction.kubernetes.io"))
}

/// Why a path is refused whatever the allowance says, if it is.
pub fn hard_limit(path: &FieldPath) -> Option<&'static str> {
    match path {
        FieldPath::Top(_) => Some("the object's kind and apiVersion are fixed"),
        FieldPath::Meta(_) => {
            Some("object metadata other than labels and annotations belongs to the API server")
        }
        FieldPath::Spec(_) => {
            Some("spec (taints included) is not status and is never patched by a setter")
        }
        FieldPath::Label(k) | FieldPath::Annotation(k)
            if key_domain(k).is_some_and(|d| in_domain(d, "node-restriction.kubernetes.io")) =>
        {
            Some("node-restriction.kubernetes.io is reserved for the cluster's administrators")
        }
        FieldPath::Annotation(k) if k.starts_with(RESERVED_ANNOTATION_PREFIX) => {
            Some("nodestatus.io/ annotations are the host's own bookkeeping")
        }
        _ => None,
    }
}

/// A pattern over [`FieldPath`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// `*` wildcards over the path's text.
    Glob(String),
    /// `metadata.labels[@node-restriction]`.
    NodeRestrictionLabels,
    /// `metadata.annotations[@node-restriction]`.
    NodeRestrictionAnnotations,
}

impl Pattern {
    /// Parses one pattern. `@default` is expanded by [`Allowance::parse`].
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "metadata.labels[@node-restriction]" => Ok(Self::NodeRestrictionLabels),
            "metadata.annotations[@node-restriction]" => Ok(Self::NodeRestrictionAnnotations),
            _ if s.contains('@') => Err(format!(
                "{s:?}: the only @-names are @default, metadata.labels[@node-restriction] and metadata.annotations[@node-restriction]"
            )),
            _ => {
                // Validate the shape by parsing it with the wildcards filled in.
                s.replace('*', "x").parse::<FieldPath>()?;
                Ok(Self::Glob(s.to_owned()))
            }
        }
    }

    /// Whether `path` matches.
    pub fn matches(&self, path: &FieldPath) -> bool {
        match (self, path) {
            (Self::NodeRestrictionLabels, FieldPath::Label(k)) => node_restriction_allows_label(k),
            (Self::NodeRestrictionAnnotations, FieldPath::Annotation(k)) => {
                node_restriction_allows_annotation(k)
            }
            (Self::Glob(g), p) => glob(g, &p.to_string()),
            _ => false,
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Glob(g) => f.write_str(g),
            Self::NodeRestrictionLabels => f.write_str("metadata.labels[@node-restriction]"),
            Self::NodeRestrictionAnnotations => {
                f.write_str("metadata.annotations[@node-restriction]")
            }
        }
    }
}

/// `*` matches any run of characters, including none.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// The built-in allowance that `@default` stands for.
pub const DEFAULT_ALLOW: &[&str] = &[
    "status.conditions[*]",
    "status.capacity[*]",
    "status.allocatable[*]",
    "status.addresses",
    "status.nodeInfo.*",
    "status.images",
    "status.volumesInUse",
    "status.volumesAttached",
    "status.daemonEndpoints",
    "metadata.labels[@node-restriction]",
    "metadata.annotations[@node-restriction]",
];

/// Which fields one plugin may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
}

impl Default for Allowance {
    fn default() -> Self {
        Self::parse(&["@default".to_owned()], &[]).expect("the default allowance parses")
    }
}

impl Allowance {
    /// Builds an allowance; `@default` in `allow` expands to [`DEFAULT_ALLOW`].
    /// The error names the pattern that does not parse.
    pub fn parse(allow: &[String], deny: &[String]) -> Result<Self, String> {
        let mut a = Vec::new();
        for s in allow {
            if s == "@default" {
                a.extend(
                    DEFAULT_ALLOW
                        .iter()
                        .map(|d| Pattern::parse(d).expect("built-in pattern")),
                );
            } else {
                a.push(Pattern::parse(s)?);
            }
        }
        let d = deny
            .iter()
            .map(|s| Pattern::parse(s))
            .collect::<Result<_, _>>()?;
        Ok(Self { allow: a, deny: d })
    }

    /// `Ok` when the plugin may change `path`, else why not.
    pub fn check(&self, path: &FieldPath) -> Result<(), String> {
        if let Some(why) = hard_limit(path) {
            return Err(format!("{path} may not be changed by any plugin: {why}"));
        }
        if let Some(p) = self.deny.iter().find(|p| p.matches(path)) {
            return Err(format!(
                "{path} is denied to this plugin by the pattern {p}"
            ));
        }
        if self.allow.iter().any(|p| p.matches(path)) {
            return Ok(());
        }
        Err(match path {
            FieldPath::Label(k) if !node_restriction_allows_label(k) => format!(
                "{path} is outside this plugin's allowance: NodeRestriction refuses kubernetes.io and k8s.io labels other than the kubelet's own"
            ),
            _ => format!("{path} is outside this plugin's allowance"),
        })
    }

    /// The patterns, for display.
    pub fn describe(&self) -> (Vec<String>, Vec<String>) {
        (
            self.allow.iter().map(ToString::to_string).collect(),
            self.deny.iter().map(ToString::to_string).collect(),
        )
    }
}

/// Every field that differs between `before` and `after`.
pub fn diff(before: &Value, after: &Value) -> Vec<FieldPath> {
    let mut out = Vec::new();
    let empty = Map::new();
    let (b, a) = (
        before.as_object().unwrap_or(&empty),
        after.as_object().unwrap_or(&empty),
    );
    for key in union_keys(b, a) {
        let (bv, av) = (b.get(key), a.get(key));
        if bv == av {
            continue;
        }
        match key {
            "metadata" => diff_metadata(bv, av, &mut out),
            "spec" => diff_map(bv, av, &mut out, FieldPath::Spec),
            "status" => diff_status(bv, av, &mut out),
            _ => out.push(FieldPath::Top(key.to_owned())),
        }
    }
    out
}

fn union_keys<'a>(b: &'a Map<String, Value>, a: &'a Map<String, Value>) -> Vec<&'a str> {
    let mut keys: Vec<&str> = b.keys().map(String::as_str).collect();
    keys.extend(a.keys().map(String::as_str).filter(|k| !b.contains_key(*k)));
    keys
}

fn as_map(v: Option<&Value>) -> Option<&Map<String, Value>> {
    v.and_then(Value::as_object)
}

/// Compares two objects key by key; a side that is not an object counts as a
/// change of every key on the other side (or of the empty key set).
fn diff_map(
    b: Option<&Value>,
    a: Option<&Value>,
    out: &mut Vec<FieldPath>,
    make: fn(String) -> FieldPath,
) {
    let empty = Map::new();
    let (bm, am) = (as_map(b).unwrap_or(&empty), as_map(a).unwrap_or(&empty));
    if (b.is_some() && as_map(b).is_none() && !b.is_some_and(Value::is_null))
        || (a.is_some() && as_map(a).is_none() && !a.is_some_and(Value::is_null))
    {
        // Not an object: the shape itself changed; name the container.
        out.push(make("*".to_owned()));
        return;
    }
    for key in union_keys(bm, am) {
        if bm.get(key) != am.get(key) {
            out.push(make(key.to_owned()));
        }
    }
}

fn diff_metadata(b: Option<&Value>, a: Option<&Value>, out: &mut Vec<FieldPath>) {
    let empty = Map::new();
    let (bm, am) = (as_map(b).unwrap_or(&empty), as_map(a).unwrap_or(&empty));
    for key in union_keys(bm, am) {
        let (bv, av) = (bm.get(key), am.get(key));
        if bv == av {
            continue;
        }
        match key {
            "labels" => diff_map(bv, av, out, FieldPath::Label),
            "annotations" => diff_map(bv, av, out, FieldPath::Annotation),
            _ => out.push(FieldPath::Meta(key.to_owned())),
        }
    }
}

fn diff_status(b: Option<&Value>, a: Option<&Value>, out: &mut Vec<FieldPath>) {
    let empty = Map::new();
    let (bm, am) = (as_map(b).unwrap_or(&empty), as_map(a).unwrap_or(&empty));
    for key in union_keys(bm, am) {
        let (bv, av) = (bm.get(key), am.get(key));
        if bv == av {
            continue;
        }
        match key {
            "conditions" => diff_conditions(bv, av, out),
            "capacity" => diff_map(bv, av, out, FieldPath::Capacity),
            "allocatable" => diff_map(bv, av, out, FieldPath::Allocatable),
            "nodeInfo" => diff_map(bv, av, out, FieldPath::NodeInfo),
            _ => out.push(FieldPath::Status(key.to_owned())),
        }
    }
}

/// The conditions of a node by type, in list order. Entries without a string
/// `type` are reported under the type `""`.
pub fn conditions_by_type(v: Option<&Value>) -> Vec<(&str, &Value)> {
    v.and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|c| (c.get("type").and_then(Value::as_str).unwrap_or(""), c))
                .collect()
        })
        .unwrap_or_default()
}

/// Compares conditions by their merge key, `type`, in linear time. A type
/// listed more than once counts as changed unless the very same entries are
/// in the input, so a plugin cannot slip a second entry of a type it may not
/// touch past the policy (the API server would keep one of the two).
fn diff_conditions(b: Option<&Value>, a: Option<&Value>, out: &mut Vec<FieldPath>) {
    use std::collections::HashMap;
    fn by_type(v: Option<&Value>) -> (Vec<&str>, HashMap<&str, Vec<&Value>>) {
        let list = conditions_by_type(v);
        let mut order = Vec::with_capacity(list.len());
        let mut map: HashMap<&str, Vec<&Value>> = HashMap::with_capacity(list.len());
        for (t, c) in list {
            let e = map.entry(t).or_default();
            if e.is_empty() {
                order.push(t);
            }
            e.push(c);
        }
        (order, map)
    }
    let ((bo, bm), (ao, am)) = (by_type(b), by_type(a));
    let mut seen = std::collections::HashSet::with_capacity(bo.len() + ao.len());
    for t in bo.into_iter().chain(ao) {
        if seen.insert(t) && bm.get(t) != am.get(t) {
            out.push(FieldPath::Condition(t.to_owned()));
        }
    }
}

/// Checks the envelope of a plugin's output: a JSON object of kind `Node`
/// with a `metadata.name` and, if any, a `status` object. The fields
/// themselves are checked against the API server's rules by
/// [`crate::validate`].
pub fn validate(node: &Value) -> Result<(), String> {
    let obj = node.as_object().ok_or("the output is not a JSON object")?;
    if let Some(kind) = obj.get("kind")
        && kind != "Node"
    {
        return Err(format!("the output's kind is {kind}, not \"Node\""));
    }
    let meta = obj
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or("the output has no metadata object")?;
    if !meta.get("name").is_some_and(Value::is_string) {
        return Err("the output has no metadata.name".into());
    }
    if obj.get("status").is_some_and(|s| !s.is_object()) {
        return Err("status is not an object".into());
    }
    Ok(())
}

/// A Kubernetes qualified name (label and annotation keys); see
/// [`crate::validate::qualified_name`].
pub fn validate_qualified_name(key: &str) -> Result<(), String> {
    crate::validate::qualified_name(key)
}

/// A label value; see [`crate::validate::label_value`].
pub fn validate_label_value(v: &str) -> Result<(), String> {
    crate::validate::label_value(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "uid": "u", "labels": {"a": "1"}, "annotations": {}},
            "spec": {},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "capacity": {"cpu": "2"},
                "nodeInfo": {"kernelVersion": "6"}
            }
        })
    }

    #[test]
    fn paths_round_trip() {
        for p in [
            FieldPath::Label("example.com/x".into()),
            FieldPath::Condition("Ready".into()),
            FieldPath::Capacity("nvidia.com/gpu".into()),
            FieldPath::NodeInfo("bootID".into()),
            FieldPath::Status("addresses".into()),
            FieldPath::Meta("name".into()),
            FieldPath::Spec("taints".into()),
            FieldPath::Top("kind".into()),
        ] {
            assert_eq!(p.to_string().parse::<FieldPath>().unwrap(), p);
        }
        assert!("status.conditions[".parse::<FieldPath>().is_err());
    }

    #[test]
    fn diff_names_each_field() {
        let before = node();
        let mut after = node();
        after["metadata"]["labels"]["b"] = json!("2");
        after["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("a");
        after["status"]["conditions"][0]["status"] = json!("False");
        after["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "X", "status": "True"}));
        after["status"]["capacity"]["memory"] = json!("1Ki");
        after["status"]["addresses"] = json!([]);
        after["spec"]["taints"] = json!([]);
        after["metadata"]["uid"] = json!("v");
        let mut d = diff(&before, &after);
        d.sort();
        let text: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "metadata.uid",
                "metadata.labels[a]",
                "metadata.labels[b]",
                "spec.taints",
                "status.conditions[Ready]",
                "status.conditions[X]",
                "status.capacity[memory]",
                "status.addresses",
            ]
        );
        assert!(diff(&before, &before).is_empty());
    }

    #[test]
    fn default_allowance_follows_node_restriction() {
        let a = Allowance::default();
        assert!(a.check(&FieldPath::Label("example.com/gpu".into())).is_ok());
        assert!(a.check(&FieldPath::Label("plain".into())).is_ok());
        assert!(
            a.check(&FieldPath::Label("kubernetes.io/hostname".into()))
                .is_ok()
        );
        assert!(
            a.check(&FieldPath::Label("node.kubernetes.io/foo".into()))
                .is_ok()
        );
        assert!(
            a.check(&FieldPath::Label("kubelet.kubernetes.io/foo".into()))
                .is_ok()
        );
        let e = a
            .check(&FieldPath::Label("node-role.kubernetes.io/master".into()))
            .unwrap_err();
        assert!(e.contains("NodeRestriction"), "{e}");
        assert!(a.check(&FieldPath::Label("foo.k8s.io/x".into())).is_err());
        assert!(
            a.check(&FieldPath::Label("node-restriction.kubernetes.io/x".into()))
                .is_err()
        );
        assert!(
            a.check(&FieldPath::Annotation("example.com/a".into()))
                .is_ok()
        );
        assert!(
            a.check(&FieldPath::Annotation("nodestatus.io/owned-fields".into()))
                .is_err()
        );
        assert!(a.check(&FieldPath::Condition("Ready".into())).is_ok());
        assert!(a.check(&FieldPath::NodeInfo("bootID".into())).is_ok());
        assert!(a.check(&FieldPath::Meta("name".into())).is_err());
        assert!(a.check(&FieldPath::Spec("taints".into())).is_err());
        assert!(a.check(&FieldPath::Status("phase".into())).is_err());
    }

    #[test]
    fn allowance_narrows_and_widens() {
        let narrow = Allowance::parse(&["status.conditions[GPU*]".into()], &[]).unwrap();
        assert!(
            narrow
                .check(&FieldPath::Condition("GPUHealthy".into()))
                .is_ok()
        );
        assert!(narrow.check(&FieldPath::Condition("Ready".into())).is_err());
        let wide = Allowance::parse(
            &[
                "@default".into(),
                "metadata.labels[node-role.kubernetes.io/*]".into(),
            ],
            &["status.conditions[Ready]".into()],
        )
        .unwrap();
        assert!(
            wide.check(&FieldPath::Label("node-role.kubernetes.io/gpu".into()))
                .is_ok()
        );
        let e = wide
            .check(&FieldPath::Condition("Ready".into()))
            .unwrap_err();
        assert!(e.contains("denied"), "{e}");
        // Hard limits cannot be widened.
        let all = Allowance::parse(&["*".into()], &[]).unwrap();
        assert!(all.check(&FieldPath::Spec("taints".into())).is_err());
        assert!(
            all.check(&FieldPath::Label("node-restriction.kubernetes.io/a".into()))
                .is_err()
        );
        assert!(Allowance::parse(&["@nope".into()], &[]).is_err());
        assert!(Allowance::parse(&["status.conditions[".into()], &[]).is_err());
    }

    #[test]
    fn glob_matches() {
        assert!(glob("a*c", "abbbc"));
        assert!(glob("*", ""));
        assert!(glob("status.*", "status.conditions[Ready]"));
        assert!(!glob("a*c", "abd"));
    }

    #[test]
    fn the_envelope_must_be_a_named_node() {
        assert!(validate(&json!([1])).is_err());
        assert!(validate(&json!({"kind": "Pod", "metadata": {"name": "x"}})).is_err());
        assert!(validate(&json!({"metadata": {}})).is_err());
        assert!(validate(&json!({"metadata": {"name": "x"}, "status": []})).is_err());
        assert!(validate(&node()).is_ok());
    }

    #[test]
    fn a_second_entry_of_a_type_is_a_change_of_that_type() {
        let before = node();
        let mut after = node();
        after["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "Ready", "status": "False"}));
        assert_eq!(
            diff(&before, &after),
            vec![FieldPath::Condition("Ready".into())]
        );
        let denied =
            Allowance::parse(&["@default".into()], &["status.conditions[Ready]".into()]).unwrap();
        assert!(denied.check(&FieldPath::Condition("Ready".into())).is_err());
        // The same duplicates in input and output are no change.
        assert!(diff(&after, &after.clone()).is_empty());
    }

    #[test]
    fn twenty_thousand_conditions_diff_in_linear_time() {
        let before = node();
        let mut after = node();
        let list = after["status"]["conditions"].as_array_mut().unwrap();
        list.extend((0..20_000).map(|i| json!({"type": format!("T{i}"), "status": "True"})));
        let started = std::time::Instant::now();
        let d = diff(&before, &after);
        assert_eq!(d.len(), 20_000);
        // Generous: the quadratic version took about 20 s.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
