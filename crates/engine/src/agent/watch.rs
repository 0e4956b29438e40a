//! The watch of the node: its part of the state ([`WatchLoop`]: when a
//! failed watch is resumed) and the task that runs it ([`watch_node`]).
//!
//! The task watches the node (field selector `metadata.name`), each start
//! one request that streams the node as it is first ([`watch_node`]). A
//! watch that fails (a refused or dropped connection, an error status)
//! reports [`WatchEvent::Failed`] and waits: the state
//! decides when it resumes ([`Action::RestartWatch`]), after a backoff
//! (500 ms doubling to 30 s, each delay stretched by a random part of
//! itself, so that the watches of a fleet, which fail at the same instant
//! when the apiserver goes away, do not come back at the same instants)
//! or, while the server does not answer, when it answers again
//! ([`super::reach`]). A watch started again dials a new connection (but
//! on a client given as is, such as the one `simulate`'s nodes share): the
//! one it sat on may have stopped answering without saying so.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, WatchEvent as W, WatchParams};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::NodeClient;
use super::decide::{self, Backoff};
use super::io::{Action, Observation, WatchEvent};
use super::shared::{Ctx, Shared};

/// How long the server keeps one watch open (`timeoutSeconds`); it is
/// resumed at once after.
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// A watch that said nothing (not even a bookmark) for this long past its
/// timeout sits on a dead connection: it is resumed on a new one.
const WATCH_IDLE: Duration = Duration::from_secs(WATCH_TIMEOUT_SECONDS as u64 + 5);

/// The watch's part of the state.
#[derive(Debug)]
pub struct WatchLoop {
    backoff: Backoff,
    /// The watch failed and waits to be resumed.
    failed: bool,
    /// When it is resumed (`None` while it runs, or while the server does
    /// not answer).
    retry_at: Option<Instant>,
}

impl WatchLoop {
    /// A watch, running.
    pub fn new() -> Self {
        Self {
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(30)),
            failed: false,
            retry_at: None,
        }
    }

    /// Whether the watch failed and waits to be resumed.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// When the failed watch is resumed.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }
}

impl Default for WatchLoop {
    fn default() -> Self {
        Self::new()
    }
}

impl WatchLoop {
    /// What the watch saw.
    pub(super) fn event(
        &mut self,
        s: &mut Shared,
        e: WatchEvent,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        match e {
            WatchEvent::Restarted => {
                s.live.stale = true;
                s.live.watch_started = ctx.now;
            }
            WatchEvent::Listing => s.live.listed = false,
            WatchEvent::Applied(node, from_list) => {
                s.live.listed |= from_list;
                s.offer(node, out);
            }
            WatchEvent::Listed(at) => {
                // A list older than the node held cannot say that it is
                // gone: a watch cache behind the node's own registration
                // (its list served at resourceVersion "0", any state) lists
                // no node, and its watch brings the creation next, and a
                // deletion as an event.
                let held = s
                    .live
                    .node
                    .as_deref()
                    .and_then(|n| n.pointer("/metadata/resourceVersion")?.as_str());
                let predates = held.is_some() && !decide::newer(held, at.as_deref());
                if !s.live.listed && !predates {
                    s.forget_node(out);
                }
                self.ran(s);
            }
            WatchEvent::Resumed => self.ran(s),
            WatchEvent::Deleted => s.forget_node(out),
            WatchEvent::Failed => {
                s.live.stale = true;
                self.failed = true;
                self.retry_at = (!s.reach.holding()).then(|| {
                    let d = self.backoff.next_delay();
                    ctx.now + decide::jitter(d, decide::WATCH_RETRY_JITTER, ctx.rng.unit())
                });
                out.push(Action::Observe(Observation::LoopError(
                    "watch",
                    "transport",
                )));
            }
        }
    }

    /// The watch runs again (listed, or resumed): the live copy is trusted.
    fn ran(&mut self, s: &mut Shared) {
        s.live.stale = false;
        self.failed = false;
        self.retry_at = None;
        self.backoff.reset();
    }

    /// Time passed: a failed watch whose backoff ran out is resumed.
    pub(super) fn tick(&mut self, s: &mut Shared, ctx: &Ctx, out: &mut Vec<Action>) {
        if self.retry_at.is_some_and(|t| ctx.now >= t) {
            resume(self, s, ctx, out);
        }
    }

    /// Drops every pooled connection after a failed try (the kubelet's
    /// `closeAllConns`), the watch's too: a running watch starts again on
    /// a new one (the driver does it when the connections were dropped).
    pub(super) fn reset_connections(&self, s: &mut Shared, ctx: &Ctx, out: &mut Vec<Action>) {
        let watch = !self.failed && !s.reach.holding();
        if watch {
            s.live.watch_started = ctx.now;
        }
        out.push(Action::ResetConnections { watch });
    }
}

/// Resumes the watch on a new connection.
pub(super) fn resume(w: &mut WatchLoop, s: &mut Shared, ctx: &Ctx, out: &mut Vec<Action>) {
    w.retry_at = None;
    s.live.watch_started = ctx.now;
    out.push(Action::RestartWatch);
}

/// How the watch starts again: from where it was, or from the node as
/// it is now.
#[derive(Debug)]
enum From {
    /// The node as it is now: a watch that streams it first
    /// (`sendInitialEvents`, Kubernetes 1.34 and later by default), or
    /// without that, a list.
    Now,
    /// Every change after this resourceVersion.
    Version(String),
}

/// Keeps the live node current from a watch on this one node, until
/// `cancel`; started again when `resume` is notified.
///
/// The watch starts from the node as it is now: one request, a watch
/// that first streams the node as it is (`sendInitialEvents`), as the
/// watch-list of client-go does; against a server that refuses that (its
/// `WatchList` gate off, as before 1.34), a list and then a watch from
/// the list's resourceVersion. At the server's timeout it goes on from
/// the last resourceVersion it saw (bookmarks included), and from the
/// node as it is now when the server no longer has that version (410).
/// After a failure, or when the state asks (a connection reset, a
/// resume after an outage), it starts from the node as it is now: an
/// apiserver that restarted has none of the versions before, and one
/// request of the node does what a resume that fails with 410 and a list
/// would do in three.
pub(super) async fn watch_node(
    client: NodeClient,
    events: mpsc::UnboundedSender<WatchEvent>,
    resume: Arc<tokio::sync::Notify>,
    cancel: CancellationToken,
) {
    let send = |e: WatchEvent| events.send(e).is_ok();
    let to_value = |n: Node| serde_json::to_value(n).expect("a Node serializes");
    let selector = format!("metadata.name={}", client.name());
    // Whether the server streams a watch's initial events.
    let mut streams = true;
    let mut from = From::Now;
    loop {
        let api: Api<Node> = Api::all(client.watch_client());
        let wp = WatchParams::default()
            .fields(&selector)
            .timeout(WATCH_TIMEOUT_SECONDS);
        // (the watch, its resourceVersion, whether it streams the node first)
        let opened = match std::mem::replace(&mut from, From::Now) {
            From::Version(v) => {
                let w = tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = resume.notified() => continue,
                    w = api.watch(&wp, &v) => w,
                };
                w.map(|w| (w, v, false))
            }
            From::Now => {
                if !send(WatchEvent::Restarted) || !send(WatchEvent::Listing) {
                    return;
                }
                let streamed = if streams {
                    let initial = wp.clone().initial_events();
                    let w = tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = resume.notified() => continue,
                        w = api.watch(&initial, "0") => w,
                    };
                    match w {
                        // The server does not know `sendInitialEvents`.
                        Err(kube::Error::Api(s)) if matches!(s.code, 400 | 422) => {
                            tracing::debug!(
                                node = client.name(),
                                "the server does not stream a watch's initial events ({}): listing instead",
                                s.message
                            );
                            streams = false;
                            None
                        }
                        w => Some(w.map(|w| (w, "0".to_owned(), true))),
                    }
                } else {
                    None
                };
                match streamed {
                    Some(w) => w,
                    None => {
                        let lp = ListParams::default().fields(&selector).match_any();
                        let list = tokio::select! {
                            _ = cancel.cancelled() => return,
                            _ = resume.notified() => continue,
                            l = api.list(&lp) => l,
                        };
                        match list {
                            Ok(list) => {
                                for n in list.items {
                                    if !send(WatchEvent::Applied(to_value(n), true)) {
                                        return;
                                    }
                                }
                                let at = list.metadata.resource_version.clone();
                                if !send(WatchEvent::Listed(at)) {
                                    return;
                                }
                                match list.metadata.resource_version {
                                    Some(v) if !v.is_empty() => from = From::Version(v),
                                    _ => {
                                        tracing::debug!(
                                            node = client.name(),
                                            "the list of the node has no resourceVersion"
                                        );
                                        if !failed(&send, &resume, &cancel).await {
                                            return;
                                        }
                                    }
                                }
                                continue;
                            }
                            Err(e) => Err(e),
                        }
                    }
                }
            }
        };
        let (stream, mut at, mut initial) = match opened {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!(node = client.name(), "watching the node failed: {e}");
                if !failed(&send, &resume, &cancel).await {
                    return;
                }
                continue;
            }
        };
        if !initial && !send(WatchEvent::Resumed) {
            return;
        }
        futures::pin_mut!(stream);
        let ended = loop {
            let next = tokio::select! {
                _ = cancel.cancelled() => return,
                // Asked to start again: from the node as it is now.
                _ = resume.notified() => break Ended::Asked,
                n = tokio::time::timeout(WATCH_IDLE, stream.next()) => n,
            };
            let e = match next {
                Ok(Some(e)) => e,
                // The server's timeout, or silence: go on from here.
                Ok(None) | Err(_) if !initial => break Ended::Timeout,
                Ok(None) | Err(_) => break Ended::Failed,
            };
            let sent = match e {
                Ok(W::Added(n) | W::Modified(n)) => {
                    if let Some(v) = n.metadata.resource_version.clone() {
                        at = v;
                    }
                    send(WatchEvent::Applied(to_value(n), initial))
                }
                Ok(W::Deleted(n)) => {
                    if let Some(v) = n.metadata.resource_version.clone() {
                        at = v;
                    }
                    initial || send(WatchEvent::Deleted)
                }
                Ok(W::Bookmark(b)) => {
                    at = b.metadata.resource_version;
                    if initial && b.metadata.annotations.contains_key(INITIAL_EVENTS_END) {
                        initial = false;
                        send(WatchEvent::Listed(Some(at.clone())))
                    } else {
                        true
                    }
                }
                // Too old: from the node as it is now, at once.
                Ok(W::Error(s)) if s.code == 410 => break Ended::Gone,
                Ok(W::Error(s)) => {
                    tracing::debug!(node = client.name(), "the watch of the node ended: {s:?}");
                    break Ended::Failed;
                }
                Err(e) => {
                    tracing::debug!(node = client.name(), "the watch of the node failed: {e}");
                    break Ended::Failed;
                }
            };
            if !sent {
                return;
            }
        };
        match ended {
            Ended::Timeout => from = From::Version(at),
            Ended::Gone | Ended::Asked => {}
            Ended::Failed => {
                if !failed(&send, &resume, &cancel).await {
                    return;
                }
            }
        }
    }
}

/// The annotation of the bookmark that ends a watch's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Why a watch ended.
enum Ended {
    /// At the server's timeout, or silent for too long.
    Timeout,
    /// The server no longer has its resourceVersion.
    Gone,
    /// The state asked for a new start.
    Asked,
    /// It failed.
    Failed,
}

/// The watch failed: says so, and waits until the state resumes it.
/// `false`: the agent is gone.
async fn failed(
    send: &impl Fn(WatchEvent) -> bool,
    resume: &tokio::sync::Notify,
    cancel: &CancellationToken,
) -> bool {
    if !send(WatchEvent::Failed) {
        return false;
    }
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = resume.notified() => true,
    }
}
