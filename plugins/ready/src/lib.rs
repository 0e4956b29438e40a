//! The kubelet's `ReadyCondition` setter. It runs last, so a new Ready is the
//! last condition; its part is that one condition. Ready is False, with reason `KubeletNotReady`, when the host
//! reports problems (a plugin whose failure affects readiness keeps failing,
//! or the node is shutting down) or when the node lacks capacity for cpu,
//! memory or pods, or when the container runtime (read over CRI, where the
//! operator granted `containerRuntime`) is down or its network is not ready;
//! otherwise True with `KubeletReady`. The events `NodeReady` and
//! `NodeNotReady` are recorded only on a flip.
use nodestatus_sdk::{ConditionStatus, EventType, Metadata, Node, Result, Setter, host};

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct Ready;

/// The container runtime's problems, in the kubelet's words: the runtime
/// errors, then the network's. No runtime configured, or not granted: none.
pub fn runtime_problems(
    answer: std::result::Result<host::ContainerRuntimeInfo, host::RuntimeError>,
) -> Vec<String> {
    let info = match answer {
        Ok(info) => info,
        Err(host::RuntimeError::Unavailable(m)) => {
            return vec![format!("container runtime is down: {m}")];
        }
        Err(_) => return Vec::new(),
    };
    let condition = |t: &str| info.conditions.iter().find(|c| c.type_ == t);
    let text = |t: &str| match condition(t) {
        Some(c) => format!(
            "{}={} reason:{} message:{}",
            c.type_, c.status, c.reason, c.message
        ),
        None => format!("{t} is not reported"),
    };
    let mut problems = Vec::new();
    if !condition("RuntimeReady").is_some_and(|c| c.status) {
        problems.push(format!(
            "container runtime is down: {}",
            text("RuntimeReady")
        ));
    }
    if !condition("NetworkReady").is_some_and(|c| c.status) {
        problems.push(format!(
            "container runtime network not ready: {}",
            text("NetworkReady")
        ));
    }
    problems
}

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
        let mut problems = runtime_problems(host::container_runtime());
        problems.extend(host::node_problems());
        let (status, reason, message) = match not_ready_message(node, problems) {
            None => (
                ConditionStatus::True,
                "KubeletReady",
                "kubelet is posting ready status".to_owned(),
            ),
            Some(m) => (ConditionStatus::False, "KubeletNotReady", m),
        };
        // Its part is the one condition: where Ready sits in the list is the
        // host's merge (a new condition is appended; ready runs last).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(conditions: &[(&str, bool, &str, &str)]) -> host::ContainerRuntimeInfo {
        host::ContainerRuntimeInfo {
            name: "containerd".into(),
            version: "1.6.20~ds1".into(),
            api_version: "v1".into(),
            conditions: conditions
                .iter()
                .map(|(t, s, r, m)| host::RuntimeCondition {
                    type_: (*t).into(),
                    status: *s,
                    reason: (*r).into(),
                    message: (*m).into(),
                })
                .collect(),
            images: Vec::new(),
            handlers: Vec::new(),
        }
    }

    #[test]
    fn runtime_conditions_in_the_kubelets_words() {
        let ok = runtime(&[
            ("RuntimeReady", true, "", ""),
            ("NetworkReady", true, "", ""),
        ]);
        assert!(runtime_problems(Ok(ok)).is_empty());
        let no_cni = runtime(&[
            ("RuntimeReady", true, "", ""),
            (
                "NetworkReady",
                false,
                "NetworkPluginNotReady",
                "Network plugin returns error: cni plugin not initialized",
            ),
        ]);
        assert_eq!(
            runtime_problems(Ok(no_cni)),
            vec![
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
            ]
        );
        assert_eq!(
            runtime_problems(Ok(runtime(&[]))),
            vec![
                "container runtime is down: RuntimeReady is not reported",
                "container runtime network not ready: NetworkReady is not reported"
            ]
        );
        assert_eq!(
            runtime_problems(Err(host::RuntimeError::Unavailable(
                "the runtime's Version failed: connection refused".into()
            ))),
            vec!["container runtime is down: the runtime's Version failed: connection refused"]
        );
        assert!(runtime_problems(Err(host::RuntimeError::NotGranted("x".into()))).is_empty());
        assert!(runtime_problems(Err(host::RuntimeError::NotConfigured("x".into()))).is_empty());
    }

    #[test]
    fn its_part_is_the_ready_condition() {
        let input = r#"{"metadata":{"name":"n1"},"status":{
            "capacity":{"cpu":"2","memory":"1Gi","pods":"110"},
            "conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady"},
                          {"type":"MemoryPressure","status":"False"}]}}"#;
        host::set_native_problems(Vec::new());
        let part = nodestatus_sdk::run::<Ready>(input)
            .unwrap()
            .expect("a part");
        let mut node = Node::parse(&part).unwrap();
        let ready = node.condition("Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("True", Some("KubeletReady"))
        );
        // Nothing else: no other condition, no other field.
        node.remove_condition("Ready");
        assert_eq!(node.to_json(), r#"{"status":{"conditions":[]}}"#);
    }
}

nodestatus_sdk::export!(Ready);
