//! The node a pass starts from before the node exists.

use serde_json::{Value, json};

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
