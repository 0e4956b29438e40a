//! The field policy: which parts of the Node a plugin may change.
//!
//! The host diffs each plugin's output against its input ([`crate::node::Diff`])
//! and names every changed field with a [`FieldPath`], at the granularity
//! that ownership and patches need: one label, one condition type, one
//! capacity resource, one `nodeInfo` field, or a whole list such as
//! `status.addresses`.
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

use serde_json::Value;

use crate::node::FieldPath;

/// The annotation domain the host reserves for itself.
pub const RESERVED_ANNOTATION_PREFIX: &str = "nodestatus.io/";

/// Why a change, a pattern or a plugin's output is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A field that no plugin may change, whatever its allowance
    /// ([`hard_limit`]).
    #[error("{path} may not be changed by any plugin: {why}")]
    HardLimit {
        /// The field.
        path: FieldPath,
        /// Why it is fixed.
        why: &'static str,
    },
    /// A field that one of the plugin's deny patterns matches.
    #[error("{path} is denied to this plugin by the pattern {pattern}")]
    Denied {
        /// The field.
        path: FieldPath,
        /// The first deny pattern that matches it.
        pattern: Pattern,
    },
    /// A `kubernetes.io` or `k8s.io` label that NodeRestriction refuses from
    /// a node, outside the plugin's allowance.
    #[error(
        "{path} is outside this plugin's allowance: NodeRestriction refuses kubernetes.io and k8s.io labels other than the kubelet's own"
    )]
    NodeRestrictionLabel {
        /// The field.
        path: FieldPath,
    },
    /// A field that no allow pattern matches.
    #[error("{path} is outside this plugin's allowance")]
    OutsideAllowance {
        /// The field.
        path: FieldPath,
    },
    /// A plugin's output changed fields it may not change; the whole output
    /// is discarded.
    #[error("output discarded: {}", join(refused))]
    Discarded {
        /// Each refused field's reason, sorted by its message, without
        /// repeats.
        refused: Vec<Error>,
    },
    /// A pattern with an `@`-name other than the known ones.
    #[error(
        "{pattern:?}: the only @-names are @default, metadata.labels[@node-restriction] and metadata.annotations[@node-restriction]"
    )]
    UnknownName {
        /// The pattern.
        pattern: String,
    },
    /// A pattern that is not a field path once its wildcards are filled in.
    #[error("{pattern:?} is not a node field path")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// Why its shape is not a path.
        #[source]
        source: crate::node::Error,
    },
    /// The output is not a JSON object.
    #[error("the output is not a JSON object")]
    NotAnObject,
    /// The output's `kind` is not `Node`.
    #[error("the output's kind is {kind}, not \"Node\"")]
    NotANode {
        /// The kind it has, as JSON.
        kind: Value,
    },
    /// The output has no `metadata` object.
    #[error("the output has no metadata object")]
    NoMetadata,
    /// The output's `metadata.name` is missing or not a string.
    #[error("the output has no metadata.name")]
    NoName,
    /// The output's `status` is not an object.
    #[error("status is not an object")]
    StatusNotAnObject,
    /// A label or annotation key that is not a Kubernetes qualified name.
    #[error("{reason}")]
    BadKey {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A label value the API server refuses.
    #[error("{reason}")]
    BadLabelValue {
        /// The value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn join(errors: &[Error]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The error's message: the config file's errors carry policy errors as text.
impl From<Error> for String {
    fn from(e: Error) -> Self {
        e.to_string()
    }
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "metadata.labels[@node-restriction]" => Ok(Self::NodeRestrictionLabels),
            "metadata.annotations[@node-restriction]" => Ok(Self::NodeRestrictionAnnotations),
            _ if s.contains('@') => Err(Error::UnknownName {
                pattern: s.to_owned(),
            }),
            _ => {
                // Validate the shape by parsing it with the wildcards filled in.
                s.replace('*', "x")
                    .parse::<FieldPath>()
                    .map_err(|source| Error::BadPattern {
                        pattern: s.to_owned(),
                        source,
                    })?;
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
    "status.runtimeHandlers",
    "status.features",
    "status.declaredFeatures",
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
    pub fn parse(allow: &[String], deny: &[String]) -> Result<Self> {
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
    pub fn check(&self, path: &FieldPath) -> Result<()> {
        if let Some(why) = hard_limit(path) {
            return Err(Error::HardLimit {
                path: path.clone(),
                why,
            });
        }
        if let Some(p) = self.deny.iter().find(|p| p.matches(path)) {
            return Err(Error::Denied {
                path: path.clone(),
                pattern: p.clone(),
            });
        }
        if self.allow.iter().any(|p| p.matches(path)) {
            return Ok(());
        }
        let path = path.clone();
        Err(match &path {
            FieldPath::Label(k) if !node_restriction_allows_label(k) => {
                Error::NodeRestrictionLabel { path }
            }
            _ => Error::OutsideAllowance { path },
        })
    }

    /// `Ok` when the plugin may change every one of `changed`, else
    /// [`Error::Discarded`] with every reason.
    pub fn check_all(&self, changed: &[FieldPath]) -> Result<()> {
        let mut refused: Vec<Error> = changed.iter().filter_map(|p| self.check(p).err()).collect();
        if refused.is_empty() {
            return Ok(());
        }
        refused.sort_by_cached_key(ToString::to_string);
        refused.dedup_by(|a, b| a.to_string() == b.to_string());
        Err(Error::Discarded { refused })
    }

    /// The patterns, for display.
    pub fn describe(&self) -> (Vec<String>, Vec<String>) {
        (
            self.allow.iter().map(ToString::to_string).collect(),
            self.deny.iter().map(ToString::to_string).collect(),
        )
    }
}

/// Checks the envelope of a plugin's output: a JSON object of kind `Node`
/// with a `metadata.name` and, if any, a `status` object. The fields
/// themselves are checked against the API server's rules by
/// [`crate::validate`].
pub fn validate(node: &Value) -> Result<()> {
    let obj = node.as_object().ok_or(Error::NotAnObject)?;
    if let Some(kind) = obj.get("kind")
        && kind != "Node"
    {
        return Err(Error::NotANode { kind: kind.clone() });
    }
    let meta = obj
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or(Error::NoMetadata)?;
    if !meta.get("name").is_some_and(Value::is_string) {
        return Err(Error::NoName);
    }
    if obj.get("status").is_some_and(|s| !s.is_object()) {
        return Err(Error::StatusNotAnObject);
    }
    Ok(())
}

/// A Kubernetes qualified name (label and annotation keys); see
/// [`crate::validate::qualified_name`].
pub fn validate_qualified_name(key: &str) -> Result<()> {
    crate::validate::qualified_name(key).map_err(|reason| Error::BadKey {
        key: key.to_owned(),
        reason,
    })
}

/// A label value; see [`crate::validate::label_value`].
pub fn validate_label_value(v: &str) -> Result<()> {
    crate::validate::label_value(v).map_err(|reason| Error::BadLabelValue {
        value: v.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert!(matches!(e, Error::NodeRestrictionLabel { .. }), "{e}");
        assert!(e.to_string().contains("NodeRestriction"), "{e}");
        assert!(a.check(&FieldPath::Label("foo.k8s.io/x".into())).is_err());
        assert!(
            a.check(&FieldPath::Label("node-restriction.kubernetes.io/x".into()))
                .is_err()
        );
        assert!(
            a.check(&FieldPath::Annotation("example.com/a".into()))
                .is_ok()
        );
        assert!(matches!(
            a.check(&FieldPath::Annotation("nodestatus.io/owned-fields".into())),
            Err(Error::HardLimit { .. })
        ));
        assert!(a.check(&FieldPath::Condition("Ready".into())).is_ok());
        assert!(a.check(&FieldPath::NodeInfo("bootID".into())).is_ok());
        assert!(a.check(&FieldPath::Meta("name".into())).is_err());
        assert!(a.check(&FieldPath::Spec("taints".into())).is_err());
        assert_eq!(
            a.check(&FieldPath::Status("phase".into())),
            Err(Error::OutsideAllowance {
                path: FieldPath::Status("phase".into())
            })
        );
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
        assert!(
            matches!(&e, Error::Denied { pattern, .. } if pattern.to_string() == "status.conditions[Ready]"),
            "{e}"
        );
        // Hard limits cannot be widened.
        let all = Allowance::parse(&["*".into()], &[]).unwrap();
        assert!(all.check(&FieldPath::Spec("taints".into())).is_err());
        assert!(
            all.check(&FieldPath::Label("node-restriction.kubernetes.io/a".into()))
                .is_err()
        );
        assert!(matches!(
            Allowance::parse(&["@nope".into()], &[]),
            Err(Error::UnknownName { .. })
        ));
        let e = Allowance::parse(&["status.conditions[".into()], &[]).unwrap_err();
        assert!(matches!(e, Error::BadPattern { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            r#""status.conditions[" is not a node field path"#
        );
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
        assert_eq!(validate(&json!([1])), Err(Error::NotAnObject));
        assert_eq!(
            validate(&json!({"kind": "Pod", "metadata": {"name": "x"}}))
                .unwrap_err()
                .to_string(),
            r#"the output's kind is "Pod", not "Node""#
        );
        assert_eq!(validate(&json!({"metadata": {}})), Err(Error::NoName));
        assert_eq!(validate(&json!({"kind": "Node"})), Err(Error::NoMetadata));
        assert_eq!(
            validate(&json!({"metadata": {"name": "x"}, "status": []})),
            Err(Error::StatusNotAnObject)
        );
        assert!(
            validate(&json!({"kind": "Node", "metadata": {"name": "x"}, "status": {}})).is_ok()
        );
    }

    #[test]
    fn a_second_entry_of_a_type_is_checked_as_that_type() {
        let before = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let mut after = before.clone();
        after["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "Ready", "status": "False"}));
        let changed = crate::node::Diff::new(&before, &after).paths();
        let denied =
            Allowance::parse(&["@default".into()], &["status.conditions[Ready]".into()]).unwrap();
        let e = denied.check_all(&changed).unwrap_err();
        assert_eq!(
            e.to_string(),
            "output discarded: status.conditions[Ready] is denied to this plugin by the pattern status.conditions[Ready]"
        );
    }

    #[test]
    fn every_refusal_is_listed_once_in_order() {
        let narrow = Allowance::parse(&["status.capacity[*]".into()], &[]).unwrap();
        let e = narrow
            .check_all(&[
                FieldPath::Spec("taints".into()),
                FieldPath::Capacity("cpu".into()),
                FieldPath::Condition("Ready".into()),
                FieldPath::Condition("Ready".into()),
            ])
            .unwrap_err();
        let Error::Discarded { refused } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(refused.len(), 2, "{e}");
        assert_eq!(
            e.to_string(),
            "output discarded: spec.taints may not be changed by any plugin: spec (taints included) is not status and is never patched by a setter; status.conditions[Ready] is outside this plugin's allowance"
        );
        assert_eq!(
            narrow.check_all(&[FieldPath::Capacity("cpu".into())]),
            Ok(())
        );
    }
}
