//! The few API calls the agent makes, each recorded in [`Traffic`] (method,
//! what, body size, result) so that metrics and tests can count exactly what
//! the engine sends.

use std::sync::Mutex;
use std::time::SystemTime;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::Value;

/// The kinds of request the engine sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestKind {
    /// `POST /api/v1/nodes`.
    CreateNode,
    /// `GET /api/v1/nodes/<name>`.
    GetNode,
    /// `PATCH /api/v1/nodes/<name>/status`.
    PatchStatus,
    /// `GET` of the Lease.
    GetLease,
    /// `POST` of the Lease.
    CreateLease,
    /// `PUT` of the Lease.
    UpdateLease,
    /// `POST` of an Event.
    CreateEvent,
}

impl RequestKind {
    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreateNode => "create-node",
            Self::GetNode => "get-node",
            Self::PatchStatus => "patch-status",
            Self::GetLease => "get-lease",
            Self::CreateLease => "create-lease",
            Self::UpdateLease => "update-lease",
            Self::CreateEvent => "create-event",
        }
    }
}

/// One request the engine sent.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sent {
    /// When.
    #[serde(skip)]
    pub at: SystemTime,
    /// What.
    pub kind: RequestKind,
    /// Body bytes (0 for GET).
    pub body_bytes: usize,
    /// HTTP status, or 0 when no answer came.
    pub status: u16,
}

/// The record of requests sent, bounded to the last 10,000.
#[derive(Default)]
pub struct Traffic {
    sent: Mutex<Vec<Sent>>,
    metrics: std::sync::OnceLock<std::sync::Arc<crate::metrics::Metrics>>,
}

impl std::fmt::Debug for Traffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traffic").finish_non_exhaustive()
    }
}

impl Traffic {
    /// Counts every request in `metrics` too, from now on.
    pub fn attach(&self, metrics: std::sync::Arc<crate::metrics::Metrics>) {
        let _ = self.metrics.set(metrics);
    }

    fn record(&self, kind: RequestKind, body_bytes: usize, status: u16) {
        if let Some(m) = self.metrics.get() {
            m.request(kind.as_str(), status);
        }
        let mut s = self.sent.lock().expect("traffic lock");
        if s.len() >= 10_000 {
            s.drain(..1000);
        }
        s.push(Sent {
            at: SystemTime::now(),
            kind,
            body_bytes,
            status,
        });
    }

    /// A copy of the record.
    pub fn snapshot(&self) -> Vec<Sent> {
        self.sent.lock().expect("traffic lock").clone()
    }
}

/// An API error, reduced to what the loops decide on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status.
    #[error("{kind} failed with HTTP {code} {reason}: {message}")]
    Api {
        /// The request.
        kind: &'static str,
        /// HTTP status code.
        code: u16,
        /// The Status reason (`Forbidden`, `AlreadyExists`, `Conflict`, ...).
        reason: String,
        /// The server's message.
        message: String,
    },
    /// No answer: connection refused, timeout, TLS, ...
    #[error("{kind} failed: {source}")]
    Transport {
        /// The request.
        kind: &'static str,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The answer could not be understood.
    #[error("{kind}: unexpected answer: {message}")]
    Decode {
        /// The request.
        kind: &'static str,
        /// What was wrong.
        message: String,
    },
}

impl Error {
    /// The HTTP status, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether retrying cannot help: the credentials may not do this (a node
    /// identity writing another node, for example).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            Self::Api {
                code: 401 | 403,
                ..
            }
        )
    }
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The API calls for one node.
#[derive(Clone)]
pub struct NodeClient {
    nodes: Api<Node>,
    leases: Api<Lease>,
    events: Api<Event>,
    name: String,
    traffic: std::sync::Arc<Traffic>,
}

impl NodeClient {
    /// Calls for node `name` through `client`.
    pub fn new(client: kube::Client, name: &str, traffic: std::sync::Arc<Traffic>) -> Self {
        Self {
            nodes: Api::all(client.clone()),
            leases: Api::namespaced(client.clone(), "kube-node-lease"),
            events: Api::namespaced(client, "default"),
            name: name.to_owned(),
            traffic,
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The request record.
    pub fn traffic(&self) -> &std::sync::Arc<Traffic> {
        &self.traffic
    }

    fn done<T>(
        &self,
        kind: RequestKind,
        bytes: usize,
        r: std::result::Result<T, kube::Error>,
    ) -> Result<T> {
        match r {
            Ok(v) => {
                self.traffic.record(kind, bytes, 200);
                Ok(v)
            }
            Err(kube::Error::Api(s)) => {
                self.traffic.record(kind, bytes, s.code);
                Err(Error::Api {
                    kind: kind.as_str(),
                    code: s.code,
                    reason: s.reason.clone(),
                    message: s.message.clone(),
                })
            }
            Err(e) => {
                self.traffic.record(kind, bytes, 0);
                Err(Error::Transport {
                    kind: kind.as_str(),
                    source: e,
                })
            }
        }
    }

    fn to_value(kind: RequestKind, n: impl serde::Serialize) -> Result<Value> {
        serde_json::to_value(n).map_err(|e| Error::Decode {
            kind: kind.as_str(),
            message: e.to_string(),
        })
    }

    /// GETs the node; `None` when it does not exist.
    pub async fn get_node(&self) -> Result<Option<Value>> {
        let r = self.nodes.get_opt(&self.name).await;
        let n = self.done(RequestKind::GetNode, 0, r)?;
        n.map(|n| Self::to_value(RequestKind::GetNode, n))
            .transpose()
    }

    /// Creates the node.
    pub async fn create_node(&self, node: &Value) -> Result<Value> {
        let typed: Node = serde_json::from_value(node.clone()).map_err(|e| Error::Decode {
            kind: "create-node",
            message: e.to_string(),
        })?;
        let bytes = serde_json::to_vec(&typed).map(|b| b.len()).unwrap_or(0);
        let r = self.nodes.create(&PostParams::default(), &typed).await;
        Self::to_value(
            RequestKind::CreateNode,
            self.done(RequestKind::CreateNode, bytes, r)?,
        )
    }

    /// Sends a strategic merge patch to `nodes/<name>/status`.
    pub async fn patch_status(&self, patch: &Value) -> Result<Value> {
        let bytes = patch.to_string().len();
        let r = self
            .nodes
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await;
        Self::to_value(
            RequestKind::PatchStatus,
            self.done(RequestKind::PatchStatus, bytes, r)?,
        )
    }

    /// GETs the lease; `None` when missing.
    pub async fn get_lease(&self) -> Result<Option<Lease>> {
        let r = self.leases.get_opt(&self.name).await;
        self.done(RequestKind::GetLease, 0, r)
    }

    /// Creates the lease.
    pub async fn create_lease(&self, lease: &Lease) -> Result<Lease> {
        let bytes = serde_json::to_vec(lease).map(|b| b.len()).unwrap_or(0);
        let r = self.leases.create(&PostParams::default(), lease).await;
        self.done(RequestKind::CreateLease, bytes, r)
    }

    /// PUTs the lease (optimistic: carries its resourceVersion).
    pub async fn update_lease(&self, lease: &Lease) -> Result<Lease> {
        let bytes = serde_json::to_vec(lease).map(|b| b.len()).unwrap_or(0);
        let r = self
            .leases
            .replace(&self.name, &PostParams::default(), lease)
            .await;
        self.done(RequestKind::UpdateLease, bytes, r)
    }

    /// Creates an event.
    pub async fn create_event(&self, event: &Event) -> Result<Event> {
        let bytes = serde_json::to_vec(event).map(|b| b.len()).unwrap_or(0);
        let r = self.events.create(&PostParams::default(), event).await;
        self.done(RequestKind::CreateEvent, bytes, r)
    }
}
