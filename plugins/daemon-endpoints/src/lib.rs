//! The kubelet's `DaemonEndpoints` setter:
//! `status.daemonEndpoints.kubeletEndpoint.Port` = the configured `port`
//! (the kubelet's default, 10250). Other endpoints are kept.
use nodestatus_sdk::{Metadata, Node, Result, Setter, host};
use serde_json::{Value, json};

/// The plugin's config.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// The port the kubelet (or what serves its API) listens on.
    pub port: i64,
}

impl Default for Config {
    fn default() -> Self {
        Self { port: 10250 }
    }
}

/// `status.daemonEndpoints` with the kubelet's port set in `current`.
pub fn endpoints(current: Option<&Value>, port: i64) -> Result<Value> {
    if !(1..=65535).contains(&port) {
        return Err(format!("port {port} must be between 1 and 65535").into());
    }
    let mut v = current
        .filter(|v| v.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    v["kubeletEndpoint"] = json!({"Port": port});
    Ok(v)
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct DaemonEndpoints;

impl Setter for DaemonEndpoints {
    fn metadata() -> Metadata {
        Metadata::new("daemon-endpoints", env!("CARGO_PKG_VERSION"))
            .description("the kubelet's DaemonEndpoints setter: the kubelet endpoint's port")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let v = endpoints(node.status("daemonEndpoints"), config.port)?;
        node.set_status("daemonEndpoints", v);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_the_port_and_keeps_the_rest() {
        assert_eq!(
            endpoints(None, 10250).unwrap(),
            json!({"kubeletEndpoint": {"Port": 10250}})
        );
        let cur = json!({"kubeletEndpoint": {"Port": 1}, "other": {"Port": 2}});
        assert_eq!(
            endpoints(Some(&cur), 10255).unwrap(),
            json!({"kubeletEndpoint": {"Port": 10255}, "other": {"Port": 2}})
        );
        assert!(endpoints(None, 0).is_err());
        assert!(endpoints(None, 70000).is_err());
    }

    #[test]
    fn an_unchanged_port_is_still_its_part() {
        let json = r#"{"metadata":{"name":"n"},"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":10250}}}}"#;
        let mut node = Node::parse(json).unwrap();
        let v = endpoints(node.status("daemonEndpoints"), Config::default().port).unwrap();
        node.set_status("daemonEndpoints", v);
        assert_eq!(node.to_json(), json, "the node holds the same value");
        assert_eq!(
            node.part(),
            json!({"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}})
        );
    }
}

nodestatus_sdk::export!(DaemonEndpoints);
