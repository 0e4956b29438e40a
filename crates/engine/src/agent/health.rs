//! What the agent says about itself: the failing loops and the
//! [`Snapshot`] that `/readyz` and `/status` read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::config::Config;
use crate::pipeline::PassReport;

/// The last failure of a loop, for `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// Its error class.
    pub class: &'static str,
    /// The error.
    pub message: String,
    /// When the loop started failing.
    pub since: Instant,
}

/// What `/readyz` and `/status` read, published after every step: a copy,
/// so that no reader ever waits on a loop.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The config in force.
    pub cfg: Arc<Config>,
    /// Whether the node was registered in this run.
    pub registered: bool,
    /// Whether the node is found deleted (and not seen since).
    pub node_gone: bool,
    /// When the last status sync succeeded.
    pub last_sync_ok: Option<Instant>,
    /// When the last lease renewal succeeded.
    pub last_lease_ok: Option<Instant>,
    /// The loops failing now.
    pub failing: BTreeMap<&'static str, Failing>,
    /// The report of the last pass of the setters.
    pub last_pass: Option<Arc<PassReport>>,
    /// The node as last seen.
    pub node: Option<Arc<Value>>,
}

impl Snapshot {
    /// `None` when ready to serve; otherwise why not: not registered yet,
    /// the node deleted from outside, no successful status sync in the last
    /// three update periods, or no lease renewal for a lease duration.
    pub fn ready_reason(&self, now: Instant) -> Option<String> {
        if !self.registered {
            return Some("the node is not registered yet".into());
        }
        if self.node_gone {
            return Some(format!(
                "node {:?} was deleted from the API server: nodestatus does not register it again in this run (restart nodestatus to register it, or set reRegisterDeletedNode: true)",
                self.cfg.node_name
            ));
        }
        let failing = |l: &str| {
            self.failing
                .get(l)
                .map(|f| {
                    format!(
                        "; failing since {:?} ago with {}: {}",
                        now.saturating_duration_since(f.since),
                        f.class,
                        f.message
                    )
                })
                .unwrap_or_default()
        };
        let limit = self.cfg.node_status_update_frequency * 3 + Duration::from_secs(5);
        match self.last_sync_ok {
            Some(t) if now.saturating_duration_since(t) <= limit => {}
            Some(t) => {
                return Some(format!(
                    "no successful status sync for {:?}{}",
                    now.saturating_duration_since(t),
                    failing("sync")
                ));
            }
            None => return Some(format!("no successful status sync yet{}", failing("sync"))),
        }
        if !self.cfg.companion {
            let lease = Duration::from_secs(self.cfg.node_lease_duration_seconds as u64);
            if let Some(t) = self.last_lease_ok
                && now.saturating_duration_since(t) > lease
            {
                return Some(format!(
                    "no lease renewal for {:?}{}",
                    now.saturating_duration_since(t),
                    failing("lease")
                ));
            }
        }
        None
    }
}
