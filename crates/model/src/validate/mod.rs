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

use serde_json::Value;

pub use nodestatus_apimachinery::MAX_NODE_BYTES;
pub use nodestatus_apimachinery::names::{label_value, qualified_name};
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

mod checker;
mod measure;
use checker::Checker;
pub use measure::{is_integer_resource, json_size};
#[cfg(test)]
mod tests;
