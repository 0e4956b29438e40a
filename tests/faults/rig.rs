//! The rig the scenarios share: one etcd, kube-apiserver (with an audit log)
//! and kube-controller-manager (node lifecycle controller, grace period
//! 20 s); and, per scenario, a fault proxy, an engine process with the
//! node's own identity behind it, an observer that polls the Node, and the
//! foreign fields that must survive.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use nodestatus_controlplane::{EmbeddedApiserver, Extras, node_token};
use nodestatus_tests::{built, drop_plugin};
use serde_json::json;

use crate::proxy::{FaultProxy, tls_acceptor};

/// The node lifecycle controller's `--node-monitor-grace-period`: its own
/// default since Kubernetes 1.32.
pub const GRACE: Duration = nodestatus_controlplane::DEFAULT_NODE_MONITOR_GRACE;
/// How soon after a fault ends the lease must be renewed (issue 10).
pub const LEASE_RECOVERY: Duration = Duration::from_secs(25);
/// How soon after a fault ends Ready must be right again: one update period
/// (10 s), the longest backoff step (7 s), and margin.
pub const READY_RECOVERY: Duration = Duration::from_secs(25);

/// How long after its registration a node is in its steady state.
pub const STEADY_AFTER: Duration = Duration::from_secs(15);

/// The foreign label, taint and condition that every scenario sets as the
/// admin before its fault and looks for after it.
pub const PROBE: &str = "faults.example.com/probe";
const PROBE_CONDITION: &str = "FaultRigProbe";

/// The shared control plane.
pub struct Rig {
    pub cluster: EmbeddedApiserver,
    pub admin: kube::Client,
    tls_cert: PathBuf,
    tls_key: PathBuf,
    pub dir: PathBuf,
}

impl Rig {
    /// Starts etcd, kube-apiserver and kube-controller-manager with an
    /// identity for each of `nodes`.
    pub async fn start(dir: &Path, nodes: &[&str]) -> anyhow::Result<Self> {
        let cluster = EmbeddedApiserver::start_with_extras(
            &dir.join("cluster"),
            nodes,
            false,
            true,
            Extras {
                audit_log: true,
                node_lifecycle_grace: Some(GRACE),
                ..Default::default()
            },
        )
        .await?;
        let admin = cluster.admin_client()?;
        let (tls_cert, tls_key) = (dir.join("proxy.crt"), dir.join("proxy.key"));
        let st = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=127.0.0.1", "-keyout"])
            .arg(&tls_key)
            .arg("-out")
            .arg(&tls_cert)
            .stderr(Stdio::null())
            .status()
            .context("running openssl for the proxy's certificate")?;
        ensure!(st.success(), "openssl req failed");
        Ok(Self {
            cluster,
            admin,
            tls_cert,
            tls_key,
            dir: dir.to_owned(),
        })
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.admin.clone())
    }

    pub fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.admin.clone(), "kube-node-lease")
    }

    /// A proxy to the apiserver, a node kubeconfig pointing at it, and the
    /// engine started with `extra` flags and the default periods; returns
    /// once the node is Ready and carries the foreign probe fields.
    pub async fn scenario(
        self: &Arc<Self>,
        node: &str,
        extra: &[&str],
    ) -> anyhow::Result<Scenario> {
        let dir = self.dir.join(node);
        std::fs::create_dir_all(dir.join("plugins"))?;
        drop_plugin(&dir.join("plugins"), "ready.wasm", Path::new(built::READY));
        drop_plugin(
            &dir.join("plugins"),
            "kernel-check.wasm",
            Path::new(built::KERNEL_CHECK),
        );
        let proxy = FaultProxy::start(
            &self.cluster.server,
            tls_acceptor(&self.tls_cert, &self.tls_key)?,
        )
        .await?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: {node}\n  user:\n    token: {}\ncontexts:\n- name: {node}\n  context:\n    cluster: proxy\n    user: {node}\ncurrent-context: {node}\n",
                proxy.url(),
                node_token(node)
            ),
        )?;
        let mut args: Vec<String> = vec![
            "run".into(),
            "--node-name".into(),
            node.into(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "--plugin-dir".into(),
            dir.join("plugins").display().to_string(),
            "--cache-dir".into(),
            built::TEST_CACHE_DIR.into(),
            "--address".into(),
            String::new(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let engine = Engine::start(args, dir.join("nodestatus.log"))?;
        let s = Scenario {
            rig: self.clone(),
            node: node.to_owned(),
            proxy,
            engine,
            observer: Observer::start(self.nodes(), node, Duration::from_millis(500)),
        };
        s.wait_ready(Duration::from_secs(60)).await?;
        s.wait_lease(Timestamp::now(), Duration::from_secs(30))
            .await
            .context("the lease was never written")?;
        s.set_probes().await?;
        // Faults hit a node in its steady state: past its start-up and the
        // first status report, which comes one update period (10 s) after
        // registration, as the kubelet's does.
        let created = s
            .node()
            .await?
            .and_then(|n| n.metadata.creation_timestamp)
            .context("the node has no creationTimestamp")?
            .0;
        let steady = created + STEADY_AFTER;
        let now = Timestamp::now();
        if steady > now {
            tokio::time::sleep(steady.duration_since(now).unsigned_abs()).await;
        }
        Ok(s)
    }
}

/// The engine as a process.
pub struct Engine {
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Engine {
    fn start(args: Vec<String>, log: PathBuf) -> anyhow::Result<Self> {
        let mut e = Self {
            args,
            log,
            child: None,
        };
        e.spawn()?;
        Ok(e)
    }

    /// Starts the process (again), appending to the same log.
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nodestatus"));
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe and touches no memory of ours.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
        }
        let child = cmd
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting nodestatus")?;
        self.child = Some(child);
        Ok(())
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// Sends `sig` to the process.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// `Ok` while the process runs; the exit status and log tail otherwise.
    pub fn alive(&mut self) -> anyhow::Result<()> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => Ok(()),
            Some(Ok(Some(status))) => bail!("nodestatus exited ({status}):\n{}", self.log_tail()),
            other => bail!("nodestatus is not running ({other:?})"),
        }
    }

    /// Waits up to `limit` for the process to exit; its status.
    pub async fn wait_exit(&mut self, limit: Duration) -> anyhow::Result<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.as_mut().expect("running").try_wait()? {
                self.child = None;
                return Ok(status);
            }
            ensure!(
                Instant::now() < deadline,
                "nodestatus did not exit within {limit:?}:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A stopped process must be continued to die of SIGKILL promptly.
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The Node's Ready status as an observer saw it: `None` when the node or
/// its Ready condition is absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub at: Instant,
    pub ready: Option<String>,
    pub reason: Option<String>,
}

/// Polls the Node every `every` and keeps each change of its Ready status.
pub struct Observer {
    timeline: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

pub fn ready_of(node: &Node) -> Option<(String, Option<String>)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone()))
}

impl Observer {
    pub fn start(nodes: Api<Node>, node: &str, every: Duration) -> Self {
        let timeline = Arc::new(Mutex::new(Vec::<Seen>::new()));
        let (t, node) = (timeline.clone(), node.to_owned());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Ok(n) = nodes.get_opt(&node).await else {
                    continue;
                };
                let (ready, reason) = match n.as_ref().and_then(ready_of) {
                    Some((s, r)) => (Some(s), r),
                    None => (None, None),
                };
                let mut t = t.lock().unwrap();
                if t.last()
                    .is_none_or(|l| l.ready != ready || l.reason != reason)
                {
                    t.push(Seen {
                        at: Instant::now(),
                        ready,
                        reason,
                    });
                }
            }
        });
        Self { timeline, task }
    }

    pub fn timeline(&self) -> Vec<Seen> {
        self.timeline.lock().unwrap().clone()
    }

    /// Changes seen since `t`, as `Ready@+secs` text.
    pub fn describe_since(&self, t: Instant) -> String {
        self.timeline()
            .iter()
            .filter(|s| s.at >= t)
            .map(|s| {
                format!(
                    "{}({})@+{:.1}s",
                    s.ready.as_deref().unwrap_or("absent"),
                    s.reason.as_deref().unwrap_or("-"),
                    s.at.duration_since(t).as_secs_f64()
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What one scenario measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Seconds from the end of the fault to the first lease renewal after it
    /// (the lease's own `renewTime`).
    pub lease_s: Option<f64>,
    /// Seconds from the end of the fault until Ready was True again, when
    /// it was not True then.
    pub ready_s: Option<f64>,
    /// What Ready did during the fault and after it.
    pub ready_during: String,
    /// Anything else worth a line in the table.
    pub note: String,
}

/// One scenario's node, proxy, engine and observer.
pub struct Scenario {
    pub rig: Arc<Rig>,
    pub node: String,
    pub proxy: FaultProxy,
    pub engine: Engine,
    pub observer: Observer,
}

impl Scenario {
    pub async fn node(&self) -> anyhow::Result<Option<Node>> {
        Ok(self.rig.nodes().get_opt(&self.node).await?)
    }

    pub async fn lease(&self) -> anyhow::Result<Option<Lease>> {
        Ok(self.rig.leases().get_opt(&self.node).await?)
    }

    pub async fn renew_time(&self) -> Option<Timestamp> {
        self.lease()
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.renew_time)
            .map(|t| t.0)
    }

    /// Waits until Ready is True.
    pub async fn wait_ready(&self, limit: Duration) -> anyhow::Result<f64> {
        let start = Instant::now();
        loop {
            let ready = self.node().await.ok().flatten().as_ref().and_then(ready_of);
            if ready.as_ref().is_some_and(|(s, _)| s == "True") {
                return Ok(start.elapsed().as_secs_f64());
            }
            ensure!(
                start.elapsed() < limit,
                "{}: Ready is {ready:?}, not True, {limit:?} on; the engine's log:\n{}",
                self.node,
                self.engine.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until the lease's renewTime is after `after`; the seconds from
    /// `after` to that renewTime.
    pub async fn wait_lease(&self, after: Timestamp, limit: Duration) -> anyhow::Result<f64> {
        let start = Instant::now();
        loop {
            if let Some(t) = self.renew_time().await
                && t > after
            {
                return Ok(t.duration_since(after).as_secs_f64());
            }
            ensure!(
                start.elapsed() < limit,
                "{}: the lease was not renewed within {limit:?}; the engine's log:\n{}",
                self.node,
                self.engine.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Sets the foreign label, taint and condition as the admin.
    async fn set_probes(&self) -> anyhow::Result<()> {
        let nodes = self.rig.nodes();
        let pp = PatchParams::default();
        nodes
            .patch(
                &self.node,
                &pp,
                &Patch::Strategic(json!({
                    "metadata": {"labels": {PROBE: "kept"}},
                    "spec": {"taints": [{"key": PROBE, "value": "kept", "effect": "NoSchedule"}]},
                })),
            )
            .await
            .context("setting the foreign label and taint")?;
        let now = Timestamp::now().to_string();
        nodes
            .patch_status(
                &self.node,
                &pp,
                &Patch::Strategic(json!({"status": {"conditions": [{
                    "type": PROBE_CONDITION, "status": "True", "reason": "SetByTheFaultRig",
                    "message": "another agent's condition", "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }]}})),
            )
            .await
            .context("setting the foreign condition")?;
        Ok(())
    }

    /// The foreign label, taint and condition are all still there.
    pub async fn probes_kept(&self) -> anyhow::Result<()> {
        let n = self.node().await?.context("the node is gone")?;
        let v = serde_json::to_value(&n)?;
        let label = v["metadata"]["labels"][PROBE] == "kept";
        let taint = v["spec"]["taints"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["key"] == PROBE));
        let cond = v["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == PROBE_CONDITION));
        ensure!(
            label && taint && cond,
            "{}: a foreign field was lost (label {label}, taint {taint}, condition {cond}): {}",
            self.node,
            serde_json::to_string(&v["spec"])?
                + &serde_json::to_string(&v["status"]["conditions"])?
        );
        Ok(())
    }

    /// The checks after a fault that ended at `healed` (`healed_at` on the
    /// wall clock): the process is alive, the lease is renewed within 25 s,
    /// Ready is True within 25 s, and the foreign fields are kept.
    pub async fn recovered(
        &mut self,
        fault_start: Instant,
        healed: Instant,
        healed_at: Timestamp,
    ) -> anyhow::Result<Outcome> {
        self.engine.alive()?;
        let lease_s = self.wait_lease(healed_at, LEASE_RECOVERY).await?;
        let was_true = self
            .observer
            .timeline()
            .iter()
            .rev()
            .find(|s| s.at <= healed)
            .is_some_and(|s| s.ready.as_deref() == Some("True"));
        let left_true = self
            .observer
            .timeline()
            .iter()
            .any(|s| s.at >= fault_start && s.ready.as_deref() != Some("True"));
        let mut ready_s = None;
        let limit = READY_RECOVERY.saturating_sub(healed.elapsed());
        let waited = self.wait_ready(limit).await;
        if let Err(e) = waited {
            bail!(
                "(lease renewed {lease_s:.1} s after the fault) {e}\nReady since the fault began: {}",
                self.observer.describe_since(fault_start)
            );
        }
        if !was_true || left_true {
            // Observed time: the first True after the fault ended.
            ready_s = self
                .observer
                .timeline()
                .iter()
                .find(|s| s.at >= healed && s.ready.as_deref() == Some("True"))
                .map(|s| s.at.duration_since(healed).as_secs_f64())
                .or(Some(healed.elapsed().as_secs_f64()));
        }
        self.probes_kept().await?;
        self.engine.alive()?;
        Ok(Outcome {
            lease_s: Some(lease_s),
            ready_s,
            ready_during: self.observer.describe_since(fault_start),
            note: String::new(),
        })
    }
}
