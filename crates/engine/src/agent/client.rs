//! The few API calls the agent makes, each recorded in [`Traffic`] (method,
//! what, body size, result) so that metrics and tests can count exactly what
//! the engine sends.
//!
//! Every call has a deadline, as the kubelet's heartbeat client has one:
//! min(`nodeStatusUpdateFrequency`, `nodeLeaseDuration`), set both on the
//! connection (connect, read and write timeouts) and around the whole call.
//! There is no client-side throttling. [`NodeClient::reset_connections`]
//! drops every pooled connection by building the client anew from its
//! config (the kubelet's `closeAllConns`, kubernetes#93560), so the next
//! try dials a fresh connection instead of waiting on a dead one.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodestatus_model::node::kubelet::ServerVersion;
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
    /// `GET /version`: the server's version, once per registration.
    GetVersion,
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
            Self::GetVersion => "get-version",
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
    metrics: std::sync::OnceLock<Arc<crate::metrics::Metrics>>,
}

impl std::fmt::Debug for Traffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traffic").finish_non_exhaustive()
    }
}

impl Traffic {
    /// Counts every request in `metrics` too, from now on.
    pub fn attach(&self, metrics: Arc<crate::metrics::Metrics>) {
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
    /// No answer: connection refused, timeout, TLS, ... The message carries
    /// the whole cause chain (kube's "client error (SendRequest)" alone does
    /// not say that the connection was refused).
    #[error("{kind} failed: {}", nodestatus_runtime::error_chain(.source))]
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
    /// No answer within the deadline; the connections are reset before the
    /// next try.
    #[error(
        "{kind}: no answer within {after:?} (the deadline of every API call: min(nodeStatusUpdateFrequency, nodeLeaseDuration))"
    )]
    Timeout {
        /// The request.
        kind: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// A new client could not be built from the connection config.
    #[error("cannot build a new API client to reset the connections: {0}")]
    Rebuild(#[source] kube::Error),
}

/// What kind of failure an [`Error`] is: a bounded set, for metric labels,
/// `/readyz` and decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// HTTP 401: the credentials are not accepted (expired or rotated token).
    Unauthorized,
    /// HTTP 403: the credentials may not do this.
    Forbidden,
    /// HTTP 404.
    NotFound,
    /// HTTP 409.
    Conflict,
    /// HTTP 429 or 5xx.
    Server,
    /// Another HTTP status.
    Status,
    /// No answer within the deadline.
    Timeout,
    /// No answer: connection refused or reset, TLS, ...
    Transport,
    /// The answer could not be understood.
    Decode,
}

impl ErrorClass {
    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not-found",
            Self::Conflict => "conflict",
            Self::Server => "server",
            Self::Status => "status",
            Self::Timeout => "timeout",
            Self::Transport => "transport",
            Self::Decode => "decode",
        }
    }
}

impl Error {
    /// The HTTP status, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the credentials are refused (401 or 403). At start, while
    /// registering, that is an identity error; later it is retried.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            Self::Api {
                code: 401 | 403,
                ..
            }
        )
    }

    /// The bounded class of this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Api { code: 401, .. } => ErrorClass::Unauthorized,
            Self::Api { code: 403, .. } => ErrorClass::Forbidden,
            Self::Api { code: 404, .. } => ErrorClass::NotFound,
            Self::Api { code: 409, .. } => ErrorClass::Conflict,
            Self::Api { code, .. } if *code == 429 || *code >= 500 => ErrorClass::Server,
            Self::Api { .. } => ErrorClass::Status,
            Self::Timeout { .. } => ErrorClass::Timeout,
            Self::Transport { .. } | Self::Rebuild(_) => ErrorClass::Transport,
            Self::Decode { .. } => ErrorClass::Decode,
        }
    }
}

/// The deadline of every API call under `cfg`: min(nodeStatusUpdateFrequency,
/// nodeLeaseDurationSeconds), as the kubelet's heartbeat client.
pub fn call_deadline(cfg: &crate::config::Config) -> Duration {
    let lease = Duration::from_secs(cfg.node_lease_duration_seconds.max(1) as u64);
    cfg.node_status_update_frequency.min(lease)
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The API calls for one node.
#[derive(Clone)]
pub struct NodeClient {
    /// The client of the heartbeat calls; replaced by `reset_connections`.
    client: Arc<ArcSwap<kube::Client>>,
    /// The client of the watch, which has no per-call deadline.
    watch: kube::Client,
    /// Where a fresh watch client comes from (no deadlines); `None` for a
    /// client given as is.
    watch_config: Option<Arc<kube::Config>>,
    /// Where a fresh client comes from; `None` for a client given as is
    /// (a test's mock service), whose connections cannot be reset.
    config: Option<Arc<kube::Config>>,
    /// Where a probe's client comes from ([`Self::probe`]): the same as
    /// `config`, or given for a shared client ([`Self::with_probes_from`]).
    probe_config: Option<Arc<kube::Config>>,
    deadline: Duration,
    name: String,
    traffic: Arc<Traffic>,
}

/// The default deadline of a call: the kubelet's default periods (10 s).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

/// The `User-Agent` of every API call: `nodestatus/<version>`.
pub const USER_AGENT: &str = concat!("nodestatus/", env!("CARGO_PKG_VERSION"));

impl NodeClient {
    /// Calls for node `name` through `client`, with the default deadline.
    /// Its connections cannot be reset (see [`Self::from_config`]).
    pub fn new(client: kube::Client, name: &str, traffic: Arc<Traffic>) -> Self {
        Self {
            client: Arc::new(ArcSwap::from_pointee(client.clone())),
            watch: client,
            watch_config: None,
            config: None,
            probe_config: None,
            deadline: DEFAULT_DEADLINE,
            name: name.to_owned(),
            traffic,
        }
    }

    /// Calls for node `name` through clients built from `config`, each call
    /// bounded by `deadline` (connect, read and write timeouts, and the whole
    /// call). [`Self::reset_connections`] builds the client anew.
    pub fn from_config(
        mut config: kube::Config,
        name: &str,
        traffic: Arc<Traffic>,
        deadline: Duration,
    ) -> Result<Self> {
        // Named in the apiserver's audit log, as the kubelet is.
        if !config
            .headers
            .iter()
            .any(|(k, _)| k == http::header::USER_AGENT)
        {
            config.headers.push((
                http::header::USER_AGENT,
                http::HeaderValue::from_static(USER_AGENT),
            ));
        }
        let watch = kube::Client::try_from(config.clone()).map_err(Error::Rebuild)?;
        let watch_config = Some(Arc::new(config.clone()));
        let mut heartbeat = config;
        heartbeat.connect_timeout = Some(deadline);
        heartbeat.read_timeout = Some(deadline);
        heartbeat.write_timeout = Some(deadline);
        let client = kube::Client::try_from(heartbeat.clone()).map_err(Error::Rebuild)?;
        Ok(Self {
            client: Arc::new(ArcSwap::from_pointee(client)),
            watch,
            watch_config,
            probe_config: Some(Arc::new(heartbeat.clone())),
            config: Some(Arc::new(heartbeat)),
            deadline,
            name: name.to_owned(),
            traffic,
        })
    }

    /// A client given as is (shared by the nodes of `simulate`) whose
    /// probes still dial their own connections, from `config`
    /// ([`Self::probe`]): each simulated node probes a server that does
    /// not answer as a real one does.
    pub fn with_probes_from(mut self, config: Arc<kube::Config>) -> Self {
        self.probe_config = Some(config);
        self
    }

    /// The same client with another deadline for each call.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The deadline of each call.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Drops every pooled connection: the next call dials anew (the
    /// kubelet's `closeAllConns` after a failed heartbeat). Returns whether
    /// the connections were reset (not for a client given as is).
    pub fn reset_connections(&self) -> Result<bool> {
        let Some(config) = &self.config else {
            return Ok(false);
        };
        let fresh = kube::Client::try_from((**config).clone()).map_err(Error::Rebuild)?;
        self.client.store(Arc::new(fresh));
        Ok(true)
    }

    /// The same calls on a new client whose connections must be made
    /// (TCP and TLS) within `connect_within`: a probe of a server that did
    /// not answer ([`super::reach`]). A restarting apiserver accepts
    /// connections well before it serves them; a probe gives up on one
    /// that is not served in time instead of waiting there with the rest
    /// of the fleet. A client given as is is reused.
    pub fn probe(&self, connect_within: Duration) -> Self {
        let Some(config) = &self.probe_config else {
            return self.clone();
        };
        let mut config = (**config).clone();
        config.connect_timeout = Some(connect_within.min(self.deadline));
        match kube::Client::try_from(config) {
            Ok(c) => Self {
                client: Arc::new(ArcSwap::from_pointee(c)),
                ..self.clone()
            },
            Err(e) => {
                tracing::warn!("{}", Error::Rebuild(e));
                self.clone()
            }
        }
    }

    /// A client for a (re)started watch on the node: no per-call deadline,
    /// and its own new connections, so a watch restarted after a hung
    /// connection dials anew (a client given as is is reused).
    pub fn watch_client(&self) -> kube::Client {
        self.watch_config
            .as_ref()
            .and_then(|c| kube::Client::try_from((**c).clone()).ok())
            .unwrap_or_else(|| self.watch.clone())
    }

    fn nodes(&self) -> Api<Node> {
        Api::all((**self.client.load()).clone())
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced((**self.client.load()).clone(), "kube-node-lease")
    }

    fn events(&self) -> Api<Event> {
        Api::namespaced((**self.client.load()).clone(), "default")
    }

    /// Runs `call` with the deadline and records it.
    async fn call<T>(
        &self,
        kind: RequestKind,
        bytes: usize,
        call: impl std::future::Future<Output = std::result::Result<T, kube::Error>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.deadline, call).await {
            Ok(r) => self.done(kind, bytes, r),
            Err(_) => {
                self.traffic.record(kind, bytes, 0);
                Err(Error::Timeout {
                    kind: kind.as_str(),
                    after: self.deadline,
                })
            }
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The request record.
    pub fn traffic(&self) -> &Arc<Traffic> {
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

    /// GETs `/version`: the server's major and minor version.
    pub async fn server_version(&self) -> Result<ServerVersion> {
        let client = (**self.client.load()).clone();
        let info = self
            .call(RequestKind::GetVersion, 0, client.apiserver_version())
            .await?;
        ServerVersion::parse(&info.major, &info.minor).ok_or_else(|| Error::Decode {
            kind: RequestKind::GetVersion.as_str(),
            message: format!(
                "the server's version is {:?}.{:?} ({}), not numbers",
                info.major, info.minor, info.git_version
            ),
        })
    }

    /// GETs the node; `None` when it does not exist.
    pub async fn get_node(&self) -> Result<Option<Value>> {
        let api = self.nodes();
        let n = self
            .call(RequestKind::GetNode, 0, api.get_opt(&self.name))
            .await?;
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
        let api = self.nodes();
        let pp = PostParams::default();
        let created = self
            .call(RequestKind::CreateNode, bytes, api.create(&pp, &typed))
            .await?;
        Self::to_value(RequestKind::CreateNode, created)
    }

    /// Sends a strategic merge patch, already serialized, to
    /// `nodes/<name>/status`.
    pub async fn patch_status(&self, patch: &serde_json::value::RawValue) -> Result<Value> {
        let bytes = patch.get().len();
        let api = self.nodes();
        let pp = PatchParams::default();
        let p = Patch::Strategic(patch);
        let updated = self
            .call(
                RequestKind::PatchStatus,
                bytes,
                api.patch_status(&self.name, &pp, &p),
            )
            .await?;
        Self::to_value(RequestKind::PatchStatus, updated)
    }

    /// GETs the lease; `None` when missing.
    pub async fn get_lease(&self) -> Result<Option<Lease>> {
        let api = self.leases();
        self.call(RequestKind::GetLease, 0, api.get_opt(&self.name))
            .await
    }

    /// Creates the lease.
    pub async fn create_lease(&self, lease: &Lease) -> Result<Lease> {
        let bytes = serde_json::to_vec(lease).map(|b| b.len()).unwrap_or(0);
        let api = self.leases();
        let pp = PostParams::default();
        self.call(RequestKind::CreateLease, bytes, api.create(&pp, lease))
            .await
    }

    /// PUTs the lease (optimistic: carries its resourceVersion).
    pub async fn update_lease(&self, lease: &Lease) -> Result<Lease> {
        let bytes = serde_json::to_vec(lease).map(|b| b.len()).unwrap_or(0);
        let api = self.leases();
        let pp = PostParams::default();
        self.call(
            RequestKind::UpdateLease,
            bytes,
            api.replace(&self.name, &pp, lease),
        )
        .await
    }

    /// Creates an event.
    pub async fn create_event(&self, event: &Event) -> Result<Event> {
        let bytes = serde_json::to_vec(event).map(|b| b.len()).unwrap_or(0);
        let api = self.events();
        let pp = PostParams::default();
        self.call(RequestKind::CreateEvent, bytes, api.create(&pp, event))
            .await
    }
}

#[cfg(test)]
mod cause_tests {
    use super::*;

    /// A client for node `n` on plain HTTP at `127.0.0.1:port`.
    fn client_on(port: u16) -> NodeClient {
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        NodeClient::from_config(
            config,
            "n",
            Arc::new(Traffic::default()),
            Duration::from_secs(5),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn a_transport_error_names_its_underlying_cause() {
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = client_on(port);
        let err = client.get_node().await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::Transport { .. }), "{err:?}");
        assert!(text.contains("Connection refused"), "{text}");
    }

    #[tokio::test]
    async fn every_call_names_nodestatus_as_its_user_agent() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            let _ = conn
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await;
            String::from_utf8_lossy(&head).to_lowercase()
        });
        let client = client_on(port);
        let _ = client.get_node().await;
        let head = server.await.unwrap();
        assert!(
            head.contains(&format!("user-agent: {USER_AGENT}")),
            "{head}"
        );
    }
}
