//! The kubelet's `ReadyCondition` setter. It runs last, so Ready is the last
//! condition. Ready is False, with reason `KubeletNotReady`, when the host
//! reports problems (a plugin whose failure affects readiness keeps failing,
//! or the node is shutting down) or when the node lacks capacity for cpu,
//! memory or pods; otherwise True with `KubeletReady`. The events `NodeReady`
//! and `NodeNotReady` are recorded only on a flip.
use nodestatus_sdk::{ConditionStatus, EventType, Metadata, Node, Result, Setter, host};

pub struct Ready;

/// The message of Ready=False: the problems, joined as the kubelet joins its
/// errors.
pub fn not_ready_message(node: &Node, mut problems: Vec<String>) -> Option<String> {
    let missing: Vec<&str> = ["cpu", "memory", "pods"]
        .into_iter()
        .filter(|r| node.capacity(r).is_none())
        .collect();
    if !missing.is_empty() && node.status("capacity").is_some() {
        problems.push(format!(
            "missing node capacity for resources: {}",
            missing.join(", ")
        ));
    }
    (!problems.is_empty()).then(|| problems.join(", "))
}

impl Setter for Ready {
    fn metadata() -> Metadata {
        Metadata::new("ready", env!("CARGO_PKG_VERSION"))
            .description("the kubelet's Ready condition")
    }

    fn set(node: &mut Node) -> Result<()> {
        let (status, reason, message) = match not_ready_message(node, host::node_problems()) {
            None => (
                ConditionStatus::True,
                "KubeletReady",
                "kubelet is posting ready status".to_owned(),
            ),
            Some(m) => (ConditionStatus::False, "KubeletNotReady", m),
        };
        // Ready must be the last condition: move it to the end if it is not.
        let is_last = node
            .status("conditions")
            .and_then(|c| c.as_array())
            .and_then(|l| l.last())
            .is_some_and(|c| c.get("type").and_then(|t| t.as_str()) == Some("Ready"));
        if !is_last {
            if let Some(old) = node.condition("Ready") {
                node.remove_condition("Ready");
                let list = node.status_mut("conditions", || serde_json::Value::Array(Vec::new()));
                if let Some(l) = list.as_array_mut() {
                    l.push(serde_json::to_value(old).map_err(|e| e.to_string())?);
                }
            }
        }
        let t = node.set_condition("Ready", status, reason, &message);
        if t.flipped && t.previous.is_some() {
            let name = node.name().to_owned();
            let (kind, ev) = match status {
                ConditionStatus::True => (EventType::Normal, "NodeReady"),
                _ => (EventType::Normal, "NodeNotReady"),
            };
            host::record_event(kind, ev, &format!("Node {name} status is now: {ev}"));
        }
        Ok(())
    }
}

nodestatus_sdk::export!(Ready);
