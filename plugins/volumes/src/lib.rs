//! The kubelet's `VolumesInUse` setter: `status.volumesInUse` (sorted, without
//! duplicates) from the config's `volumesInUse`, and the older kubelets'
//! `VolumeLimits`: each `attachableVolumesLimits` entry
//! (`attachable-volumes-aws-ebs: "39"`) in capacity and allocatable. What is
//! not configured is left untouched.
use std::collections::BTreeMap;

use nodestatus_sdk::{Metadata, Node, Quantity, Result, Setter, host};
use serde_json::Value;

/// The prefix of an attachable-volume limit resource.
pub const LIMIT_PREFIX: &str = "attachable-volumes-";

/// The plugin's config.
#[derive(serde::Deserialize, Default, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// Unique volume names in use (`kubernetes.io/csi/<driver>^<handle>`).
    pub volumes_in_use: Option<Vec<String>>,
    /// Attachable-volume limits, by resource name.
    pub attachable_volumes_limits: Option<BTreeMap<String, String>>,
}

/// The limits, checked: each a non-negative quantity under
/// `attachable-volumes-`.
pub fn limits(config: &Config) -> Result<Vec<(String, Quantity)>> {
    let mut out = Vec::new();
    for (k, v) in config.attachable_volumes_limits.iter().flatten() {
        if !k.starts_with(LIMIT_PREFIX) || k.len() == LIMIT_PREFIX.len() {
            return Err(format!(
                "attachableVolumesLimits: {k:?} must be a resource named {LIMIT_PREFIX}<plugin>"
            )
            .into());
        }
        let q = Quantity::parse(v).map_err(|e| format!("attachableVolumesLimits.{k}: {e}"))?;
        if q.as_millis() < 0 {
            return Err(format!("attachableVolumesLimits.{k}: {v:?} is negative").into());
        }
        out.push((k.clone(), q));
    }
    Ok(out)
}

/// Applies the config to the node.
pub fn apply(node: &mut Node, config: &Config) -> Result<()> {
    let limits = limits(config)?;
    if let Some(list) = &config.volumes_in_use {
        let mut list: Vec<&str> = list.iter().map(String::as_str).collect();
        list.sort_unstable();
        list.dedup();
        if list.is_empty() {
            if node.status("volumesInUse").is_some() {
                node.remove_status("volumesInUse");
            }
        } else {
            node.set_status(
                "volumesInUse",
                Value::Array(list.into_iter().map(|s| Value::String(s.into())).collect()),
            );
        }
    }
    for (k, q) in limits {
        node.set_capacity(&k, q);
        node.set_allocatable(&k, q);
    }
    Ok(())
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct Volumes;

impl Setter for Volumes {
    fn metadata() -> Metadata {
        Metadata::new("volumes", env!("CARGO_PKG_VERSION"))
            .description("the kubelet's VolumesInUse setter, and attachable-volume limits")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        apply(node, &config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(v: Value) -> Config {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn nothing_configured_sets_nothing() {
        let json = r#"{"metadata":{"name":"n"},"status":{"volumesInUse":["x"]}}"#;
        let mut node = Node::parse(json).unwrap();
        apply(&mut node, &config(json!({}))).unwrap();
        assert_eq!(node.part(), json!({}));
    }

    #[test]
    fn sets_volumes_and_limits() {
        let mut node = Node::named("n");
        let c = config(json!({
            "volumesInUse": ["kubernetes.io/csi/b^2", "kubernetes.io/csi/a^1", "kubernetes.io/csi/b^2"],
            "attachableVolumesLimits": {"attachable-volumes-aws-ebs": "39"}
        }));
        apply(&mut node, &c).unwrap();
        assert_eq!(
            node.part(),
            json!({"status": {
                "capacity": {"attachable-volumes-aws-ebs": "39"},
                "allocatable": {"attachable-volumes-aws-ebs": "39"},
                "volumesInUse": ["kubernetes.io/csi/a^1", "kubernetes.io/csi/b^2"]
            }})
        );
        assert_eq!(
            node.status("volumesInUse").unwrap(),
            &json!(["kubernetes.io/csi/a^1", "kubernetes.io/csi/b^2"])
        );
        assert_eq!(
            node.capacity("attachable-volumes-aws-ebs")
                .unwrap()
                .to_string(),
            "39"
        );
        assert_eq!(
            node.allocatable("attachable-volumes-aws-ebs")
                .unwrap()
                .to_string(),
            "39"
        );
        let mut node = Node::parse(&node.to_json()).unwrap();
        apply(&mut node, &config(json!({"volumesInUse": []}))).unwrap();
        assert!(node.status("volumesInUse").is_none());
        assert_eq!(node.part(), json!({"status": {"volumesInUse": null}}));
    }

    #[test]
    fn limits_are_checked() {
        for bad in [
            json!({"attachableVolumesLimits": {"cpu": "4"}}),
            json!({"attachableVolumesLimits": {"attachable-volumes-": "4"}}),
            json!({"attachableVolumesLimits": {"attachable-volumes-x": "many"}}),
            json!({"attachableVolumesLimits": {"attachable-volumes-x": "-1"}}),
        ] {
            assert!(
                apply(&mut Node::named("n"), &config(bad.clone())).is_err(),
                "{bad}"
            );
        }
    }
}

nodestatus_sdk::export!(Volumes);
