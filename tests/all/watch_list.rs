//! The watch of the node against a server that does not stream a watch's
//! initial events (`--feature-gates=WatchList=false`, as every
//! kube-apiserver before 1.34 by default): the refused streaming watch is
//! asked once, then a list and a watch from its resourceVersion keep the
//! live node current, with no GET of the node.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use nodestatus_controlplane::{EmbeddedApiserver, Extras};
use nodestatus_engine::agent::Agent;
use nodestatus_engine::agent::client::{NodeClient, Traffic};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::fleet::{Req, audit};
use crate::kube::until;

const NAME: &str = "watch-list-off-node";

/// The node identity's requests in the audit log.
fn requests(cluster: &EmbeddedApiserver) -> Vec<Req> {
    audit(
        &cluster.audit_log_path().unwrap(),
        &format!("system:node:{NAME}"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn without_watch_list_the_watch_lists_then_watches() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = EmbeddedApiserver::start_with_extras(
        &dir.path().join("cluster"),
        &[NAME],
        false,
        true,
        Extras {
            audit_log: true,
            feature_gates: Some("WatchList=false".into()),
            ..Default::default()
        },
    )
    .await
    .expect("starting kube-apiserver with WatchList off");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let yaml = format!(
        "nodeName: {NAME}\nnodeStatusUpdateFrequency: 1s\nnodeStatusReportFrequency: 6s\nnodeLeaseDurationSeconds: 4\npluginDir: {}\n",
        plugins.display()
    );
    let (cfg, plugins) = crate::common::configured(&yaml, &plugins);
    let client = NodeClient::new(
        cluster.node_client(NAME).unwrap(),
        NAME,
        Arc::new(Traffic::default()),
    )
    .with_deadline(Duration::from_secs(1));
    let agent = Agent::new(cfg, client, plugins);
    let handle = agent.handle();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(agent.run(cancel.clone()));
    let nodes: Api<Node> = Api::all(cluster.admin_client().unwrap());
    assert!(
        until(30, || async {
            nodes.get_opt(NAME).await.ok().flatten().is_some()
        })
        .await,
        "the node was not registered"
    );
    // Another agent's condition, written by the admin: the watch brings it
    // into the live node.
    let npd = json!({"status": {"conditions": [{"type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock", "message": "kernel has no deadlock", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    nodes
        .patch_status(NAME, &PatchParams::default(), &Patch::Strategic(&npd))
        .await
        .unwrap();
    let has_it = || {
        handle.cached_node().is_some_and(|n| {
            n["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "KernelDeadlock"))
        })
    };
    assert!(
        until(10, || async { has_it() }).await,
        "the watch did not bring the foreign condition in: {:?}",
        requests(&cluster)
    );
    // Some passes (1 s apart) from the watch's copy.
    tokio::time::sleep(Duration::from_secs(4)).await;
    cancel.cancel();
    let _ = run.await;
    let reqs = requests(&cluster);
    let streams = |r: &Req| r.uri.contains("sendInitialEvents=true");
    let streamed: Vec<_> = reqs.iter().filter(|r| streams(r)).collect();
    assert!(
        !streamed.is_empty() && streamed.iter().all(|r| r.code >= 400),
        "the streaming watch was not asked, or not refused: {reqs:?}"
    );
    let lists = reqs
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "nodes")
        .count();
    let watches = reqs
        .iter()
        .filter(|r| r.verb == "watch" && r.resource == "nodes" && !streams(r))
        .count();
    assert!(
        lists >= 1 && watches >= 1,
        "no list and watch after the refusal: {reqs:?}"
    );
    assert!(
        streamed.len() == 1,
        "the refused streaming watch was asked again: {reqs:?}"
    );
    let gets = reqs
        .iter()
        .filter(|r| r.verb == "get" && r.resource == "nodes")
        .count();
    assert!(
        gets <= 1,
        "{gets} GETs of the node: the passes did not start from the watch's copy: {reqs:?}"
    );
}
