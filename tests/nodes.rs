//! Sample nodes.

use serde_json::{Value, json};

/// A node of about 15 kB (compact JSON) like a busy kubelet's: 4 conditions, 50 images,
/// addresses, capacity and nodeInfo.
pub fn busy_node() -> Value {
    let images: Vec<Value> = (0..50)
        .map(|i| {
            json!({
                "names": [
                    format!("registry.example.com/team-{i}/service-{i}@sha256:{:064x}", i * 7919),
                    format!("registry.example.com/team-{i}/service-{i}:v1.{i}.0"),
                    format!("registry.example.com/team-{i}/service-{i}:stable"),
                ],
                "sizeBytes": 100_000_000u64 - i as u64 * 1_000_000,
            })
        })
        .collect();
    let cond = |t: &str, s: &str, r: &str, m: &str| json!({"type": t, "status": s, "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": r, "message": m});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "node-1",
            "uid": "6a0f0b8e-5b2a-4b8c-9a57-3b7b0c1d2e3f",
            "resourceVersion": "123456",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": "node-1",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": "zone-a",
            },
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"podCIDR": "10.244.1.0/24", "providerID": "example://node-1"},
        "status": {
            "capacity": {"cpu": "8", "memory": "32876232Ki", "pods": "110", "ephemeral-storage": "102687672Ki"},
            "allocatable": {"cpu": "8", "memory": "32773832Ki", "pods": "110", "ephemeral-storage": "94636958716"},
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}, {"type": "Hostname", "address": "node-1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "0f1e2d3c4b5a69788796a5b4c3d2e1f0", "systemUUID": "ec2a0c3e-1234-5678-9abc-def012345678",
                "bootID": "5b2c3d4e-1111-2222-3333-444455556666", "kernelVersion": "6.1.0-18-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.30.0", "kubeProxyVersion": "v1.30.0", "operatingSystem": "linux", "architecture": "amd64"
            },
            "images": images,
        }
    })
}

/// A minimal node named `name`.
pub fn small_node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": {}, "status": {}})
}
