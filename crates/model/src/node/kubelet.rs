//! What the kubelet writes on its own, outside its setters: the node it
//! starts from, and the rules it forces after its setters on every pass
//! (the pipeline's built-in steps, which go through the same diff, policy
//! and validation as a setter's output).

use serde_json::{Map, Value, json};

/// A fresh node as the kubelet's `initialNode` would start it, before any
/// setter ran: the name, the default labels and the attach-detach annotation.
pub fn initial_node(name: &str, hostname: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": hostname,
                "kubernetes.io/os": std::env::consts::OS,
                "kubernetes.io/arch": go_arch(),
                "beta.kubernetes.io/os": std::env::consts::OS,
                "beta.kubernetes.io/arch": go_arch(),
            },
            "annotations": {
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {},
        "status": {},
    })
}

/// This build's architecture in Go's spelling (`GOARCH`), as Kubernetes uses.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
}

/// The kubelet's labels of the operating system and architecture it runs
/// on (`GOOS` and `GOARCH`), which it forces after its setters when they
/// are missing or wrong: the node with them set (and a labels map made if
/// it had none), or `None` when they are right already, or when its
/// metadata or labels are not objects.
pub fn os_arch_labels(node: &Value) -> Option<Value> {
    let want = [
        ("kubernetes.io/os", std::env::consts::OS),
        ("kubernetes.io/arch", go_arch()),
    ];
    let meta = node.get("metadata")?.as_object()?;
    match meta.get("labels") {
        None => {}
        Some(Value::Object(l))
            if want
                .iter()
                .all(|(k, v)| l.get(*k).and_then(Value::as_str) == Some(v)) =>
        {
            return None;
        }
        Some(Value::Object(_)) => {}
        Some(_) => return None,
    }
    let mut out = node.clone();
    let labels = out["metadata"]
        .as_object_mut()
        .expect("checked above")
        .entry("labels")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("checked above");
    for (k, v) in want {
        labels.insert(k.to_owned(), json!(v));
    }
    Some(out)
}

/// The kubelet sets allocatable for every capacity key: a key a setter put
/// in capacity without an allocatable (an extended resource of a vendor
/// reporter, `nvidia.com/gpu`) gets allocatable = capacity (no reservation
/// applies to it), and an extended resource (a name with a `/`) that left
/// capacity leaves allocatable. The node with that allocatable, or `None`
/// when it has it already (or has no capacity, or a status or allocatable
/// that is not an object).
pub fn allocatable_for_every_capacity_key(node: &Value) -> Option<Value> {
    let status = node.get("status")?.as_object()?;
    let capacity = status.get("capacity")?.as_object()?;
    let old = status.get("allocatable");
    let mut alloc = match old {
        None => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => return None,
    };
    for (k, v) in capacity {
        if !alloc.contains_key(k) {
            alloc.insert(k.clone(), v.clone());
        }
    }
    alloc.retain(|k, _| !k.contains('/') || capacity.contains_key(k));
    let new = (!alloc.is_empty()).then_some(Value::Object(alloc));
    if new.as_ref() == old {
        return None;
    }
    let mut out = node.clone();
    let status = out["status"].as_object_mut().expect("checked above");
    match new {
        Some(a) => status.insert("allocatable".into(), a),
        None => status.remove("allocatable"),
    };
    Some(out)
}

/// Ready stays the last condition, as the kubelet keeps it: the node with
/// its Ready entries moved to the end of `status.conditions`, or `None`
/// when they are there already (or it has none). A setter that adds a
/// condition once Ready exists appends it after Ready; this puts Ready back.
pub fn ready_last(node: &Value) -> Option<Value> {
    let list = node.pointer("/status/conditions")?.as_array()?;
    let is_ready = |c: &Value| c.get("type").and_then(Value::as_str) == Some("Ready");
    let first_ready = list.iter().position(is_ready)?;
    if list[first_ready..].iter().all(is_ready) {
        return None;
    }
    let (ready, others): (Vec<&Value>, Vec<&Value>) = list.iter().partition(|c| is_ready(c));
    let mut out = node.clone();
    out["status"]["conditions"] = Value::Array(others.into_iter().chain(ready).cloned().collect());
    Some(out)
}

/// `node` with `base`'s condition of type `t` in place of its own (at the
/// place where `node` has it, or at the end), or without one when `base`
/// has none; `None` when `node` already has `base`'s. The first pass of a
/// run keeps Ready so: its readiness checks have not run before it.
pub fn keep_condition(base: &Value, node: &Value, t: &str) -> Option<Value> {
    let find = |n: &Value| {
        n.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|l| l.iter().find(|c| c["type"] == t))
            .cloned()
    };
    let old = find(base);
    if old == find(node) {
        return None;
    }
    let mut n = node.clone();
    let Some(list) = n
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        n["status"]["conditions"] = Value::Array(old.into_iter().collect());
        return Some(n);
    };
    match (list.iter().position(|c| c["type"] == t), old) {
        (Some(i), Some(old)) => list[i] = old,
        (Some(i), None) => {
            list.remove(i);
        }
        (None, Some(old)) => list.push(old),
        (None, None) => {}
    }
    Some(n)
}

/// `cloudProvider: external`: once `base` has addresses (the
/// cloud-controller-manager's), `node` keeps them as they are; `None` when
/// it already does, or `base` has none.
pub fn keep_addresses(base: &Value, node: &Value) -> Option<Value> {
    let had = base
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !had || base.pointer("/status/addresses") == node.pointer("/status/addresses") {
        return None;
    }
    let mut n = node.clone();
    n["status"]["addresses"] = base["status"]["addresses"].clone();
    Some(n)
}

/// A Kubernetes API server's version, as its `/version` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerVersion {
    /// The major version (1).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl ServerVersion {
    /// The newest release nodestatus writes the node for: a pass with no
    /// server (`nodestatus once`) writes what a kubelet of this version
    /// writes.
    pub const NEWEST: Self = Self {
        major: 1,
        minor: 37,
    };

    /// From `/version`'s `major` and `minor`, which some distributions
    /// suffix (`"37+"`); `None` when they are not numbers.
    pub fn parse(major: &str, minor: &str) -> Option<Self> {
        let num = |s: &str| s.trim_end_matches('+').trim().parse::<u32>().ok();
        Some(Self {
            major: num(major)?,
            minor: num(minor)?,
        })
    }

    const fn at_least(self, minor: u32) -> bool {
        self.major > 1 || (self.major == 1 && self.minor >= minor)
    }
}

impl std::fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The names a kubelet 1.37 with its default feature gates declares in
/// `status.declaredFeatures` (KEP-5328), in its order (byte-wise by name):
/// the gates that are on by default among those the framework knows; the
/// two that also need a runtime feature are alpha and off.
pub const DECLARED_FEATURES: &[&str] = &[
    "ExtendWebSocketsToKubelet",
    "InPlacePodLevelResourcesVerticalScaling",
    "InPlacePodVerticalScalingInitContainers",
    "RestartAllContainersOnContainerExits",
];

pub use nodestatus_apimachinery::RuntimeHandler;

/// What a current kubelet reads from its container runtime and its machine
/// for the fields it writes outside its setters. `None` is "not known in
/// this pass": the node keeps what it has, as the kubelet does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeAndMachine {
    /// CRI `Status`'s `runtime_handlers` (empty from a runtime older than
    /// CRI 1.30, such as containerd 1.6); `None` when the runtime did not
    /// answer.
    pub runtime_handlers: Option<Vec<RuntimeHandler>>,
    /// CRI `Status`'s `features.supplemental_groups_policy`; `None` when
    /// the runtime reports no features (older than CRI 1.31) or did not
    /// answer.
    pub supplemental_groups_policy: Option<bool>,
    /// The machine's swap (`SwapTotal` of `/proc/meminfo`), in bytes.
    pub swap_bytes: Option<u64>,
    /// Whether the engine runs in a user namespace.
    pub running_in_user_namespace: Option<bool>,
}

/// `status.capacity[ephemeral-storage]` in the units the server's kubelet
/// writes it: decimal from 1.37 (kubernetes#137652; as machine-info writes
/// it), binary before (`4Gi` where 1.37 writes `4294967296`: the same
/// amount, but a 1.36 kubelet's node says `4Gi`). Returns the node with it,
/// or `None` when it holds it so already, or holds none.
pub fn ephemeral_storage_in_release_units(node: &Value, server: ServerVersion) -> Option<Value> {
    if server.at_least(37) {
        return None;
    }
    let text = node
        .pointer("/status/capacity/ephemeral-storage")?
        .as_str()?;
    let millis = nodestatus_apimachinery::quantity::Quantity::parse(text)
        .ok()?
        .as_millis();
    if millis % 1000 != 0 {
        return None;
    }
    let bytes = u64::try_from(millis / 1000).ok()?;
    let want = nodestatus_apimachinery::quantity::Quantity::bytes(bytes).to_string();
    if want == text {
        return None;
    }
    let mut out = node.clone();
    out["status"]["capacity"]["ephemeral-storage"] = Value::String(want);
    Some(out)
}

/// `status.nodeInfo.kubeProxyVersion` as a kubelet older than 1.33 writes
/// it: its own version (the `DisableNodeKubeProxyVersion` gate, off before
/// 1.33), here the node's `kubeletVersion`; from 1.33 on it is left as it
/// is (empty, unless version-info is configured to write it). Returns the
/// node with it, or `None` when it holds it so already.
pub fn kube_proxy_version_for_release(node: &Value, server: ServerVersion) -> Option<Value> {
    if server.at_least(33) {
        return None;
    }
    let info = node.pointer("/status/nodeInfo")?;
    let kubelet = info.get("kubeletVersion")?.as_str()?;
    if kubelet.is_empty() || info.get("kubeProxyVersion").and_then(Value::as_str) == Some(kubelet) {
        return None;
    }
    let mut out = node.clone();
    out["status"]["nodeInfo"]["kubeProxyVersion"] = Value::String(kubelet.to_owned());
    Some(out)
}

/// One of the fields [`current_kubelet_fields`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurrentField {
    /// `status.runtimeHandlers`.
    RuntimeHandlers,
    /// `status.features`.
    Features,
    /// `status.declaredFeatures`.
    DeclaredFeatures,
    /// `status.nodeInfo.swap`.
    Swap,
    /// `status.nodeInfo.runningInUserNamespace`.
    RunningInUserNamespace,
}

impl CurrentField {
    /// Every one, in the order they are written.
    pub const ALL: [Self; 5] = [
        Self::RuntimeHandlers,
        Self::Features,
        Self::DeclaredFeatures,
        Self::Swap,
        Self::RunningInUserNamespace,
    ];

    /// Its key: in `status`, or in `status.nodeInfo` for the last two.
    pub const fn key(self) -> &'static str {
        match self {
            Self::RuntimeHandlers => "runtimeHandlers",
            Self::Features => "features",
            Self::DeclaredFeatures => "declaredFeatures",
            Self::Swap => "swap",
            Self::RunningInUserNamespace => "runningInUserNamespace",
        }
    }

    const fn in_node_info(self) -> bool {
        matches!(self, Self::Swap | Self::RunningInUserNamespace)
    }

    /// Its path in the node, for messages.
    pub fn path(self) -> String {
        if self.in_node_info() {
            format!("status.nodeInfo.{}", self.key())
        } else {
            format!("status.{}", self.key())
        }
    }

    /// Its value in `node`, if any.
    pub fn get(self, node: &Value) -> Option<&Value> {
        let status = node.get("status")?;
        let parent = if self.in_node_info() {
            status.get("nodeInfo")?
        } else {
            status
        };
        parent.get(self.key())
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of [`CurrentField`]s: the ones a server did not keep as they were
/// written, which [`current_kubelet_fields`] then leaves alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CurrentFields(u8);

impl CurrentFields {
    /// None of them.
    pub const NONE: Self = Self(0);

    /// Whether `f` is in the set.
    pub const fn contains(self, f: CurrentField) -> bool {
        self.0 & f.bit() != 0
    }

    /// The set with `f` too.
    #[must_use]
    pub const fn with(self, f: CurrentField) -> Self {
        Self(self.0 | f.bit())
    }

    /// The fields of the set, in [`CurrentField::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = CurrentField> {
        CurrentField::ALL
            .into_iter()
            .filter(move |f| self.contains(*f))
    }
}

/// The values of the [`CurrentField`]s that `new` holds and `base` does
/// not hold the same: what a status patch from `base` to `new` writes,
/// kept to compare with the server's answer ([`not_kept`]). A field the
/// patch does not touch is not in it (another writer may change it).
pub fn written_values(base: &Value, new: &Value) -> Vec<(CurrentField, Value)> {
    CurrentField::ALL
        .into_iter()
        .filter_map(|f| {
            f.get(new)
                .filter(|v| f.get(base) != Some(v))
                .map(|v| (f, v.clone()))
        })
        .collect()
}

/// The fields of `written` ([`written_values`] of a patch) that the server's answer `answer` does not hold as written: the
/// server dropped or changed them (an API server with the field's feature
/// gate off drops it). Written again, they would be patched on every pass.
pub fn not_kept(written: &[(CurrentField, Value)], answer: &Value) -> CurrentFields {
    written
        .iter()
        .filter(|(f, v)| f.get(answer) != Some(v))
        .fold(CurrentFields::NONE, |set, (f, _)| set.with(*f))
}

/// The fields a current kubelet writes besides its setters' classic ones,
/// each only when the server is of a version whose kubelet writes it by
/// default (so it knows the field and keeps it): `status.runtimeHandlers`
/// (1.31: the `RecursiveReadOnlyMounts` gate on), `status.features` (1.33:
/// `SupplementalGroupsPolicy` beta), `status.nodeInfo.swap` (1.33),
/// `status.declaredFeatures` (1.36: `NodeDeclaredFeatures` beta, on;
/// [`DECLARED_FEATURES`], the list of a 1.36 and of a 1.37 kubelet: the same
/// four gates are on by default in both, 1.37's other registered features
/// are off; a 1.35 server has the gate alpha and off, and drops the field),
/// and `status.nodeInfo.runningInUserNamespace` (1.37:
/// `KubeletInUserNamespace` beta). The kubelet's rules, from its setters
/// (`pkg/kubelet/nodestatus/setters.go`):
/// - runtime handlers sorted by name, both features always written; none
///   reported removes the field (an empty list, omitted);
/// - `features` written whole when the runtime reports features, else
///   left as it is;
/// - swap written only when the machine has some (never cleared);
/// - the rest written on every pass.
///
/// The fields in `skip` (those the server did not keep, [`not_kept`]) are
/// left as the node has them.
///
/// Returns the node with them, or `None` when it holds them already.
pub fn current_kubelet_fields(
    node: &Value,
    server: ServerVersion,
    facts: &RuntimeAndMachine,
    skip: CurrentFields,
) -> Option<Value> {
    let status = node.get("status").and_then(Value::as_object);
    let info = status
        .and_then(|s| s.get("nodeInfo"))
        .and_then(Value::as_object);
    let mut status_sets: Vec<(&str, Option<Value>)> = Vec::new();
    let mut info_sets: Vec<(&str, Value)> = Vec::new();
    if server.at_least(31)
        && let Some(handlers) = &facts.runtime_handlers
    {
        let mut handlers = handlers.clone();
        handlers.sort_by(|a, b| a.name.cmp(&b.name));
        let want = (!handlers.is_empty()).then(|| {
            Value::Array(
                handlers
                    .iter()
                    .map(|h| {
                        json!({
                            "name": h.name,
                            "features": {
                                "recursiveReadOnlyMounts": h.recursive_read_only_mounts,
                                "userNamespaces": h.user_namespaces,
                            },
                        })
                    })
                    .collect(),
            )
        });
        status_sets.push(("runtimeHandlers", want));
    }
    if server.at_least(33)
        && let Some(sgp) = facts.supplemental_groups_policy
    {
        status_sets.push(("features", Some(json!({"supplementalGroupsPolicy": sgp}))));
    }
    if server.at_least(36) {
        status_sets.push(("declaredFeatures", Some(json!(DECLARED_FEATURES))));
    }
    if server.at_least(37)
        && let Some(userns) = facts.running_in_user_namespace
    {
        info_sets.push(("runningInUserNamespace", Value::Bool(userns)));
    }
    if server.at_least(33)
        && let Some(bytes) = facts.swap_bytes.filter(|b| *b > 0)
    {
        info_sets.push(("swap", json!({"capacity": bytes})));
    }
    let skipped = |key: &str, in_info: bool| {
        skip.iter()
            .any(|f| f.key() == key && f.in_node_info() == in_info)
    };
    status_sets.retain(|(k, _)| !skipped(k, false));
    info_sets.retain(|(k, _)| !skipped(k, true));
    let status_changed = status_sets
        .iter()
        .any(|(k, want)| status.and_then(|s| s.get(*k)) != want.as_ref());
    let info_changed = info_sets
        .iter()
        .any(|(k, want)| info.and_then(|i| i.get(*k)) != Some(want));
    if !status_changed && !info_changed {
        return None;
    }
    let mut out = node.clone();
    let root = out.as_object_mut()?;
    let status = root
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()?;
    for (k, want) in status_sets {
        match want {
            Some(v) => {
                status.insert(k.to_owned(), v);
            }
            None => {
                status.remove(k);
            }
        }
    }
    if !info_sets.is_empty() {
        let info = status
            .entry("nodeInfo")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()?;
        for (k, v) in info_sets {
            info.insert(k.to_owned(), v);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_goes_back_to_the_end_of_the_conditions() {
        let node = |types: &[&str]| serde_json::json!({"status": {"conditions": types.iter().map(|t| serde_json::json!({"type": t})).collect::<Vec<_>>()}});
        assert_eq!(
            ready_last(&node(&["MemoryPressure", "Ready", "GPU", "Disk"])),
            Some(node(&["MemoryPressure", "GPU", "Disk", "Ready"]))
        );
        assert_eq!(ready_last(&node(&["MemoryPressure", "Ready"])), None);
        assert_eq!(ready_last(&node(&["MemoryPressure"])), None);
        assert_eq!(ready_last(&serde_json::json!({"status": {}})), None);
    }

    #[test]
    fn os_and_arch_labels_are_forced_when_missing_or_wrong() {
        let os = std::env::consts::OS;
        let arch = go_arch();
        let right = json!({"metadata": {"name": "n", "labels": {
            "kubernetes.io/os": os, "kubernetes.io/arch": arch, "a": "1"
        }}});
        assert_eq!(os_arch_labels(&right), None);
        let mut wrong = right.clone();
        wrong["metadata"]["labels"]["kubernetes.io/os"] = json!("plan9");
        assert_eq!(os_arch_labels(&wrong).as_ref(), Some(&right));
        let bare = json!({"metadata": {"name": "n"}});
        assert_eq!(
            os_arch_labels(&bare).unwrap()["metadata"]["labels"],
            json!({"kubernetes.io/os": os, "kubernetes.io/arch": arch})
        );
        // Not the beta labels: the kubelet forces only these two.
        let labels = os_arch_labels(&bare).unwrap()["metadata"]["labels"].clone();
        assert_eq!(labels.as_object().unwrap().len(), 2);
    }

    #[test]
    fn every_capacity_key_gets_an_allocatable_and_a_gone_extended_resource_leaves() {
        let n = json!({"status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"},
            "allocatable": {"cpu": "4", "memory": "7900Mi", "example.com/fpga": "1"},
        }});
        let out = allocatable_for_every_capacity_key(&n).unwrap();
        assert_eq!(
            out["status"]["allocatable"],
            json!({"cpu": "4", "memory": "7900Mi", "nvidia.com/gpu": "2"})
        );
        // The steady state changes nothing and copies nothing.
        assert_eq!(allocatable_for_every_capacity_key(&out), None);
        assert_eq!(
            allocatable_for_every_capacity_key(&json!({"status": {}})),
            None
        );
        let empty = json!({"status": {"capacity": {}, "allocatable": {"example.com/x": "1"}}});
        assert_eq!(
            allocatable_for_every_capacity_key(&empty).unwrap()["status"],
            json!({"capacity": {}})
        );
    }

    #[test]
    fn keep_condition_restores_replaces_or_removes() {
        use serde_json::json;

        let base = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        let n =
            json!({"status": {"conditions": [{"type": "A"}, {"type": "Ready", "status": "True"}]}});
        let kept = keep_condition(&base, &n, "Ready").unwrap();
        assert_eq!(kept["status"]["conditions"][1]["status"], "Unknown");
        assert_eq!(keep_condition(&base, &kept, "Ready"), None, "already kept");
        let fresh = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let none = keep_condition(&json!({}), &fresh, "Ready").unwrap();
        assert_eq!(none["status"]["conditions"], json!([]));
        let bare = keep_condition(&base, &json!({"status": {}}), "Ready").unwrap();
        assert_eq!(bare["status"]["conditions"][0]["status"], "Unknown");
    }

    #[test]
    fn keep_addresses_keeps_the_cloud_controllers_once_there_are_some() {
        use serde_json::json;
        let ccm = json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.9"}]}});
        let ours =
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
        assert_eq!(
            keep_addresses(&ccm, &ours).unwrap()["status"]["addresses"],
            ccm["status"]["addresses"]
        );
        assert_eq!(keep_addresses(&ccm, &ccm), None);
        assert_eq!(
            keep_addresses(&json!({"status": {}}), &ours),
            None,
            "none yet: ours"
        );
    }

    #[test]
    fn server_versions_parse_as_distributions_write_them() {
        assert_eq!(
            ServerVersion::parse("1", "37+"),
            Some(ServerVersion {
                major: 1,
                minor: 37
            })
        );
        assert_eq!(ServerVersion::parse("1", "x"), None);
        assert!(ServerVersion::parse("1", "36").unwrap() < ServerVersion::NEWEST);
        assert_eq!(ServerVersion::NEWEST.to_string(), "1.37");
    }

    fn v(minor: u32) -> ServerVersion {
        ServerVersion { major: 1, minor }
    }

    fn all_facts() -> RuntimeAndMachine {
        RuntimeAndMachine {
            runtime_handlers: Some(vec![
                RuntimeHandler {
                    name: "runc".into(),
                    recursive_read_only_mounts: true,
                    user_namespaces: false,
                },
                RuntimeHandler {
                    name: String::new(),
                    recursive_read_only_mounts: true,
                    user_namespaces: true,
                },
            ]),
            supplemental_groups_policy: Some(false),
            swap_bytes: Some(2 << 30),
            running_in_user_namespace: Some(false),
        }
    }

    #[test]
    fn a_current_kubelets_fields_as_a_137_kubelet_writes_them() {
        let node = json!({"status": {"nodeInfo": {"kernelVersion": "6"}}});
        let out = current_kubelet_fields(&node, v(37), &all_facts(), CurrentFields::NONE).unwrap();
        assert_eq!(
            out["status"]["runtimeHandlers"],
            json!([
                {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}},
                {"name": "runc", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": false}},
            ]),
            "sorted by name, both features written"
        );
        assert_eq!(
            out["status"]["features"],
            json!({"supplementalGroupsPolicy": false})
        );
        assert_eq!(out["status"]["declaredFeatures"], json!(DECLARED_FEATURES));
        assert_eq!(
            out["status"]["nodeInfo"],
            json!({"kernelVersion": "6", "swap": {"capacity": 2u64 << 30}, "runningInUserNamespace": false})
        );
        // The steady state changes nothing and copies nothing.
        assert_eq!(
            current_kubelet_fields(&out, v(37), &all_facts(), CurrentFields::NONE),
            None
        );
    }

    #[test]
    fn a_field_the_server_does_not_know_is_not_written() {
        let node = json!({"status": {}});
        let fields = |minor| {
            let out = current_kubelet_fields(&node, v(minor), &all_facts(), CurrentFields::NONE);
            let out = out.unwrap_or_else(|| node.clone());
            let mut keys: Vec<String> =
                out["status"].as_object().unwrap().keys().cloned().collect();
            if let Some(info) = out["status"]["nodeInfo"].as_object() {
                keys.extend(info.keys().map(|k| format!("nodeInfo.{k}")));
            }
            keys.sort();
            keys
        };
        assert_eq!(fields(30), Vec::<String>::new());
        assert_eq!(fields(31), ["runtimeHandlers"]);
        assert_eq!(
            fields(35),
            ["features", "nodeInfo", "nodeInfo.swap", "runtimeHandlers"]
        );
        // 1.36's kubelet declares its features (NodeDeclaredFeatures beta).
        assert_eq!(
            fields(36),
            [
                "declaredFeatures",
                "features",
                "nodeInfo",
                "nodeInfo.swap",
                "runtimeHandlers"
            ]
        );
        assert_eq!(
            fields(37),
            [
                "declaredFeatures",
                "features",
                "nodeInfo",
                "nodeInfo.runningInUserNamespace",
                "nodeInfo.swap",
                "runtimeHandlers"
            ]
        );
    }

    #[test]
    fn what_the_runtime_does_not_say_is_kept_and_no_handlers_removes_them() {
        let node = json!({"status": {
            "runtimeHandlers": [{"name": "old", "features": {"recursiveReadOnlyMounts": false, "userNamespaces": false}}],
            "features": {"supplementalGroupsPolicy": true},
            "nodeInfo": {"swap": {"capacity": 1024}}
        }});
        // The runtime did not answer, reports no features, the machine has
        // no swap: all three stay as they are.
        let unknown = RuntimeAndMachine::default();
        let out = current_kubelet_fields(&node, v(35), &unknown, CurrentFields::NONE);
        assert_eq!(out, None);
        // containerd 1.6: it answers, with no handlers: the list goes.
        let old_runtime = RuntimeAndMachine {
            runtime_handlers: Some(Vec::new()),
            ..Default::default()
        };
        let out = current_kubelet_fields(&node, v(35), &old_runtime, CurrentFields::NONE).unwrap();
        assert!(out["status"].get("runtimeHandlers").is_none(), "{out}");
        assert_eq!(out["status"]["features"], node["status"]["features"]);
        assert_eq!(out["status"]["nodeInfo"], node["status"]["nodeInfo"]);
    }

    #[test]
    fn ephemeral_storage_is_in_binary_units_for_a_kubelet_older_than_1_37() {
        let node =
            |q: &str| json!({"status": {"capacity": {"ephemeral-storage": q, "memory": "1Gi"}}});
        let out = ephemeral_storage_in_release_units(&node("4294967296"), v(36)).unwrap();
        assert_eq!(out, node("4Gi"));
        // Not a whole number of KiB: the same digits, as Go writes it.
        assert_eq!(
            ephemeral_storage_in_release_units(&node("3865470560"), v(32)),
            None
        );
        assert_eq!(
            ephemeral_storage_in_release_units(&node("4Gi"), v(36)),
            None
        );
        // 1.37 writes decimal: left as it is.
        assert_eq!(
            ephemeral_storage_in_release_units(&node("4294967296"), v(37)),
            None
        );
        assert_eq!(
            ephemeral_storage_in_release_units(&json!({"status": {}}), v(36)),
            None
        );
    }

    #[test]
    fn a_kubelet_older_than_1_33_writes_its_version_as_kube_proxys() {
        let node = json!({"status": {"nodeInfo": {"kubeletVersion": "v1.37.2-nodestatus.0.1.0"}}});
        let out = kube_proxy_version_for_release(&node, v(32)).unwrap();
        assert_eq!(
            out["status"]["nodeInfo"]["kubeProxyVersion"],
            "v1.37.2-nodestatus.0.1.0"
        );
        assert_eq!(kube_proxy_version_for_release(&out, v(32)), None, "steady");
        assert_eq!(kube_proxy_version_for_release(&node, v(33)), None);
        assert_eq!(
            kube_proxy_version_for_release(&json!({"status": {}}), v(32)),
            None
        );
    }

    #[test]
    fn a_field_the_server_did_not_keep_is_named_and_then_left_alone() {
        let empty = json!({"status": {"nodeInfo": {"kernelVersion": "6"}}});
        let written =
            current_kubelet_fields(&empty, v(37), &all_facts(), CurrentFields::NONE).unwrap();
        let values = written_values(&empty, &written);
        assert_eq!(values.len(), 5, "{written}");
        // A field the patch does not change is not the patch's to check.
        let mut base = empty.clone();
        base["status"]["declaredFeatures"] = json!(DECLARED_FEATURES);
        let fields =
            |w: Vec<(CurrentField, Value)>| w.into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        assert!(!fields(written_values(&base, &written)).contains(&CurrentField::DeclaredFeatures));
        assert_eq!(fields(written_values(&written, &written)), []);
        // The server kept everything: nothing is named.
        assert_eq!(not_kept(&values, &written), CurrentFields::NONE);
        // A server with NodeDeclaredFeatures off drops the list, and one
        // that prunes what it does not know changes `features`.
        let mut answer = written.clone();
        answer["status"]
            .as_object_mut()
            .unwrap()
            .remove("declaredFeatures");
        answer["status"]["features"] = json!({});
        let dropped = not_kept(&values, &answer);
        assert_eq!(
            dropped.iter().collect::<Vec<_>>(),
            [CurrentField::Features, CurrentField::DeclaredFeatures]
        );
        assert_eq!(
            dropped.iter().map(CurrentField::path).collect::<Vec<_>>(),
            ["status.features", "status.declaredFeatures"]
        );
        // The next pass over the server's node writes the rest and leaves
        // those two as the server has them: no change, so no patch, where
        // the same change would otherwise be patched on every pass.
        assert_eq!(
            current_kubelet_fields(&answer, v(37), &all_facts(), dropped),
            None
        );
        assert!(
            current_kubelet_fields(&answer, v(37), &all_facts(), CurrentFields::NONE).is_some()
        );
        // What it skips is only what it was told: a field in nodeInfo and
        // one in status of the same key are told apart.
        let swap_gone = CurrentFields::NONE.with(CurrentField::Swap);
        let mut no_swap = written.clone();
        no_swap["status"]["nodeInfo"]
            .as_object_mut()
            .unwrap()
            .remove("swap");
        assert_eq!(
            current_kubelet_fields(&no_swap, v(37), &all_facts(), swap_gone),
            None
        );
        assert!(
            swap_gone.contains(CurrentField::Swap) && !swap_gone.contains(CurrentField::Features)
        );
    }
}
