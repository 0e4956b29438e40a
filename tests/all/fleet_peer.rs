//! The fleet bench and its engines (issue 32): the phases of
//! docs/benchmarks.md's fleet table, run the same way for `nodestatus
//! simulate` ([`Simulate`], the test `fleet::bench`) and for its peer, kwok
//! ([`Kwok`], the test [`bench_kwok`]), against the same kube-apiserver,
//! kube-controller-manager and audit policy (`fleet::cluster`).
//!
//! Both tests are ignored; `scripts/fleet-bench.sh` runs them, with
//! `NODESTATUS_FLEET_NODES`, `NODESTATUS_FLEET_PHASE_SECONDS`,
//! `NODESTATUS_FLEET_REPORT_SECONDS` (simulate's report period, default 60)
//! and `NODESTATUS_FLEET_OUT`, and `NODESTATUS_KWOK` (kwok's binary, which
//! `scripts/ensure-kwok.sh` builds; its stages and ClusterRole beside it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use nodestatus_controlplane::{EmbeddedApiserver, KWOK_TOKEN, KWOK_USER, SIMULATOR_USER};
use serde_json::{Value, json};

use crate::fleet::{
    Published, Signer, Vendor, all_ready, cluster, cpu_seconds, default_config, env_or, epoch,
    nodes, ready, rss_bytes, simulate, write_run_config,
};
use nodestatus_tests::built;

/// The bench's sizes and times.
pub(crate) struct Plan {
    /// Nodes.
    pub n: usize,
    /// Over how long the nodes start: N x 20 ms.
    pub ramp: Duration,
    /// From every node Ready to the idle phase.
    pub settle: Duration,
    /// The idle, flapping and recovery phases.
    pub phase: Duration,
}

/// What the bench drives through its phases.
pub(crate) trait Engine: Sized {
    /// Its name in result.json, the output folder and the figures.
    const NAME: &'static str;
    /// The user its requests carry in the audit log.
    const USER: &'static str;
    /// The label selector of its nodes.
    const SELECTOR: &'static str;
    /// Starts it in `out` against `cluster`, and its `plan.n` nodes over
    /// `plan.ramp`.
    async fn start(cluster: &EmbeddedApiserver, out: &Path, plan: &Plan) -> Self;
    /// The CPU seconds of its processes so far, a rollout's replaced ones
    /// included.
    fn cpu_seconds(&self) -> f64;
    /// Its process's RSS now.
    fn rss_bytes(&self) -> u64;
    /// Its process now (the profile's target).
    fn pid(&self) -> u32;
    /// Its log.
    fn log(&self) -> PathBuf;
    /// Starts the rollout phase's rollout.
    async fn rollout(&mut self);
    /// Starts a rollout of a version that fails verification, when the
    /// engine has one (the `refused` phase); `false`: it has none, and the
    /// phase is left out.
    async fn refused_rollout(&mut self) -> bool {
        false
    }
    /// Stops it.
    fn stop(&mut self);
    /// How it runs, for result.json: version, flags, what its flapping and
    /// rollout are.
    fn describe(&self) -> Value;
}

/// `nodestatus simulate`: 1 % of its nodes flip MemoryPressure every 60 s
/// from the flapping phase on; its config reports an unchanged status
/// every [`REPORT_SECONDS`] (`nodeStatusReportFrequency`, shortened from
/// the kubelet's 5 minutes so that the forced report falls in every
/// phase); its rollout is a vendor's new version of its plugin `probe`,
/// pushed to a local registry (docker-registry 2.8, [`Vendor`]), signed
/// and named in the config that simulate reads live; its refused
/// rollout, a version signed by another key.
pub(crate) struct Simulate {
    child: Child,
    log: PathBuf,
    flags: Vec<String>,
    /// The directory simulate's config is in.
    out: PathBuf,
    vendor: Vendor,
    /// The config's text without the plugin's image.
    default: String,
    /// Version 1 (at the start), 2 (the rollout) and 3 (signed by
    /// another key), published at the start.
    versions: [Published; 3],
    /// When the config named each of versions 2 and 3.
    named: Vec<(f64, &'static str)>,
}

/// The bench's `nodeStatusReportFrequency` for simulate, in seconds
/// (`NODESTATUS_FLEET_REPORT_SECONDS`; the kubelet's is 300).
fn report_seconds() -> u64 {
    env_or("NODESTATUS_FLEET_REPORT_SECONDS", 60)
}

impl Simulate {
    /// Names version `v` (1 to 3) in the config.
    fn name_version(&mut self, v: usize, what: &'static str) {
        let image = &self.versions[v - 1].pinned;
        write_run_config(&self.out, &self.vendor.config(&self.default, image));
        self.named.push((epoch(), what));
    }

    /// The simulator's log lines that say `what` of version `v` (the
    /// puller's lines name the config's image).
    fn said(&self, v: usize, what: &str) -> usize {
        let image = format!("image=\"{}\"", self.versions[v - 1].pinned);
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(what) && l.contains(&image))
            .count()
    }
}

impl Engine for Simulate {
    const NAME: &'static str = "nodestatus";
    const USER: &'static str = SIMULATOR_USER;
    const SELECTOR: &'static str = "nodestatus.io/simulated=true";

    async fn start(cluster: &EmbeddedApiserver, out: &Path, plan: &Plan) -> Self {
        // The vendor's three versions, published before anything is
        // measured; the config names the first.
        let vendor = Vendor::start(out);
        let versions = [
            vendor.publish(built::PROBE, "1", Signer::Vendor),
            vendor.publish(built::PROBE_V2, "2", Signer::Vendor),
            vendor.publish(built::PROBE, "3", Signer::Other),
        ];
        let default =
            default_config() + &format!("nodeStatusReportFrequency: {}s\n", report_seconds());
        write_run_config(out, &vendor.config(&default, &versions[0].pinned));
        // Flapping starts after the idle phase.
        let flap_from = plan.ramp + plan.settle + plan.phase;
        let flags: Vec<String> = [
            "--flapping",
            "0.01",
            "--flap-period",
            "60s",
            "--flap-from",
            &format!("{}s", flap_from.as_secs()),
        ]
        .map(str::to_owned)
        .into();
        let args: Vec<&str> = flags.iter().map(String::as_str).collect();
        let child = simulate(cluster, out, plan.n, &args);
        Self {
            child,
            log: out.join("simulate.log"),
            flags,
            out: out.to_owned(),
            vendor,
            default,
            versions,
            named: Vec::new(),
        }
    }

    fn cpu_seconds(&self) -> f64 {
        cpu_seconds(self.child.id())
    }

    fn rss_bytes(&self) -> u64 {
        rss_bytes(self.child.id())
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> PathBuf {
        self.log.clone()
    }

    async fn rollout(&mut self) {
        self.name_version(2, "version 2, signed by the vendor");
    }

    async fn refused_rollout(&mut self) -> bool {
        self.name_version(3, "version 3, signed by another key");
        true
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn describe(&self) -> Value {
        let versions: Vec<Value> = self
            .versions
            .iter()
            .enumerate()
            .map(|(i, v)| {
                json!({
                    "version": i + 1,
                    "pinned": v.pinned,
                    "layer": v.layer.to_string(),
                    "registry_blob_gets": self.vendor.blob_gets(&v.layer),
                    "simulator_pulls": self.said(i + 1, "registry: pulled"),
                    "simulator_refusals": self.said(i + 1, "was made by the key"),
                })
            })
            .collect();
        json!({
            "binary": crate::fleet::exe(),
            "flags": self.flags,
            "report_seconds": report_seconds(),
            "flapping": "1 % of the nodes flip MemoryPressure every 60 s",
            "rollout": "a vendor's new version of the plugin probe (1 to 2), pushed to a local docker-registry 2.8, signed and named in the config simulate reads live",
            "refused": "version 3 of the plugin, signed by another key, named in the config",
            "rollout_condition": "ProbeRan",
            "rollout_message": "2",
            "named": self.named.iter().map(|(at, what)| json!({"at": at, "what": what})).collect::<Vec<_>>(),
            "versions": versions,
        })
    }
}

/// kwok's controller (`sigs.k8s.io/kwok/cmd/kwok`, built by
/// `scripts/ensure-kwok.sh`) with its default stages ([`KWOK_STAGES`])
/// and leases on (`nodeLeaseDurationSeconds: 40`, the kubelet's), managing
/// the nodes annotated `kwok.x-k8s.io/node=fake`, which the admin creates
/// over the ramp (kwok registers no node: its users create them). Its user is
/// [`KWOK_USER`], its rights kwok's own ClusterRole. kwok has no flapping:
/// its flapping phase is a second idle window. Its rollout is the restart
/// of its one process; it runs no plugins, so it has no refused rollout.
pub(crate) struct Kwok {
    bin: PathBuf,
    args: Vec<String>,
    config: String,
    child: Child,
    log: PathBuf,
    /// The CPU seconds of the processes a rollout replaced.
    cpu_before: f64,
    restarts: usize,
}

/// kwok's binary: `NODESTATUS_KWOK`, else where `scripts/ensure-kwok.sh`
/// puts its default version.
fn kwok_binary() -> PathBuf {
    let bin = std::env::var_os("NODESTATUS_KWOK")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("NODESTATUS_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".cache/nodestatus")
                })
                .join("kwok-0.8.0/kwok")
        });
    assert!(
        bin.exists(),
        "no kwok at {} (NODESTATUS_KWOK): run scripts/ensure-kwok.sh",
        bin.display()
    );
    bin
}

/// kwok's stage-fast set (kustomize/stage/fast/ of its module, which
/// `scripts/ensure-kwok.sh` copies beside the binary): the stages kwokctl
/// gives kwok by default when leases are on (its `getDefaultNodeStages`
/// and `getDefaultPodStages`).
const KWOK_STAGES: [&str; 5] = [
    "node-initialize.yaml",
    "node-heartbeat-with-lease.yaml",
    "pod-ready.yaml",
    "pod-complete.yaml",
    "pod-delete.yaml",
];

/// kwok's configuration: that of its in-cluster Deployment
/// (`kwok.yaml` beside the binary, from kustomize/kwok/: leases of 40 s,
/// the kubelet's; the nodes annotated `kwok.x-k8s.io/node=fake`), but with
/// no CRDs (the stages come from files, not from Stage objects) and no
/// serving port (its probes' port; nothing probes it here).
fn kwok_config(home: &Path) -> String {
    let text = std::fs::read_to_string(home.join("kwok.yaml"))
        .expect("kwok.yaml beside kwok: run scripts/ensure-kwok.sh");
    let mut config: Value = serde_yaml::from_str(&text).unwrap();
    let options = &mut config["options"];
    assert_eq!(options["nodeLeaseDurationSeconds"], 40, "{text}");
    assert_eq!(
        options["manageNodesWithAnnotationSelector"], "kwok.x-k8s.io/node=fake",
        "{text}"
    );
    options["enableCRDs"] = json!([]);
    options["nodePort"] = json!(0);
    serde_yaml::to_string(&config).unwrap()
}

impl Kwok {
    fn spawn(bin: &Path, args: &[String], log: &Path) -> Child {
        let mut c = Command::new(bin);
        c.args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .unwrap(),
            );
        nodestatus_controlplane::kill_with_parent(&mut c);
        c.spawn().expect("starting kwok")
    }

    /// The Node that kwok's docs have their users create.
    fn node(i: usize) -> Node {
        let name = format!("kwok-node-{i}");
        serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {
                    "kwok.x-k8s.io/node": "fake",
                    "node.alpha.kubernetes.io/ttl": "0",
                },
                "labels": {
                    "beta.kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/role": "agent",
                    "node-role.kubernetes.io/agent": "",
                    "type": "kwok",
                },
            },
            "spec": {
                "taints": [{"effect": "NoSchedule", "key": "kwok.x-k8s.io/node", "value": "fake"}],
            },
            "status": {
                "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": "",
                    "containerRuntimeVersion": "",
                    "kernelVersion": "",
                    "kubeProxyVersion": "fake",
                    "kubeletVersion": "fake",
                    "machineID": "",
                    "operatingSystem": "linux",
                    "osImage": "",
                    "systemUUID": "",
                },
                "phase": "Running",
            },
        }))
        .unwrap()
    }
}

impl Engine for Kwok {
    const NAME: &'static str = "kwok";
    const USER: &'static str = KWOK_USER;
    const SELECTOR: &'static str = "type=kwok";

    async fn start(cluster: &EmbeddedApiserver, out: &Path, plan: &Plan) -> Self {
        let bin = kwok_binary();
        let home = bin.parent().unwrap();
        let admin = cluster.admin_client().unwrap();
        // kwok's ClusterRole, bound to its user.
        let role: ClusterRole =
            serde_yaml::from_str(&std::fs::read_to_string(home.join("rbac/role.yaml")).unwrap())
                .unwrap();
        let role_name = role.metadata.name.clone().unwrap();
        let pp = PostParams::default();
        Api::<ClusterRole>::all(admin.clone())
            .create(&pp, &role)
            .await
            .unwrap();
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role_name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KWOK_USER}],
        }))
        .unwrap();
        Api::<ClusterRoleBinding>::all(admin.clone())
            .create(&pp, &binding)
            .await
            .unwrap();
        let kubeconfig = out.join("kubeconfig-kwok");
        std::fs::write(&kubeconfig, cluster.kubeconfig_yaml(KWOK_USER, KWOK_TOKEN)).unwrap();
        let config = out.join("kwok.yaml");
        let config_text = kwok_config(home);
        std::fs::write(&config, &config_text).unwrap();
        let mut args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--config={}", config.display()),
        ];
        for s in KWOK_STAGES {
            args.push(format!(
                "--config={}",
                home.join("stages").join(s).display()
            ));
        }
        let log = out.join("kwok.log");
        let child = Self::spawn(&bin, &args, &log);
        // The nodes, over the ramp, as simulate starts its own.
        let nodes = Api::<Node>::all(admin);
        let began = Instant::now();
        for i in 0..plan.n {
            let at = plan.ramp.mul_f64(i as f64 / plan.n as f64);
            tokio::time::sleep(at.saturating_sub(began.elapsed())).await;
            nodes.create(&pp, &Self::node(i)).await.unwrap();
        }
        Self {
            bin,
            args,
            config: config_text,
            child,
            log,
            cpu_before: 0.0,
            restarts: 0,
        }
    }

    fn cpu_seconds(&self) -> f64 {
        self.cpu_before + cpu_seconds(self.child.id())
    }

    fn rss_bytes(&self) -> u64 {
        rss_bytes(self.child.id())
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> PathBuf {
        self.log.clone()
    }

    async fn rollout(&mut self) {
        // What a rollout of kwok is: its one process replaced (SIGTERM, as
        // a Deployment's rolling update sends, then the new one).
        self.cpu_before += stop_and_count(&mut self.child).await;
        self.child = Self::spawn(&self.bin, &self.args, &self.log);
        self.restarts += 1;
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn describe(&self) -> Value {
        let version = Command::new(&self.bin)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        json!({
            "binary": self.bin,
            "version": version,
            "flags": self.args,
            "config": self.config,
            "stages": KWOK_STAGES,
            "flapping": "none: kwok has no flapping; the phase is a second idle window",
            "rollout": "the kwok process restarted (SIGTERM, then a new one)",
            "restarts": self.restarts,
        })
    }
}

/// Stops `child` with SIGTERM (SIGKILL after 10 s) and returns its CPU
/// seconds, read while it is a zombie, before it is reaped.
async fn stop_and_count(child: &mut Child) -> f64 {
    let pid = child.id();
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let state = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.split_whitespace().next().map(str::to_owned))
            })
    };
    let asked = Instant::now();
    while state().is_some_and(|s| s != "Z") {
        if asked.elapsed() > Duration::from_secs(10) {
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cpu = cpu_seconds(pid);
    let _ = child.wait();
    cpu
}

/// A phase of the bench: its name and when it ran.
#[derive(Debug, serde::Serialize)]
struct Phase {
    name: &'static str,
    from: f64,
    to: f64,
}

/// Every 5 s: how many of the engine's nodes are not Ready (the node
/// lifecycle controller's view; none while the apiserver is down), the
/// engine's CPU seconds and RSS.
#[derive(Debug, serde::Serialize)]
struct Sample {
    at: f64,
    not_ready: Option<usize>,
    nodes: usize,
    cpu_seconds: f64,
    rss_bytes: u64,
}

async fn sample<E: Engine>(admin: Option<&kube::Client>, engine: &E) -> Sample {
    let nodes = match admin {
        Some(admin) => tokio::time::timeout(Duration::from_secs(5), nodes(admin, E::SELECTOR))
            .await
            .ok(),
        None => None,
    };
    Sample {
        at: epoch(),
        not_ready: nodes
            .as_ref()
            .map(|nodes| nodes.iter().filter(|n| !ready(n)).count()),
        nodes: nodes.as_ref().map_or(0, Vec::len),
        cpu_seconds: engine.cpu_seconds(),
        rss_bytes: engine.rss_bytes(),
    }
}

/// Samples every 5 s for `d` (without the nodes when `admin` is None: the
/// apiserver is down).
async fn watch_for<E: Engine>(
    admin: Option<&kube::Client>,
    engine: &E,
    d: Duration,
    out: &mut Vec<Sample>,
) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        out.push(sample(admin, engine).await);
        tokio::time::sleep(
            Duration::from_secs(5).min(until.saturating_duration_since(Instant::now())),
        )
        .await;
    }
}

/// `perf record` of the engine's process through one phase, when
/// `NODESTATUS_FLEET_PERF` names perf (the bench's item 7 of issue 32): 99
/// samples a second of each thread, with the user stack for DWARF
/// unwinding, to `perf.data` in the bench's output;
/// `scripts/fleet-profile.py` says where the CPU went. The flapping
/// phase is the one profiled, so that the idle phase's CPU figure has no
/// sampling in it.
struct Profile {
    child: Child,
    data: PathBuf,
}

impl Profile {
    fn start(pid: u32, d: Duration, out: &Path) -> Option<Self> {
        let perf = std::env::var_os("NODESTATUS_FLEET_PERF")?;
        let data = out.join("perf.data");
        let child = Command::new(perf)
            .args(["record", "-F", "99", "--call-graph", "dwarf,16384", "-p"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(&data)
            .args(["--", "sleep"])
            .arg(d.as_secs().to_string())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(out.join("perf.log")).unwrap())
            .spawn()
            .expect("perf record starts");
        Some(Self { child, data })
    }

    /// Waits for perf to end; the profile's entry of result.json.
    fn finish(mut self) -> Value {
        let status = self.child.wait().expect("perf record ends");
        json!({"data": self.data, "ok": status.success(), "hz": 99})
    }
}

/// The fleet bench for engine `E`: N nodes (`NODESTATUS_FLEET_NODES`,
/// default 100) started over N x 20 ms, then 30 s to settle, idle,
/// flapping (the engine's own), a rollout (150 s), a refused rollout (an
/// engine that has one), a 60 s apiserver outage and the recovery, each
/// other phase `NODESTATUS_FLEET_PHASE_SECONDS` (default 120) long. The phases, the samples (NotReady count, the
/// engine's CPU and RSS every 5 s) and where the audit log is go to
/// `NODESTATUS_FLEET_OUT`/result.json (default: a temporary directory,
/// printed) for scripts/fleet-figures.py.
pub(crate) async fn bench<E: Engine>() {
    let n: usize = env_or("NODESTATUS_FLEET_NODES", 100);
    let phase = Duration::from_secs(env_or("NODESTATUS_FLEET_PHASE_SECONDS", 120));
    let out: PathBuf = std::env::var_os("NODESTATUS_FLEET_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("nodestatus-fleet-{}-{n}", E::NAME)));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let mut cluster = cluster(&out).await;
    let admin = cluster.admin_client().unwrap();
    let plan = Plan {
        n,
        ramp: Duration::from_millis(20) * n as u32,
        settle: Duration::from_secs(30),
        phase,
    };
    let t0 = epoch();
    let mut engine = E::start(&cluster, &out, &plan).await;
    let mut phases = Vec::new();
    let mut samples = Vec::new();
    let log = engine.log();
    let ready_at = all_ready(
        &admin,
        E::SELECTOR,
        n,
        plan.ramp + Duration::from_secs(300),
        (E::NAME, &log),
    )
    .await;
    phases.push(Phase {
        name: "start",
        from: t0,
        to: ready_at,
    });
    fn done(name: &'static str, from: f64, phases: &mut Vec<Phase>) {
        phases.push(Phase {
            name,
            from,
            to: epoch(),
        });
    }
    let admin = Some(&admin);
    watch_for(admin, &engine, plan.settle, &mut samples).await;
    let from = epoch();
    watch_for(admin, &engine, phase, &mut samples).await;
    done("idle", from, &mut phases);
    let from = epoch();
    let profile = Profile::start(engine.pid(), phase, &out);
    watch_for(admin, &engine, phase, &mut samples).await;
    let profile = profile.map(Profile::finish);
    done("flapping", from, &mut phases);
    let from = epoch();
    engine.rollout().await;
    watch_for(admin, &engine, Duration::from_secs(150), &mut samples).await;
    done("rollout", from, &mut phases);
    let from = epoch();
    if engine.refused_rollout().await {
        watch_for(admin, &engine, phase, &mut samples).await;
        done("refused", from, &mut phases);
    }
    let from = epoch();
    cluster.stop_apiserver();
    watch_for(None, &engine, Duration::from_secs(60), &mut samples).await;
    done("outage", from, &mut phases);
    let from = epoch();
    cluster.start_apiserver().await.unwrap();
    let admin = cluster.admin_client().unwrap();
    watch_for(Some(&admin), &engine, phase, &mut samples).await;
    done("recovery", from, &mut phases);
    engine.stop();
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let result = json!({
        "engine": E::NAME,
        "user": E::USER,
        "how": engine.describe(),
        "nodes": n,
        "phase_seconds": phase.as_secs(),
        "ramp_seconds": plan.ramp.as_secs_f64(),
        "cpus": nproc,
        "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        "phases": phases,
        "samples": samples,
        "profile": profile,
        "audit_log": cluster.audit_log_path(),
        "engine_log": engine.log(),
    });
    std::fs::write(
        out.join("result.json"),
        serde_json::to_string_pretty(&result).unwrap(),
    )
    .unwrap();
    eprintln!(
        "FLEET-BENCH| {} {n} nodes: {}",
        E::NAME,
        out.join("result.json").display()
    );
}

/// The fleet bench with kwok as the engine (`scripts/fleet-bench.sh`
/// runs it beside `fleet::bench`): see [`bench`] and [`Kwok`].
#[tokio::test(flavor = "multi_thread")]
#[ignore = "minutes, and kwok: scripts/fleet-bench.sh runs it"]
async fn bench_kwok() {
    bench::<Kwok>().await;
}
