//! A local etcd and kube-apiserver on loopback: the embedded default of
//! `nodestatus run` when no kubeconfig is given, and the real API server the
//! integration tests run against.
//!
//! The apiserver runs with `--authorization-mode=Node,RBAC` and the
//! `NodeRestriction` admission plugin, and a static token file with an admin
//! (`system:masters`) and one `system:node:<name>` identity per node, so a
//! node identity gets exactly a real kubelet's rights. It serves a
//! certificate signed by a CA of the cluster's own (`certs/ca.crt` in its
//! directory, made once with openssl and kept across restarts), which every
//! kubeconfig it writes names as `certificate-authority-data`, as a real
//! cluster's kubeconfig does.
//!
//! [`Extras`] adds what a fault test needs around them: the apiserver's
//! audit log of every request made by a node identity, and
//! kube-controller-manager running the node lifecycle controller (which
//! sets a silent node's conditions to `Unknown` after its grace period) and
//! the root CA publisher (the `kube-root-ca.crt` ConfigMap in every
//! namespace, as on a real cluster).
//! [`NodeParts`] adds what a real kubelet node needs (`tests/realnode`):
//! more controllers (daemonset, serviceaccount, ...), kube-scheduler, and
//! the bodies of the node identities' Node writes in the audit log.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod detached;
pub use detached::STATE_FILE;

/// Errors starting the cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A binary is missing.
    #[error(
        "{what} not found at {path:?}: run scripts/ensure-apiserver.sh (it builds Kubernetes {version} and its etcd from their Go modules into ~/.cache/nodestatus; NODESTATUS_K8S_VERSION names another release)",
        version = kubernetes_version()
    )]
    Missing {
        /// Which binary.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A file or process operation failed.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// openssl failed to make a key or certificate.
    #[error("openssl {what} failed ({status}): {stderr}")]
    Openssl {
        /// What it was making.
        what: &'static str,
        /// How it exited.
        status: std::process::ExitStatus,
        /// What it said.
        stderr: String,
    },
    /// The CA file is not PEM.
    #[error("{path} holds no PEM certificate")]
    NotPem {
        /// The file.
        path: String,
    },
    /// The apiserver did not become ready.
    #[error("kube-apiserver did not become ready within {0:?}; its log is {1}")]
    NotReady(Duration, String),
    /// kube-apiserver exited at start because another process holds its
    /// port (taken between the free port's probe and its bind).
    #[error(
        "kube-apiserver exited at start: port {port} is in use by another process; its log is {log}"
    )]
    PortInUse {
        /// The port.
        port: u16,
        /// Its log.
        log: String,
    },
    /// kube-controller-manager exited right after its start.
    #[error("kube-controller-manager exited at start ({status}); its log is {log}")]
    ControllerManagerExited {
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its log file.
        log: String,
    },
    /// kube-scheduler exited right after its start.
    #[error("kube-scheduler exited at start ({status}); its log is {log}")]
    SchedulerExited {
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its log file.
        log: String,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The Kubernetes release that `scripts/ensure-apiserver.sh` builds and
/// caches by default, and that the embedded cluster and every real test run.
pub const KUBERNETES_VERSION: &str = "1.37.2";

/// The node lifecycle controller's own default `--node-monitor-grace-period`
/// since Kubernetes 1.32 (it was 40 s before).
pub const DEFAULT_NODE_MONITOR_GRACE: Duration = Duration::from_secs(50);

/// The Kubernetes release of the embedded cluster and the tests:
/// `$NODESTATUS_K8S_VERSION` (a release of the version matrix,
/// scripts/test-matrix.sh, built by `NODESTATUS_K8S_VERSION=<v>
/// scripts/ensure-apiserver.sh`), else [`KUBERNETES_VERSION`].
pub fn kubernetes_version() -> String {
    std::env::var("NODESTATUS_K8S_VERSION")
        .ok()
        .map(|v| v.trim().trim_start_matches('v').to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| KUBERNETES_VERSION.to_owned())
}

/// Where the kube-apiserver binary is: `$NODESTATUS_APISERVER`, else the
/// cache `scripts/ensure-apiserver.sh` fills
/// (`~/.cache/nodestatus/k8s-<kubernetes_version()>/bin`).
pub fn apiserver_binary() -> PathBuf {
    std::env::var_os("NODESTATUS_APISERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("NODESTATUS_CACHE")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nodestatus"))
                })
                .unwrap_or_else(|| PathBuf::from("/var/cache/nodestatus"))
                .join(format!("k8s-{}/bin/kube-apiserver", kubernetes_version()))
        })
}

/// Where the etcd binary is: `$NODESTATUS_ETCD`, else next to
/// [`apiserver_binary`] (built at the version Kubernetes' go.mod requires),
/// else `etcd` on `PATH`.
pub fn etcd_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("NODESTATUS_ETCD") {
        return PathBuf::from(p);
    }
    let beside = apiserver_binary().with_file_name("etcd");
    if beside.exists() {
        beside
    } else {
        PathBuf::from("etcd")
    }
}

/// Where the kube-controller-manager binary is: `$NODESTATUS_CONTROLLER_MANAGER`,
/// else next to [`apiserver_binary`] (built from the same source tree).
pub fn controller_manager_binary() -> PathBuf {
    std::env::var_os("NODESTATUS_CONTROLLER_MANAGER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let api = apiserver_binary();
            api.with_file_name("kube-controller-manager")
        })
}

/// What to run beside etcd and kube-apiserver.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Write an audit log of every request of the `system:nodes` group
    /// (level Metadata, one JSON event a line) to `<dir>/audit.log`.
    pub audit_log: bool,
    /// Start kube-controller-manager with the node lifecycle controller,
    /// with this `--node-monitor-grace-period`, and the root CA publisher.
    pub node_lifecycle_grace: Option<Duration>,
    /// kube-apiserver's `--feature-gates` (`WatchList=false`: a server
    /// that does not stream a watch's initial events, as before 1.34).
    pub feature_gates: Option<String>,
}

/// What a real node (a kubelet with containerd, `tests/realnode`) needs
/// beside [`Extras`]: the controllers and the scheduler that place and run
/// pods, and the bodies of the Node writes in the audit log.
#[derive(Debug, Clone, Default)]
pub struct NodeParts {
    /// More controllers for that kube-controller-manager (it starts only
    /// with [`Extras::node_lifecycle_grace`]), e.g. `daemonset`,
    /// `serviceaccount`, `serviceaccount-token`: what a real node's pods
    /// need. With any, it signs service-account tokens with the apiserver's
    /// key.
    pub more_controllers: Vec<&'static str>,
    /// Start kube-scheduler (as the admin, without leader election or
    /// serving ports).
    pub scheduler: bool,
    /// With [`Extras::audit_log`]: log the node identities' writes to Nodes
    /// (create, update, patch, of the node and its status) at level
    /// `Request`, with their bodies, so that a test can tell which fields
    /// each writer changed (the user agent tells a kubelet from nodestatus
    /// when both use the node's identity).
    pub audit_node_writes: bool,
}

/// The audit policy of [`Extras::audit_log`]: the node identities' requests
/// and the simulator's ([`SIMULATOR_USER`], and [`KWOK_USER`] in the same
/// group; their writes of nodes and leases with their bodies, for the
/// fleet's byte counts), nothing else.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  userGroups: [\"nodestatus:simulators\"]
  verbs: [create, update, patch]
  resources: [{group: \"\", resources: [nodes, nodes/status]}, {group: coordination.k8s.io, resources: [leases]}]
- level: Metadata
  userGroups: [\"system:nodes\", \"nodestatus:simulators\"]
- level: None
";

/// [`AUDIT_POLICY`] with the node identities' Node writes at level `Request`
/// ([`NodeParts::audit_node_writes`]).
const AUDIT_POLICY_NODE_WRITES: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  userGroups: [\"system:nodes\", \"nodestatus:simulators\"]
  verbs: [create, update, patch]
  resources: [{group: \"\", resources: [nodes, nodes/status]}]
- level: Metadata
  userGroups: [\"system:nodes\"]
- level: None
";

/// The identity of `nodestatus simulate` that every cluster knows: no
/// rights until RBAC grants them (deploy/kubernetes/simulate/rbac.yaml
/// binds its group); audited with the node identities.
pub const SIMULATOR_USER: &str = "nodestatus-simulator";
/// [`SIMULATOR_USER`]'s group.
pub const SIMULATOR_GROUP: &str = "nodestatus:simulators";
/// [`SIMULATOR_USER`]'s static token.
pub const SIMULATOR_TOKEN: &str = "simulator-token";

/// The identity of kwok's controller, the fleet bench's peer
/// (`tests/all/fleet_peer.rs`): a user of its own, so that the audit log
/// tells its requests from the simulator's, in [`SIMULATOR_GROUP`], so that
/// the same audit policy logs them the same way. Its rights are kwok's own
/// ClusterRole, which the bench binds to this user, and, through the group,
/// whatever a cluster grants the simulator.
pub const KWOK_USER: &str = "kwok-controller";
/// [`KWOK_USER`]'s static token.
pub const KWOK_TOKEN: &str = "kwok-token";

/// Where the kube-scheduler binary is: `$NODESTATUS_SCHEDULER`, else next to
/// [`apiserver_binary`] (built from the same source tree).
pub fn scheduler_binary() -> PathBuf {
    std::env::var_os("NODESTATUS_SCHEDULER")
        .map(PathBuf::from)
        .unwrap_or_else(|| apiserver_binary().with_file_name("kube-scheduler"))
}

/// Whether what `log` holds from byte `from` on says its listener's
/// address was in use (Go's `bind: address already in use`).
fn log_says_port_in_use(log: &Path, from: u64) -> bool {
    std::fs::read(log).is_ok_and(|bytes| {
        let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
        String::from_utf8_lossy(&bytes[from..]).contains("address already in use")
    })
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(io("binding a free port"))?;
    Ok(l.local_addr().map_err(io("reading a bound port"))?.port())
}

/// A running etcd and kube-apiserver.
pub struct EmbeddedApiserver {
    dir: PathBuf,
    die_with_parent: bool,
    /// Each process in a session of its own ([`EmbeddedApiserver::start_or_attach`]).
    own_session: bool,
    remove_dir: bool,
    etcd: Option<Child>,
    apiserver: Option<Child>,
    controller_manager: Option<Child>,
    scheduler: Option<Child>,
    extras: Extras,
    parts: NodeParts,
    etcd_url: String,
    secure_port: u16,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// The `system:masters` token.
    pub admin_token: String,
    /// The cluster's CA certificate ([`CA_FILE`]), PEM.
    ca_pem: String,
}

impl EmbeddedApiserver {
    /// Starts etcd and kube-apiserver with their state in `dir`, with a node
    /// identity for each of `nodes`. `remove_dir` deletes `dir` on drop.
    pub async fn start(dir: &Path, nodes: &[&str], remove_dir: bool) -> Result<Self> {
        Self::start_with(dir, nodes, remove_dir, false).await
    }

    /// Like [`EmbeddedApiserver::start`]; with `die_with_parent`, the processes
    /// are killed when the thread that started them ends (tests use it so
    /// that no server outlives a test binary).
    pub async fn start_with(
        dir: &Path,
        nodes: &[&str],
        remove_dir: bool,
        die_with_parent: bool,
    ) -> Result<Self> {
        Self::start_with_extras(dir, nodes, remove_dir, die_with_parent, Extras::default()).await
    }

    /// Like [`EmbeddedApiserver::start_with`], with the [`Extras`] asked for.
    pub async fn start_with_extras(
        dir: &Path,
        nodes: &[&str],
        remove_dir: bool,
        die_with_parent: bool,
        extras: Extras,
    ) -> Result<Self> {
        Self::start_with_parts(
            dir,
            nodes,
            remove_dir,
            die_with_parent,
            extras,
            NodeParts::default(),
        )
        .await
    }

    /// Like [`EmbeddedApiserver::start_with_extras`], with the [`NodeParts`] a
    /// real node needs.
    pub async fn start_with_parts(
        dir: &Path,
        nodes: &[&str],
        remove_dir: bool,
        die_with_parent: bool,
        extras: Extras,
        parts: NodeParts,
    ) -> Result<Self> {
        Self::start_inner(
            dir,
            nodes,
            remove_dir,
            die_with_parent,
            false,
            extras,
            parts,
        )
        .await
    }

    async fn start_inner(
        dir: &Path,
        nodes: &[&str],
        remove_dir: bool,
        die_with_parent: bool,
        own_session: bool,
        extras: Extras,
        parts: NodeParts,
    ) -> Result<Self> {
        let apiserver = apiserver_binary();
        if !apiserver.exists() {
            return Err(Error::Missing {
                what: "kube-apiserver",
                path: apiserver,
            });
        }
        let controller_manager = controller_manager_binary();
        if extras.node_lifecycle_grace.is_some() && !controller_manager.exists() {
            return Err(Error::Missing {
                what: "kube-controller-manager",
                path: controller_manager,
            });
        }
        if parts.scheduler && !scheduler_binary().exists() {
            return Err(Error::Missing {
                what: "kube-scheduler",
                path: scheduler_binary(),
            });
        }
        std::fs::create_dir_all(dir.join("certs"))
            .map_err(io(format!("creating {}", dir.display())))?;
        let sa_key = dir.join("sa.key");
        if !sa_key.exists() {
            openssl(
                "genrsa (the service-account key)",
                dir,
                &["genrsa", "-out", "sa.key", "2048"],
            )?;
        }
        let ca_pem = ensure_pki(&dir.join("certs"))?;
        let admin_token = "admin-token".to_owned();
        let mut tokens = format!(
            "{admin_token},admin,admin,\"system:masters\"\n{SIMULATOR_TOKEN},{SIMULATOR_USER},{SIMULATOR_USER},\"{SIMULATOR_GROUP}\"\n{KWOK_TOKEN},{KWOK_USER},{KWOK_USER},\"{SIMULATOR_GROUP}\"\n"
        );
        for n in nodes {
            tokens.push_str(&format!(
                "{},system:node:{n},node-{n},\"system:nodes\"\n",
                node_token(n)
            ));
        }
        std::fs::write(dir.join("tokens.csv"), tokens).map_err(io("writing tokens.csv"))?;

        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_log =
            std::fs::File::create(dir.join("etcd.log")).map_err(io("creating etcd.log"))?;
        let etcd_bin = etcd_binary();
        let mut etcd_cmd = Command::new(&etcd_bin);
        if die_with_parent {
            kill_with_parent(&mut etcd_cmd);
        }
        if own_session {
            new_session(&mut etcd_cmd);
        }
        let etcd = etcd_cmd
            .arg("--data-dir")
            .arg(dir.join("etcd"))
            .args([
                "--listen-client-urls",
                &etcd_url,
                "--advertise-client-urls",
                &etcd_url,
            ])
            .args([
                "--listen-peer-urls",
                &format!("http://127.0.0.1:{peer_port}"),
            ])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer_port}"),
            ])
            .args([
                "--initial-cluster",
                &format!("default=http://127.0.0.1:{peer_port}"),
            ])
            .stdout(Stdio::null())
            .stderr(etcd_log)
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::Missing {
                    what: "etcd",
                    path: etcd_bin.clone(),
                },
                _ => Error::Io {
                    context: "starting etcd".into(),
                    source: e,
                },
            })?;
        let mut cluster = Self {
            dir: dir.to_owned(),
            die_with_parent,
            own_session,
            remove_dir,
            etcd: Some(etcd),
            apiserver: None,
            controller_manager: None,
            scheduler: None,
            extras,
            parts,
            etcd_url,
            secure_port: free_port()?,
            server: String::new(),
            admin_token,
            ca_pem,
        };
        cluster.server = format!("https://127.0.0.1:{}", cluster.secure_port);
        cluster.start_apiserver_on_a_free_port().await?;
        if let Some(grace) = cluster.extras.node_lifecycle_grace {
            cluster.start_controller_manager(grace).await?;
        }
        if cluster.parts.scheduler {
            cluster.start_scheduler().await?;
        }
        Ok(cluster)
    }

    /// Starts kube-controller-manager with the node lifecycle controller
    /// only, as the admin, without leader election or serving ports.
    async fn start_controller_manager(&mut self, grace: Duration) -> Result<()> {
        let kubeconfig = self.write_admin_kubeconfig()?;
        let log_path = self.dir.join("controller-manager.log");
        let log =
            std::fs::File::create(&log_path).map_err(io("creating controller-manager.log"))?;
        let mut cmd = Command::new(controller_manager_binary());
        if self.die_with_parent {
            kill_with_parent(&mut cmd);
        }
        if self.own_session {
            new_session(&mut cmd);
        }
        // The node lifecycle controller, and the root CA publisher: the
        // `kube-root-ca.crt` ConfigMap in every namespace, as a real
        // cluster has it.
        let mut controllers = vec!["nodelifecycle", "root-ca-cert-publisher"];
        for c in &self.parts.more_controllers {
            if !controllers.contains(c) {
                controllers.push(c);
            }
        }
        if !self.parts.more_controllers.is_empty() {
            cmd.arg(format!(
                "--service-account-private-key-file={}",
                self.dir.join("sa.key").display()
            ));
        }
        let mut child = cmd
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--controllers={}", controllers.join(",")))
            .arg(format!("--root-ca-file={}", self.ca_file().display()))
            .arg("--leader-elect=false")
            .arg(format!("--node-monitor-grace-period={}s", grace.as_secs()))
            .arg("--node-monitor-period=2s")
            // No serving port: several clusters may run on one machine.
            .arg("--secure-port=0")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io("starting kube-controller-manager"))?;
        // It has no port to probe: wait until it says the controller runs,
        // and fail only if it exits.
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(Error::ControllerManagerExited {
                    status,
                    log: log_path.display().to_string(),
                });
            }
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            // The node lifecycle controller's own first line when it runs.
            if text.contains("Starting node controller") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.controller_manager = Some(child);
        Ok(())
    }

    /// Starts kube-scheduler as the admin, without leader election or
    /// serving ports; fails if it exits in its first 2 seconds.
    async fn start_scheduler(&mut self) -> Result<()> {
        let kubeconfig = self.write_admin_kubeconfig()?;
        let log_path = self.dir.join("scheduler.log");
        let log = std::fs::File::create(&log_path).map_err(io("creating scheduler.log"))?;
        let mut cmd = Command::new(scheduler_binary());
        if self.die_with_parent {
            kill_with_parent(&mut cmd);
        }
        if self.own_session {
            new_session(&mut cmd);
        }
        let mut child = cmd
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--secure-port=0")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io("starting kube-scheduler"))?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::SchedulerExited {
                status,
                log: log_path.display().to_string(),
            });
        }
        self.scheduler = Some(child);
        Ok(())
    }

    /// The audit log, when [`Extras::audit_log`] is on.
    pub fn audit_log_path(&self) -> Option<PathBuf> {
        self.extras.audit_log.then(|| self.dir.join("audit.log"))
    }

    /// Starts kube-apiserver as [`start_apiserver`](Self::start_apiserver)
    /// does, on another free port when its own is taken: a free port is
    /// only free when probed, and another process (a test beside this one)
    /// may bind it before kube-apiserver does. Up to five ports are tried.
    /// The cluster's [`server`](Self::server) then names the new one.
    pub async fn start_apiserver_on_a_free_port(&mut self) -> Result<()> {
        let mut tries = 1;
        loop {
            match self.start_apiserver().await {
                Err(Error::PortInUse { .. }) if tries < 5 => {
                    tries += 1;
                    self.secure_port = free_port()?;
                    self.server = format!("https://127.0.0.1:{}", self.secure_port);
                }
                r => return r,
            }
        }
    }

    /// Starts (or restarts) kube-apiserver on the same port and waits until
    /// `/readyz` answers `ok`.
    pub async fn start_apiserver(&mut self) -> Result<()> {
        let log_path = self.dir.join("apiserver.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io("creating apiserver.log"))?;
        // What this start writes begins here (a restart appends).
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let d = &self.dir;
        let mut cmd = Command::new(apiserver_binary());
        if self.die_with_parent {
            kill_with_parent(&mut cmd);
        }
        if self.own_session {
            new_session(&mut cmd);
        }
        if let Some(gates) = &self.extras.feature_gates {
            cmd.arg(format!("--feature-gates={gates}"));
        }
        if let Some(audit) = self.audit_log_path() {
            let policy = d.join("audit-policy.yaml");
            let text = if self.parts.audit_node_writes {
                AUDIT_POLICY_NODE_WRITES
            } else {
                AUDIT_POLICY
            };
            std::fs::write(&policy, text).map_err(io("writing audit-policy.yaml"))?;
            // One file, never rotated (the default rotates at 100 MB, which
            // a fleet of 5,000 fills in minutes: its figures read one file).
            cmd.arg(format!("--audit-policy-file={}", policy.display()))
                .arg(format!("--audit-log-path={}", audit.display()))
                .arg("--audit-log-maxsize=1000000");
        }
        let child = cmd
            .arg(format!("--etcd-servers={}", self.etcd_url))
            .arg(format!("--secure-port={}", self.secure_port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!(
                "--tls-cert-file={}",
                d.join("certs").join(SERVING_CERT).display()
            ))
            .arg(format!(
                "--tls-private-key-file={}",
                d.join("certs").join(SERVING_KEY).display()
            ))
            .arg(format!(
                "--token-auth-file={}",
                d.join("tokens.csv").display()
            ))
            .arg("--authorization-mode=Node,RBAC")
            .arg("--enable-admission-plugins=NodeRestriction")
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            .arg(format!(
                "--service-account-key-file={}",
                d.join("sa.key").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                d.join("sa.key").display()
            ))
            .arg("--service-cluster-ip-range=10.96.0.0/16")
            .arg("--event-ttl=1h")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io("starting kube-apiserver"))?;
        self.apiserver = Some(child);
        let started = Instant::now();
        let limit = Duration::from_secs(90);
        let client = self.admin_client()?;
        while started.elapsed() < limit {
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("a valid request");
            if let Ok(text) = client.request_text(req).await
                && text.trim() == "ok"
            {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.apiserver.as_mut().map(Child::try_wait) {
                if log_says_port_in_use(&log_path, log_start) {
                    return Err(Error::PortInUse {
                        port: self.secure_port,
                        log: log_path.display().to_string(),
                    });
                }
                return Err(Error::NotReady(
                    started.elapsed(),
                    format!("{} (it exited: {status})", log_path.display()),
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(Error::NotReady(limit, log_path.display().to_string()))
    }

    /// Stops kube-apiserver (etcd keeps running).
    pub fn stop_apiserver(&mut self) {
        if let Some(mut c) = self.apiserver.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A kubeconfig for `token`, naming the cluster's CA as
    /// `certificate-authority-data` (self-contained, as a real cluster's
    /// admin kubeconfig).
    pub fn kubeconfig_yaml(&self, user: &str, token: &str) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: {user}\n  context:\n    cluster: local\n    user: {user}\ncurrent-context: {user}\n",
            self.server
        )
    }

    /// The cluster's CA certificate (PEM): what its kubeconfigs name, what
    /// signs the apiserver's serving certificate, and what the
    /// `kube-root-ca.crt` ConfigMaps hold.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("certs").join(CA_FILE)
    }

    /// Writes a kubeconfig for node `name`'s identity and returns its path.
    pub fn write_node_kubeconfig(&self, name: &str) -> Result<PathBuf> {
        let path = self.dir.join(format!("kubeconfig-{name}"));
        std::fs::write(
            &path,
            self.kubeconfig_yaml(&format!("system:node:{name}"), &node_token(name)),
        )
        .map_err(io("writing a kubeconfig"))?;
        Ok(path)
    }

    /// Writes the admin kubeconfig and returns its path.
    pub fn write_admin_kubeconfig(&self) -> Result<PathBuf> {
        let path = self.dir.join("kubeconfig-admin");
        std::fs::write(&path, self.kubeconfig_yaml("admin", &self.admin_token))
            .map_err(io("writing a kubeconfig"))?;
        Ok(path)
    }

    /// A client with `token` that trusts the cluster's CA only.
    pub fn client_for(&self, token: &str) -> Result<kube::Client> {
        let mut config = kube::Config::new(self.server.parse().expect("a valid URL"));
        config.root_cert = Some(vec![pem_der(&self.ca_pem).ok_or_else(|| {
            Error::NotPem {
                path: self.ca_file().display().to_string(),
            }
        })?]);
        config.auth_info.token = Some(token.to_owned().into());
        config.read_timeout = Some(Duration::from_secs(10));
        config.connect_timeout = Some(Duration::from_secs(5));
        kube::Client::try_from(config).map_err(|e| Error::Io {
            context: "building a client".into(),
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// The admin's client.
    pub fn admin_client(&self) -> Result<kube::Client> {
        self.client_for(&self.admin_token)
    }

    /// Node `name`'s client.
    pub fn node_client(&self, name: &str) -> Result<kube::Client> {
        self.client_for(&node_token(name))
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The cluster's CA certificate in its `certs/` folder.
pub const CA_FILE: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
/// The apiserver's serving certificate and key, signed by [`CA_FILE`].
const SERVING_CERT: &str = "serving.crt";
const SERVING_KEY: &str = "serving.key";

/// openssl's extensions for the CA and the serving certificate (the names
/// a client reaches this loopback apiserver by, and those of the
/// `kubernetes` Service in the apiserver's service range).
const OPENSSL_CNF: &str = "[req]
distinguished_name = dn
prompt = no
[dn]
CN = nodestatus-embedded-ca
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[serving]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
authorityKeyIdentifier = keyid
";

/// Runs `openssl ARGS` in `dir` for `what`; its stderr in the error.
fn openssl(what: &'static str, dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(io(
            "running openssl (install it with apt-get install openssl)",
        ))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Openssl {
            what,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// The cluster's CA and the apiserver's serving certificate in `certs`:
/// kept when all four files are there (so kubeconfigs made from an earlier
/// start stay valid), else made anew. Returns the CA certificate (PEM).
fn ensure_pki(certs: &Path) -> Result<String> {
    let files = [CA_FILE, CA_KEY, SERVING_CERT, SERVING_KEY];
    if !files.iter().all(|f| certs.join(f).exists()) {
        std::fs::write(certs.join("openssl.cnf"), OPENSSL_CNF)
            .map_err(io("writing openssl.cnf"))?;
        let days = "36500";
        #[rustfmt::skip]
        let steps: [(&str, &[&str]); 3] = [
            ("req (the cluster's CA)", &[
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", days,
                "-keyout", CA_KEY, "-out", CA_FILE, "-config", "openssl.cnf", "-extensions", "ca",
            ]),
            ("req (the apiserver's serving key)", &[
                "req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver",
                "-keyout", SERVING_KEY, "-out", "serving.csr",
            ]),
            ("x509 (the apiserver's serving certificate)", &[
                "x509", "-req", "-days", days, "-set_serial", "2", "-in", "serving.csr",
                "-CA", CA_FILE, "-CAkey", CA_KEY, "-extfile", "openssl.cnf", "-extensions", "serving",
                "-out", SERVING_CERT,
            ]),
        ];
        for (what, args) in steps {
            openssl(what, certs, args)?;
        }
    }
    let path = certs.join(CA_FILE);
    std::fs::read_to_string(&path).map_err(io(format!("reading {}", path.display())))
}

/// The DER of the first certificate in `pem`.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let body = pem
        .split("-----BEGIN CERTIFICATE-----")
        .nth(1)?
        .split("-----END CERTIFICATE-----")
        .next()?;
    let b64: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// Makes the process `cmd` starts die with the thread that starts it
/// (`PR_SET_PDEATHSIG`): a child of a test, or of a cluster that is dropped
/// without a clean stop, never outlives it.
pub fn kill_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// Starts the process `cmd` starts in a session of its own (`setsid`):
/// the terminal's Ctrl-C, sent to the foreground process group, does not
/// reach it.
pub fn new_session(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// The static token of node `name`'s identity.
pub fn node_token(name: &str) -> String {
    format!("node-{name}-token")
}

impl Drop for EmbeddedApiserver {
    fn drop(&mut self) {
        if let Some(mut c) = self.scheduler.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(mut c) = self.controller_manager.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stop_apiserver();
        if let Some(mut c) = self.etcd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
