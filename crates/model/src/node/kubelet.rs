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

#[cfg(test)]
mod tests {
    use super::*;

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
}
