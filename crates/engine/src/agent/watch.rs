//! The watch of the node, as an input of the agent.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::NodeClient;
use super::decide::{self, Backoff};
use super::state::WatchEvent;

/// Keeps the live node current from a watch on this one node (field
/// selector `metadata.name`), until `cancel`.
///
/// A watch that fails (a refused or dropped connection, an error status)
/// is not trusted to resume where it stopped: the state marks the live
/// copy stale (try 0 then GETs, as tries 1-4 do) and the watch starts again
/// from a fresh list, with backoff (500 ms doubling to 30 s, each delay
/// stretched by a random part of itself: a fleet's watches that failed
/// together come back spread). A restart asked for (after a connection
/// reset, or a watch that has not listed the node for too long) starts it
/// on new connections, since the watch may sit on a connection that stopped
/// answering and would never say so.
pub(super) async fn watch_node(
    client: NodeClient,
    events: mpsc::UnboundedSender<WatchEvent>,
    restart: Arc<tokio::sync::Notify>,
    cancel: CancellationToken,
) {
    use kube::runtime::watcher::{self, Event as W};
    let mut backoff = Backoff::new(
        std::time::Duration::from_millis(500),
        std::time::Duration::from_secs(30),
    );
    let send = |e: WatchEvent| events.send(e).is_ok();
    loop {
        if !send(WatchEvent::Restarted) {
            return;
        }
        let api: kube::Api<Node> = kube::Api::all(client.watch_client());
        let config = watcher::Config::default().fields(&format!("metadata.name={}", client.name()));
        let stream = watcher::watcher(api, config);
        futures::pin_mut!(stream);
        let failed = loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => return,
                _ = restart.notified() => break false,
                e = stream.next() => e,
            };
            let to_value = |n: Node| serde_json::to_value(n).expect("a Node serializes");
            let e = match event {
                None => break false,
                Some(Ok(W::Init)) => WatchEvent::Listing,
                Some(Ok(W::InitApply(n))) => WatchEvent::Applied(to_value(n), true),
                Some(Ok(W::InitDone)) => {
                    backoff.reset();
                    WatchEvent::Listed
                }
                Some(Ok(W::Apply(n))) => WatchEvent::Applied(to_value(n), false),
                Some(Ok(W::Delete(_))) => WatchEvent::Deleted,
                Some(Err(e)) => {
                    tracing::debug!(
                        node = client.name(),
                        "watch of the node failed, restarting it from a fresh list: {e}"
                    );
                    send(WatchEvent::Failed);
                    break true;
                }
            };
            if !send(e) {
                return;
            }
        };
        if failed {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(decide::jitter(
                    backoff.next_delay(),
                    decide::WATCH_RETRY_JITTER,
                    rand::random::<f64>(),
                )) => {}
            }
        }
    }
}
