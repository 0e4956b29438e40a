//! The ServiceAccount variant (`deploy/kubernetes/serviceaccount-variant/`)
//! on a real apiserver that has ValidatingAdmissionPolicy (Kubernetes 1.30
//! and later; the tests' is 1.37): its RBAC and its policies applied with
//! kubectl, a pod's token bound to node A (the apiserver puts the
//! `authentication.kubernetes.io/node-name` claim in it), and `nodestatus
//! run` with that token. The token writes node A and its Lease, and is
//! refused for node B, its Lease, and every other object.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodestatus_tests::{built, drop_plugin};
use serde_json::json;

use crate::kube::{cluster, condition, engine_command_with, kubeconfig_yaml, server_node, until};

const NODE_A: &str = "sa-node-a";
const NODE_B: &str = "sa-node-b";
const NAMESPACE: &str = "nodestatus";

/// `kubectl` as the admin of the shared apiserver; fails the test with its
/// output when it fails.
fn kubectl(dir: &Path, args: &[&str]) -> String {
    let kubeconfig = dir.join("kubeconfig-admin");
    if !kubeconfig.exists() {
        std::fs::write(&kubeconfig, kubeconfig_yaml(&cluster().admin_token)).unwrap();
    }
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .output()
        .expect("running kubectl (scripts/ensure-apiserver.sh builds it beside the apiserver)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?}:\n{text}");
    text
}

/// What a refused call's error says, or a failure if it was let through.
fn refused<T: std::fmt::Debug>(what: &str, r: Result<T, kube::Error>) -> (u16, String) {
    match r {
        Ok(v) => panic!("{what} was let through: {v:?}"),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(e) => panic!("{what}: not an API refusal: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pods_token_writes_its_own_node_and_lease_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    let variant = deploy.join("serviceaccount-variant");
    let file = |p: &Path| p.to_str().unwrap().to_owned();
    kubectl(
        dir.path(),
        &[
            "apply",
            "-f",
            &file(&deploy.join("namespace.yaml")),
            "-f",
            &file(&variant.join("rbac.yaml")),
            "-f",
            &file(&variant.join("admission-policy.yaml")),
        ],
    );
    let admin = crate::kube::admin();
    // Node B and its Lease, as its own kubelet would have made them.
    let nodes = Api::<Node>::all(admin.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NODE_B}})).unwrap(),
        )
        .await
        .unwrap();
    let admin_leases = Api::<Lease>::namespaced(admin.clone(), "kube-node-lease");
    admin_leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": NODE_B},
                "spec": {"holderIdentity": NODE_B, "leaseDurationSeconds": 40}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    // The DaemonSet's pod on node A (no kubelet runs it: the token needs only
    // the pod object and its nodeName).
    kubectl(
        dir.path(),
        &[
            "-n",
            NAMESPACE,
            "run",
            "nodestatus-on-a",
            "--image=busybox",
            "--restart=Never",
            "--overrides",
            &json!({"spec": {"serviceAccountName": "nodestatus", "nodeName": NODE_A}}).to_string(),
        ],
    );
    let bound = kubectl(
        dir.path(),
        &[
            "-n",
            NAMESPACE,
            "create",
            "token",
            "nodestatus",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "nodestatus-on-a",
        ],
    );
    let bound = bound.trim();
    let unbound = kubectl(
        dir.path(),
        &["-n", NAMESPACE, "create", "token", "nodestatus"],
    );
    let unbound = unbound.trim();

    // A new policy takes effect once the apiserver's admission has seen
    // it (eventually consistent, about a second): wait until a dry run of
    // a write to node B's status is refused (a dry run is admitted, never
    // stored).
    let probe = Api::<Node>::all(crate::kube::client(bound));
    let dry = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let probe_patch =
        Patch::Merge(json!({"metadata": {"annotations": {"example.com/probe": "x"}}}));
    let in_force = until(60, || async {
        probe
            .patch_status(NODE_B, &dry, &probe_patch)
            .await
            .is_err()
    })
    .await;
    assert!(
        in_force,
        "the admission policy was not in force 60 s after it was applied"
    );

    // nodestatus, with the pod's token, registers node A and keeps it and
    // its Lease current.
    let kubeconfig = dir.path().join("kubeconfig-sa");
    std::fs::write(&kubeconfig, kubeconfig_yaml(bound)).unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    drop_plugin(
        &plugins,
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_plugin(&plugins, "ready.wasm", Path::new(built::READY));
    let (mut cmd, log) = engine_command_with(dir.path(), NODE_A, &plugins, &kubeconfig);
    let mut engine = cmd.spawn().unwrap();
    let sa_leases = Api::<Lease>::namespaced(crate::kube::client(bound), "kube-node-lease");
    let ready = until(60, || async {
        let Some(node) = server_node(NODE_A).await else {
            return false;
        };
        let renewed = admin_leases
            .get_opt(NODE_A)
            .await
            .unwrap()
            .and_then(|l| l.spec?.renew_time)
            .is_some();
        renewed && condition(&node, "Ready").is_some_and(|c| c["status"] == "True")
    })
    .await;
    let _ = engine.kill();
    let _ = engine.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        ready,
        "with the pod's token, node {NODE_A} did not become Ready with its Lease renewed within 60 s; the engine's log:\n{text}"
    );
    assert!(
        !text.contains("Forbidden") && !text.contains(" 403"),
        "the engine met a refusal with its own node's token:\n{text}"
    );

    // The same token, for anything else.
    let sa = crate::kube::client(bound);
    let sa_nodes = Api::<Node>::all(sa.clone());
    let patch = Patch::Merge(json!({"status": {"conditions": [
        {"type": "Example", "status": "True", "reason": "Test", "message": "m"}
    ]}}));
    let (_, msg) = refused(
        "node B's status",
        sa_nodes
            .patch_status(NODE_B, &PatchParams::default(), &patch)
            .await,
    );
    assert!(
        msg.contains(&format!("may not write node {NODE_B}")),
        "{msg}"
    );
    let (_, msg) = refused(
        "a new node C",
        sa_nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "sa-node-c"}})).unwrap(),
            )
            .await,
    );
    assert!(msg.contains("may not write node sa-node-c"), "{msg}");
    let (_, msg) = refused(
        "node B's lease",
        sa_leases
            .patch(
                NODE_B,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"holderIdentity": NODE_A}})),
            )
            .await,
    );
    assert!(
        msg.contains("may not") || msg.contains("forbidden"),
        "{msg}"
    );
    let mut b_lease = admin_leases.get(NODE_B).await.unwrap();
    b_lease.spec.as_mut().unwrap().holder_identity = Some(NODE_A.into());
    let (_, msg) = refused(
        "an update of node B's lease",
        sa_leases
            .replace(NODE_B, &PostParams::default(), &b_lease)
            .await,
    );
    assert!(
        msg.contains(&format!("may not write the lease of node {NODE_B}")),
        "{msg}"
    );
    // Node A's spec (taints, unschedulable): RBAC grants no patch of nodes.
    let (code, msg) = refused(
        "node A's spec",
        sa_nodes
            .patch(
                NODE_A,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": true}})),
            )
            .await,
    );
    assert_eq!(code, 403, "{msg}");
    // Deleting its own node: RBAC grants no delete.
    let (code, msg) = refused(
        "deleting node A",
        sa_nodes.delete(NODE_A, &Default::default()).await,
    );
    assert_eq!(code, 403, "{msg}");
    // Any other object.
    let (code, msg) = refused(
        "a ConfigMap",
        Api::<ConfigMap>::namespaced(sa.clone(), NAMESPACE)
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
            )
            .await,
    );
    assert_eq!(code, 403, "{msg}");
    // An event about node B.
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(sa.clone(), "default");
    let (_, msg) = refused(
        "an event about node B",
        events
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": "sa-event-b"},
                    "involvedObject": {"kind": "Node", "name": NODE_B},
                    "reason": "Test", "message": "m", "type": "Normal"
                }))
                .unwrap(),
            )
            .await,
    );
    assert!(
        msg.contains("may only record events about that node"),
        "{msg}"
    );

    // A token of the same ServiceAccount not bound to a pod on a node has
    // no node-name claim: refused even for node A.
    let loose = Api::<Node>::all(crate::kube::client(unbound));
    let (_, msg) = refused(
        "node A's status with a token bound to no pod",
        loose
            .patch_status(NODE_A, &PatchParams::default(), &patch)
            .await,
    );
    assert!(
        msg.contains("authentication.kubernetes.io/node-name"),
        "{msg}"
    );
    // The admin's view: node B untouched.
    let b = server_node(NODE_B).await.unwrap();
    assert!(condition(&b, "Example").is_none(), "{b}");
}
