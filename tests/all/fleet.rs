//! The fleet suite: `nodestatus simulate` against a real kube-apiserver
//! with its audit log and the node lifecycle controller, and the kubelet's
//! politeness checked at fleet scale from the audit log.
//!
//! - [`a_fleet_is_as_polite_as_the_kubelet`] (in `scripts/test.sh`): 100
//!   nodes (`NODESTATUS_FLEET_NODES`), 1 % of them flapping, for about
//!   3 minutes: the steady state, an apiserver outage, a vendor's plugin
//!   rolled out through a local registry (one pull for the process), a
//!   version signed by another key refused, a setter dropped into the
//!   plugin directory;
//! - [`bench`] (ignored; `scripts/fleet-bench.sh` runs it): the phases of
//!   docs/benchmarks.md's fleet table (idle, 1 % flapping, a plugin
//!   rollout through a registry, a refused version, a 60 s apiserver
//!   outage) for `NODESTATUS_FLEET_NODES` nodes, written to
//!   `NODESTATUS_FLEET_OUT` for scripts/fleet-figures.py; the phases, and
//!   the same bench of its peer kwok, are in `fleet_peer`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ListParams, PostParams};
use nodestatus_controlplane::{EmbeddedApiserver, Extras, SIMULATOR_TOKEN, SIMULATOR_USER};
use nodestatus_registry::Digest;
use nodestatus_tests::registry::{PASSWORD, Registry, USER, key_pair};
use nodestatus_tests::{DEFAULT_PLUGINS, built, drop_plugin};
use serde_json::Value;

use crate::registry::{REPO, cli, variant};

/// The node lifecycle controller's grace period (its default since 1.32).
const GRACE: Duration = nodestatus_controlplane::DEFAULT_NODE_MONITOR_GRACE;

/// Seconds since the epoch, now.
pub(crate) fn epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A cluster with the audit log and the node lifecycle controller, the
/// simulator's RBAC applied from deploy/kubernetes/simulate/rbac.yaml.
pub(crate) async fn cluster(dir: &Path) -> EmbeddedApiserver {
    let cluster = EmbeddedApiserver::start_with_extras(
        dir,
        &[],
        false,
        true,
        Extras {
            audit_log: true,
            node_lifecycle_grace: Some(GRACE),
            ..Default::default()
        },
    )
    .await
    .expect("starting kube-apiserver and kube-controller-manager");
    let admin = cluster.admin_client().unwrap();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes/simulate/rbac.yaml"),
    )
    .unwrap();
    let mut applied = 0;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(doc).unwrap();
        let pp = PostParams::default();
        match v["kind"].as_str() {
            Some("ClusterRole") => {
                let r: ClusterRole = serde_json::from_value(v).unwrap();
                Api::<ClusterRole>::all(admin.clone())
                    .create(&pp, &r)
                    .await
                    .unwrap();
                applied += 1;
            }
            Some("ClusterRoleBinding") => {
                let b: ClusterRoleBinding = serde_json::from_value(v).unwrap();
                Api::<ClusterRoleBinding>::all(admin.clone())
                    .create(&pp, &b)
                    .await
                    .unwrap();
                applied += 1;
            }
            _ => {}
        }
    }
    assert_eq!(
        applied, 2,
        "the RBAC example has a ClusterRole and its binding"
    );
    cluster
}

/// `nodestatus simulate` with the simulator's credential, its log in `dir`.
pub(crate) fn simulate(
    cluster: &EmbeddedApiserver,
    dir: &Path,
    nodes: usize,
    flags: &[&str],
) -> Child {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for (name, path) in DEFAULT_PLUGINS {
        drop_plugin(&plugins, name, Path::new(path));
    }
    let kubeconfig = dir.join("kubeconfig-simulator");
    std::fs::write(
        &kubeconfig,
        cluster.kubeconfig_yaml(SIMULATOR_USER, SIMULATOR_TOKEN),
    )
    .unwrap();
    let mut c = simulator(&kubeconfig, &plugins, dir, nodes);
    c.args(flags)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("simulate.log")).unwrap());
    c.spawn().expect("starting nodestatus simulate")
}

/// `nodestatus simulate` of `nodes` nodes with the credential of
/// `kubeconfig` and the setters in `plugins`, its machines in
/// `dir/machines`, dying with the test. No --config: it takes the config
/// that scripts/run.sh gives `run`, looked for in `dir/xdg` (a test writes
/// one there, or none), never the user's.
pub fn simulator(kubeconfig: &Path, plugins: &Path, dir: &Path, nodes: usize) -> Command {
    let mut c = Command::new(exe());
    c.args(["simulate", "--nodes", &nodes.to_string()])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--plugin-dir")
        .arg(plugins)
        .arg("--cache-dir")
        .arg(fleet_cache_dir())
        .arg("--state-dir")
        .arg(dir.join("machines"))
        .env("RUST_LOG", "info")
        .env_remove("KUBECONFIG")
        .env_remove("NODESTATUS_RUN_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join("xdg"));
    nodestatus_controlplane::kill_with_parent(&mut c);
    c
}

/// The nodestatus binary: this build's, or `NODESTATUS_BIN` (another
/// build: scripts/fleet-bench.sh with a release).
pub(crate) fn exe() -> PathBuf {
    std::env::var_os("NODESTATUS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_nodestatus")))
}

/// A vendor's plugin through a local registry (issue 32, item 5):
/// Debian's docker-registry 2.8 with TLS, its credentials and its access
/// log (each request a line: the pulls are counted there), the vendor's
/// key pair and another. The fleet's plugin `probe` comes from it.
pub(crate) struct Vendor {
    registry: Registry,
    dir: PathBuf,
    key: PathBuf,
    public: PathBuf,
    other_key: PathBuf,
    /// A config that only reaches the registry, for `plugin push` and
    /// `plugin sign`.
    bare: PathBuf,
    /// The `registries:` section of the nodes' config.
    registries: String,
    /// Set apart from the runs before it: each version is made unique, so
    /// that no earlier run left it in the test cache (a pull is a pull).
    run: String,
}

/// The plugin's name in the fleet's config (the name the component
/// declares).
pub(crate) const FLEET_PLUGIN: &str = "probe";

/// The simulator's cache (`cacheDir`): its own, beside the tests' shared
/// one and kept warm between runs as that one is, because the active file
/// of an image plugin is `<cacheDir>/registry-plugins/<name>.wasm`, which
/// the registry suites write for their plugin `probe` in the shared one.
pub(crate) fn fleet_cache_dir() -> PathBuf {
    Path::new(built::TEST_CACHE_DIR).with_file_name("nodestatus-test-cache-fleet")
}

/// Who signs a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signer {
    /// The vendor's key, which the nodes' `verify:` names.
    Vendor,
    /// Another key: the nodes refuse it.
    Other,
}

/// A version the vendor published.
#[derive(Debug, Clone)]
pub(crate) struct Published {
    /// `HOST/vendor/probe@sha256:…`, the manifest's digest.
    pub pinned: String,
    /// The manifest's digest.
    pub manifest: String,
    /// The component's layer (the blob a pull fetches).
    pub layer: Digest,
}

impl Vendor {
    /// A registry and keys in `dir`.
    pub(crate) fn start(dir: &Path) -> Self {
        let dir = dir.join("vendor");
        std::fs::create_dir_all(&dir).unwrap();
        let mut registry = Registry::start();
        registry.log_requests();
        let (key, public) = key_pair(&dir, "vendor");
        let (other_key, _) = key_pair(&dir, "other");
        let auth = dir.join("auth.json");
        std::fs::copy(registry.auth_file(USER, PASSWORD), &auth).unwrap();
        let registries = registry.config_yaml(&auth);
        let bare = dir.join("bare.yaml");
        std::fs::write(&bare, &registries).unwrap();
        Self {
            registry,
            dir,
            key,
            public,
            other_key,
            bare,
            registries,
            run: format!("{}-{}", std::process::id(), epoch()),
        }
    }

    /// Pushes the component `src` as `tag`, made unique to this run, and
    /// signs it with `signer`'s key.
    pub(crate) fn publish(&self, src: &str, tag: &str, signer: Signer) -> Published {
        let bytes = variant(&std::fs::read(src).unwrap(), &format!("{tag}-{}", self.run));
        // A plugin is named by its file, as in a plugin directory.
        let file = self.dir.join(tag).join("probe.wasm");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &bytes).unwrap();
        let bare = self.bare.to_str().unwrap();
        let at = format!("{}/{REPO}:{tag}", self.registry.host());
        let pushed = cli(&[
            "plugin",
            "push",
            file.to_str().unwrap(),
            &at,
            "--config",
            bare,
        ]);
        let pinned = pushed.trim().to_owned();
        let key = match signer {
            Signer::Vendor => &self.key,
            Signer::Other => &self.other_key,
        };
        cli(&[
            "plugin",
            "sign",
            &pinned,
            "--key",
            key.to_str().unwrap(),
            "--config",
            bare,
        ]);
        let manifest = pinned.rsplit_once('@').unwrap().1.to_owned();
        Published {
            pinned,
            manifest,
            layer: Digest::of(&bytes),
        }
    }

    /// The nodes' config: `default` (the text of `config default` and
    /// any top-level lines) with the registry, and the plugin
    /// [`FLEET_PLUGIN`] from `image`, verified with the vendor's key.
    pub(crate) fn config(&self, default: &str, image: &str) -> String {
        let plugin = format!(
            "plugins:\n  {FLEET_PLUGIN}:\n    image: {image}\n    verify:\n      key: {}\n",
            self.public.display()
        );
        assert!(default.contains("\nplugins:\n"), "{default}");
        default.replacen("\nplugins:\n", &format!("\n{plugin}"), 1) + &self.registries
    }

    /// The registry's log (its access log among it).
    pub(crate) fn log(&self) -> String {
        self.registry.log()
    }

    /// The registry's settings, for a client of the library.
    pub(crate) fn registries(&self) -> nodestatus_registry::Registries {
        self.registry.registries()
    }

    /// The vendor's public key.
    pub(crate) fn public_key(&self) -> &Path {
        &self.public
    }

    /// How many times the registry served the blob `layer` (GETs in its
    /// access log).
    pub(crate) fn blob_gets(&self, layer: &Digest) -> usize {
        let get = format!("\"GET /v2/{REPO}/blobs/{layer} ");
        self.registry
            .log()
            .lines()
            .filter(|l| l.contains(&get))
            .count()
    }
}

/// `nodestatus config default`: the text of the default config.
pub(crate) fn default_config() -> String {
    let out = Command::new(exe())
        .args(["config", "default"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// Writes `text` as the config `simulate` takes without --config
/// (`dir/xdg/nodestatus/config.yaml`, where [`simulator`] points
/// `XDG_CONFIG_HOME`): aside, then renamed, as simulate reads it live.
pub(crate) fn write_run_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("xdg/nodestatus/config.yaml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// The message of `node`'s condition `ProbeRan`: the major version of
/// the probe that runs.
pub(crate) fn probe_version(node: &Value) -> Option<&str> {
    crate::kube::condition(node, "ProbeRan").and_then(|c| c["message"].as_str())
}

/// The message that the status patch `body` writes in the condition
/// `ProbeRan`: `None` when it leaves it as it is (a patch carries only the
/// changed fields of a condition: a heartbeat is its type and
/// `lastHeartbeatTime`).
pub(crate) fn probe_message(body: &Value) -> Option<&str> {
    body["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ProbeRan")?["message"]
        .as_str()
}

/// Polls the nodes of label `selector` every second until `pred` holds
/// for each of `n`; returns when, or `None` past `within`.
pub(crate) async fn until_every_node(
    admin: &kube::Client,
    selector: &str,
    n: usize,
    within: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Option<f64> {
    let started = Instant::now();
    while started.elapsed() < within {
        let nodes = nodes(admin, selector).await;
        if nodes.len() == n && nodes.iter().all(&pred) {
            return Some(epoch());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    None
}

/// One request, from the audit log.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    /// When the apiserver received it (seconds since the epoch).
    pub(crate) at: f64,
    pub(crate) verb: String,
    /// `nodes`, `nodes/status`, `leases`, `events`.
    pub(crate) resource: String,
    pub(crate) name: String,
    pub(crate) code: u16,
    /// The path and query.
    pub(crate) uri: String,
    /// What a write sent (the audit policy logs the simulator's writes of
    /// nodes and leases with their bodies); `null` for the others.
    pub(crate) body: Value,
}

/// The requests of `user` in the audit log at `path`, each once (a watch
/// has two entries: when its response started, and when it completed).
pub(crate) fn audit(path: &Path, user: &str) -> Vec<Req> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        let Ok(mut e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if e["user"]["username"] != user {
            continue;
        }
        if let Some(id) = e["auditID"].as_str()
            && !seen.insert(id.to_owned())
        {
            continue;
        }
        let at = e["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(|t| t.as_millisecond() as f64 / 1000.0)
            .unwrap_or_default();
        let o = &e["objectRef"];
        let resource = match o["subresource"].as_str() {
            Some(s) => format!("{}/{s}", o["resource"].as_str().unwrap_or("?")),
            None => o["resource"].as_str().unwrap_or("?").to_owned(),
        };
        out.push(Req {
            at,
            verb: e["verb"].as_str().unwrap_or("?").to_owned(),
            resource,
            name: o["name"].as_str().unwrap_or_default().to_owned(),
            code: e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
            uri: e["requestURI"].as_str().unwrap_or_default().to_owned(),
            body: e["requestObject"].take(),
        });
    }
    out
}

/// The label of the simulated nodes.
const SIMULATED: &str = "nodestatus.io/simulated=true";

/// The nodes of label `selector` as the admin sees them, in pages of 500
/// (a list of 5,000 nodes in one answer is 70 MB, more than a busy
/// apiserver encodes within its request timeout); none when a page fails
/// (the callers poll).
pub(crate) async fn nodes(admin: &kube::Client, selector: &str) -> Vec<Value> {
    let api = Api::<Node>::all(admin.clone());
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().labels(selector).limit(500);
        if let Some(t) = token.take() {
            lp = lp.continue_token(&t);
        }
        let page = match api.list(&lp).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("listing the nodes ({selector}) failed: {e}");
                return Vec::new();
            }
        };
        out.extend(
            page.items
                .into_iter()
                .map(|n| serde_json::to_value(n).unwrap()),
        );
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return out,
        }
    }
}

/// Whether `node` is Ready.
pub(crate) fn ready(node: &Value) -> bool {
    nodestatus_engine::agent::ready_status(node).as_deref() == Some("True")
}

/// Waits until `n` nodes of label `selector` exist and are Ready; returns
/// when. Past `limit`, fails with the end of `who`'s `log`.
pub(crate) async fn all_ready(
    admin: &kube::Client,
    selector: &str,
    n: usize,
    limit: Duration,
    (who, log): (&str, &Path),
) -> f64 {
    let started = Instant::now();
    loop {
        let nodes = nodes(admin, selector).await;
        let ready = nodes.iter().filter(|n| ready(n)).count();
        if ready == n {
            return epoch();
        }
        assert!(
            started.elapsed() < limit,
            "{ready} of {n} nodes Ready after {limit:?} ({} registered); {who}'s log:\n{}",
            nodes.len(),
            tail(log)
        );
        // A list of N nodes is N x about 14 kB for the apiserver to
        // encode: poll a large fleet less often.
        tokio::time::sleep(Duration::from_millis((2 * n as u64).max(1000))).await;
    }
}

/// The lines of the log at `path` that name any of `words`.
pub(crate) fn about(path: &Path, words: &[&str]) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| words.iter().any(|w| l.contains(w)))
        .collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

pub(crate) fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Samples every `every`: how many simulated nodes are not Ready (the node
/// lifecycle controller's view), the engine's CPU seconds and RSS.
#[derive(Debug, Clone, serde::Serialize)]
struct Sample {
    at: f64,
    not_ready: usize,
    nodes: usize,
    cpu_seconds: f64,
    rss_bytes: u64,
}

pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's closing parenthesis: state is field 3; utime
    // and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(14) + ticks(15)) / hz
}

pub(crate) fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

async fn sample(admin: &kube::Client, pid: u32) -> Sample {
    let nodes = tokio::time::timeout(Duration::from_secs(5), nodes(admin, SIMULATED))
        .await
        .unwrap_or_default();
    Sample {
        at: epoch(),
        not_ready: nodes.iter().filter(|n| !ready(n)).count(),
        nodes: nodes.len(),
        cpu_seconds: cpu_seconds(pid),
        rss_bytes: rss_bytes(pid),
    }
}

/// Samples every 5 s for `d`.
async fn watch_for(admin: &kube::Client, pid: u32, d: Duration, out: &mut Vec<Sample>) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        out.push(sample(admin, pid).await);
        tokio::time::sleep(
            Duration::from_secs(5).min(until.saturating_duration_since(Instant::now())),
        )
        .await;
    }
}

/// Per node, the times of its requests of `verb` on `resource` in `[from, to)`.
fn by_node(
    reqs: &[Req],
    verb: &str,
    resource: &str,
    from: f64,
    to: f64,
) -> BTreeMap<String, Vec<f64>> {
    let mut m: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in reqs
        .iter()
        .filter(|r| r.verb == verb && r.resource == resource && r.at >= from && r.at < to)
    {
        m.entry(r.name.clone()).or_default().push(r.at);
    }
    m
}

pub(crate) fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// N simulated nodes (1 % flapping memory pressure every 20 s) against
/// the real apiserver for about 2 minutes, checked from the audit log:
/// - the nodes are different (capacity, IPs) and marked (label, taint);
/// - start-up spreads the registrations over the ramp;
/// - each node renews its lease every 10 s with jitter, no faster: the
///   fleet's rate is at most 1.01 x the kubelet's N/10 a second, and the
///   peak in one second at most twice the mean (whatever the ramp);
/// - an idle node writes no status between reports; a flapping one writes
///   its flips;
/// - the node lifecycle controller sees no node NotReady;
/// - after a 25 s apiserver outage (so that no lease is older than the
///   controller's 50 s grace when it is back), no herd: the peak of all requests in
///   one second at most 3x the steady rate, every lease renewed within
///   40 s, and no node seen not Ready (issue 32, item 3);
/// - a vendor's new version of the plugin `probe`, pushed to a local
///   registry, signed and named in the config (rewritten while simulate
///   runs), reaches every node within 30 s with one pull for the process
///   (the registry's access log and the simulator's log), each node
///   writing the change once and recording its `PluginPulled` event; a
///   version signed by another key is refused and every node keeps the one
///   it runs, Ready (item 5);
/// - a setter dropped into the plugin directory is loaded once and reaches
///   every node within 30 s.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_is_as_polite_as_the_kubelet() {
    let n: usize = env_or("NODESTATUS_FLEET_NODES", 100);
    let steady = Duration::from_secs(env_or("NODESTATUS_FLEET_SECONDS", 60));
    let dir = tempfile::Builder::new()
        .prefix("nodestatus-fleet")
        .tempdir()
        .unwrap();
    let mut cluster = cluster(dir.path()).await;
    let admin = cluster.admin_client().unwrap();
    let ramp = Duration::from_secs(5);
    let started = epoch();
    // The config `run` runs with on this machine (scripts/run.sh's), which
    // simulate takes without --config (and reads again while it runs),
    // with a vendor's plugin from a registry.
    let vendor = Vendor::start(dir.path());
    let v1 = vendor.publish(built::PROBE, "1", Signer::Vendor);
    let default = default_config() + "nodeLabels:\n  nodestatus.test/config: run\n";
    write_run_config(dir.path(), &vendor.config(&default, &v1.pinned));
    // A state directory that holds something of the operator's.
    let machines = dir.path().join("machines");
    std::fs::create_dir_all(&machines).unwrap();
    std::fs::write(machines.join("operator.txt"), "mine").unwrap();
    let mut child = simulate(
        &cluster,
        dir.path(),
        n,
        &[
            "--flapping",
            "0.01",
            "--flap-period",
            "20s",
            "--ramp",
            &format!("{}s", ramp.as_secs()),
        ],
    );
    let log = dir.path().join("simulate.log");
    let ready_at = all_ready(
        &admin,
        SIMULATED,
        n,
        Duration::from_secs(90) + ramp,
        ("the simulator", &log),
    )
    .await;
    // Every node runs the vendor's plugin, pulled once at the start.
    let probed_at = until_every_node(&admin, SIMULATED, n, ROLLOUT_WITHIN, |node| {
        probe_version(node) == Some("1")
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the vendor's plugin did not reach every node: {}",
            about(&log, &["registry", FLEET_PLUGIN, "config"])
        )
    });
    // The steady window starts once every node is Ready and its start-up
    // writes are over.
    let from = (ready_at + 15.0).max(probed_at + 5.0);
    let mut samples = Vec::new();
    watch_for(
        &admin,
        child.id(),
        Duration::from_secs_f64((from - epoch()).max(0.0)) + steady,
        &mut samples,
    )
    .await;
    let to = epoch();
    let fleet = nodes(&admin, SIMULATED).await;
    let log_steady = std::fs::metadata(&log).map_or(0, |m| m.len()) as usize;
    // An outage: kube-apiserver stopped (etcd and the node lifecycle
    // controller run on), then started again, and the recovery watched.
    let down_at = epoch();
    cluster.stop_apiserver();
    tokio::time::sleep(OUTAGE).await;
    cluster
        .start_apiserver()
        .await
        .expect("starting kube-apiserver again");
    let admin = cluster.admin_client().unwrap();
    let mut recovery = Vec::new();
    watch_for(&admin, child.id(), RECOVERY, &mut recovery).await;
    // A vendor's new version (issue 32, item 5): pushed and signed, then
    // named in the config. One pull for the process, every node on it,
    // each writing the change once.
    let v2 = vendor.publish(built::PROBE_V2, "2", Signer::Vendor);
    let rollout_at = epoch();
    write_run_config(dir.path(), &vendor.config(&default, &v2.pinned));
    let rolled_at = until_every_node(&admin, SIMULATED, n, ROLLOUT_WITHIN, |node| {
        probe_version(node) == Some("2")
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the new version did not reach every node within {ROLLOUT_WITHIN:?}: {}",
            tail(&log)
        )
    });
    // A version signed by another key: refused once for the fleet, every
    // node keeps the one it runs and stays Ready.
    let v3 = vendor.publish(built::PROBE, "3", Signer::Other);
    let refused_at = epoch();
    write_run_config(dir.path(), &vendor.config(&default, &v3.pinned));
    let said = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("was made by the key")
    {
        assert!(
            said.elapsed() < ROLLOUT_WITHIN,
            "the version signed by another key was not refused: {}",
            tail(&log)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Every node passes at least once more (its update period, 10 s).
    tokio::time::sleep(Duration::from_secs(12)).await;
    let kept = nodes(&admin, SIMULATED).await;
    let refused_to = epoch();
    let moved: Vec<&str> = kept
        .iter()
        .filter(|node| probe_version(node) != Some("2") || !ready(node))
        .filter_map(|node| node["metadata"]["name"].as_str())
        .collect();
    assert!(
        kept.len() == n && moved.is_empty(),
        "after a version signed by another key, nodes not Ready or not on the version they ran: {moved:?}"
    );
    // A setter dropped into the directory the fleet runs from is loaded
    // once, for every node, and each node writes it from its next pass.
    let dropped_at = epoch();
    drop_plugin(
        &dir.path().join("plugins"),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    let checked_at = until_every_node(&admin, SIMULATED, n, ROLLOUT_WITHIN, |node| {
        crate::kube::condition(node, "KernelSupported").is_some()
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the dropped setter did not reach every node within {ROLLOUT_WITHIN:?}: {}",
            tail(&log)
        )
    });
    assert!(
        std::fs::read_dir(&machines).unwrap().count() > n,
        "no machine folders in the state directory"
    );
    // SIGTERM: the machines' folders go, the operator's file stays.
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "simulate exited {status:?}: {}",
        tail(&log)
    );
    let left: Vec<_> = std::fs::read_dir(&machines)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        ["operator.txt"],
        "the state directory was not cleaned"
    );
    // Its last line is the last thing it did: the work of its exit (the
    // plugin directory's driver, the machines' folders) is done and
    // counted before "stopped", none of it silent after.
    let text = std::fs::read_to_string(&log).unwrap();
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    // A number the last line says, as `name=N`.
    let field = |name: &str| -> u64 {
        last.split_once(&format!("{name}="))
            .and_then(|(_, r)| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .unwrap_or_else(|| panic!("the last line is not \"stopped\" with {name}: {last}"))
    };
    let removed = field("folders_removed") as usize;
    assert!(last.contains("stopped"), "{last}");
    assert!(
        removed >= n,
        "{removed} folders removed for {n} machines: {last}"
    );
    // Incremental passes: every part that stood, or in the test command's
    // checking mode (NODESTATUS_INCREMENTAL_PASSES=check) would have stood,
    // equals the called one's; and parts did stand (or were compared).
    assert_eq!(field("incremental_mismatches"), 0, "{last}");
    assert!(
        field("incremental_skipped") + field("incremental_checked") > 0,
        "no setter's part stood or was compared: {last}"
    );
    let reqs = audit(&cluster.audit_log_path().unwrap(), SIMULATOR_USER);
    assert!(
        !reqs.is_empty(),
        "no request of the simulator in the audit log"
    );
    // The vendor's rollout: one pull for the process (the registry served
    // the new version's blob once; the simulator pulled it once), and each
    // node wrote the change once (a node whose periodic report fell in
    // the same window writes twice, never more).
    let text = std::fs::read_to_string(&log).unwrap();
    let pulled = text
        .lines()
        .filter(|l| l.contains("registry: pulled") && l.contains(&v2.manifest))
        .count();
    assert_eq!(pulled, 1, "the new version was pulled {pulled} times");
    let gets = vendor.blob_gets(&v2.layer);
    assert_eq!(gets, 1, "the registry served the new version {gets} times");
    let status_in = |from: f64, to: f64| {
        reqs.iter()
            .filter(move |r| r.verb == "patch" && r.resource == "nodes/status")
            .filter(move |r| r.at >= from && r.at <= to)
    };
    let mut rollout_patches: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in status_in(rollout_at, rolled_at) {
        let e = rollout_patches.entry(r.name.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(probe_message(&r.body) == Some("2"));
    }
    let once = rollout_patches.values().filter(|(_, c)| *c == 1).count();
    assert_eq!(
        (rollout_patches.len(), once),
        (n, n),
        "not every node wrote the new version's condition exactly once: {rollout_patches:?}"
    );
    let most = rollout_patches.values().map(|(p, _)| *p).max().unwrap_or(0);
    assert!(
        most <= 2,
        "a node wrote its status {most} times during the rollout"
    );
    let told: BTreeSet<String> = events_of(&admin, "PluginPulled")
        .await
        .into_iter()
        .filter(|(_, message)| message.contains(&v2.manifest))
        .map(|(node, _)| node)
        .collect();
    assert_eq!(
        told.len(),
        n,
        "not every node recorded the new version's PluginPulled event"
    );
    // The refused version: no node changed the probe's condition.
    let changed: Vec<&str> = status_in(refused_at, refused_to)
        .filter(|r| probe_message(&r.body).is_some())
        .map(|r| r.name.as_str())
        .collect();
    assert!(
        changed.is_empty(),
        "nodes changed the probe's condition after a version signed by another key: {changed:?}"
    );
    // The directory's rollout: one load for the whole fleet, each node's
    // status written at most twice.
    let loads = text
        .lines()
        .filter(|l| l.contains("plugin loaded") && l.contains("kernel-check"))
        .count();
    assert_eq!(loads, 1, "the dropped setter was loaded {loads} times");
    let mut drop_patches: BTreeMap<&str, usize> = BTreeMap::new();
    for r in status_in(dropped_at, checked_at) {
        *drop_patches.entry(r.name.as_str()).or_default() += 1;
    }
    assert_eq!(
        drop_patches.len(),
        n,
        "not every node wrote the dropped setter's condition"
    );
    let most = drop_patches.values().max().copied().unwrap_or(0);
    assert!(
        most <= 2,
        "a node wrote its status {most} times after the drop"
    );

    // Different, marked nodes.
    assert_eq!(fleet.len(), n);
    let memory: BTreeSet<&str> = fleet
        .iter()
        .filter_map(|n| n["status"]["capacity"]["memory"].as_str())
        .collect();
    assert!(
        memory.len() > 1,
        "every node has the same memory: {memory:?}"
    );
    let ips: BTreeSet<&str> = fleet
        .iter()
        .filter_map(|n| n["status"]["addresses"][0]["address"].as_str())
        .collect();
    assert_eq!(ips.len(), n, "node IPs are not the nodes' own");
    for node in &fleet {
        assert_eq!(
            node["metadata"]["labels"]["nodestatus.io/simulated"],
            "true"
        );
        assert_eq!(
            node["metadata"]["labels"]["nodestatus.test/config"], "run",
            "the run's config was not the simulated nodes'"
        );
        let taints = node["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            taints
                .iter()
                .any(|t| t["key"] == "nodestatus.io/simulated" && t["effect"] == "NoSchedule"),
            "{}: no simulated taint: {taints:?}",
            node["metadata"]["name"]
        );
    }

    // Each node's plugins have their own budget of events: every node's
    // memory-pressure plugin recorded its first condition's event, as the
    // kubelet does, and no plugin's event was dropped.
    let events =
        kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(admin.clone(), "default")
            .list(&Default::default())
            .await
            .unwrap();
    let announced: BTreeSet<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("NodeHasSufficientMemory"))
        .filter_map(|e| e.involved_object.name.clone())
        .collect();
    assert_eq!(
        announced.len(),
        n,
        "not every node's NodeHasSufficientMemory event was recorded: {}",
        tail(&log)
    );
    let cut = (0..=log_steady.min(text.len()))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    let (steady_log, recovery_log) = text.split_at(cut);
    let dropped: Vec<&str> = steady_log
        .lines()
        .filter(|l| l.contains("dropping its events"))
        .collect();
    assert!(
        dropped.is_empty(),
        "a plugin's events were dropped: {dropped:#?}"
    );

    // Start-up spread over the ramp: no second holds more than twice the
    // ramp's even share of the registrations.
    let creates: Vec<f64> = reqs
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "nodes")
        .map(|r| r.at)
        .collect();
    assert_eq!(creates.len(), n, "one registration a node");
    let per_second = n as f64 / ramp.as_secs_f64();
    let peak = peak_per_second(&creates);
    assert!(
        peak as f64 <= 2.0 * per_second + 2.0,
        "registrations not spread: {peak} in one second (ramp {ramp:?}: {per_second}/s)"
    );

    // Leases: every 10 s with jitter, per node and for the fleet.
    let leases = by_node(&reqs, "update", "leases", from, to);
    assert_eq!(leases.len(), n, "every node renews its lease in the window");
    let (mut renewals, mut span) = (0usize, 0.0);
    for (node, times) in &leases {
        for w in times.windows(2) {
            assert!(
                w[1] - w[0] >= 9.0,
                "{node} renewed its lease {:.1} s after the last",
                w[1] - w[0]
            );
        }
        renewals += times.len() - 1;
        span += times.last().unwrap() - times[0];
    }
    let rate = renewals as f64 / span * n as f64;
    let model = n as f64 / 10.0;
    assert!(
        rate <= 1.01 * model && rate >= 0.8 * model,
        "lease renewals {rate:.2}/s for {n} nodes; the kubelet's model is {model}/s"
    );
    let all: Vec<f64> = leases.values().flatten().copied().collect();
    let herd = peak_per_second(&all);
    let mean = all.len() as f64 / (to - from);
    assert!(
        herd as f64 <= 2.0 * mean,
        "{herd} lease renewals in one second, {mean:.1}/s on average: clumped. Per second: {:?}",
        counts_per_second(&all)
    );

    // Status: nothing between reports on idle nodes; the flips of the
    // flapping ones.
    let patches = by_node(&reqs, "patch", "nodes/status", from, to);
    let template = nodestatus_fleet::Template {
        nodes: n,
        name_prefix: "nodestatus-sim".into(),
        seed: 1,
        flapping: 0.01,
        flap_period: Duration::from_secs(20),
        flap_from: Duration::ZERO,
    };
    let flapping: BTreeSet<String> = (0..n)
        .filter(|&i| template.flaps(i))
        .map(|i| template.name(i))
        .collect();
    let idle_patches: Vec<_> = patches
        .iter()
        .filter(|(node, _)| !flapping.contains(*node))
        .collect();
    assert!(
        idle_patches.is_empty(),
        "idle nodes patched their status between reports: {idle_patches:?}"
    );
    let flip_patches: usize = flapping
        .iter()
        .map(|f| patches.get(f).map_or(0, Vec::len))
        .sum();
    let window = to - from;
    let flips_at_most = flapping.len() * (window / 20.0).ceil() as usize;
    assert!(
        flip_patches >= flapping.len() && flip_patches <= flips_at_most + flapping.len(),
        "{flip_patches} status patches from {} flapping nodes in {window:.0} s (flips every 20 s)",
        flapping.len()
    );

    // The node lifecycle controller's view.
    let not_ready: Vec<_> = samples.iter().filter(|s| s.not_ready > 0).collect();
    assert!(
        not_ready.is_empty(),
        "nodes not Ready in the steady state: {not_ready:?}"
    );
    let errors: Vec<_> = reqs
        .iter()
        .filter(|r| r.at >= from && r.at < to && r.code >= 400)
        .collect();
    assert!(
        errors.is_empty(),
        "refused requests in the steady state: {errors:?}"
    );

    // After the outage (issue 32's goals): the peak of all requests in any
    // second at most 3x the steady rate, every lease fresh within 40 s of
    // the first request served again, no node seen not Ready.
    let steady_rate = reqs.iter().filter(|r| r.at >= from && r.at < to).count() as f64 / window;
    let back = reqs
        .iter()
        .filter(|r| r.at > down_at)
        .map(|r| r.at)
        .fold(f64::INFINITY, f64::min);
    assert!(back.is_finite(), "no request after the outage");
    let after: Vec<f64> = reqs
        .iter()
        .filter(|r| r.at >= back && r.at < back + RECOVERY.as_secs_f64())
        .map(|r| r.at)
        .collect();
    let peak = peak_per_second(&after);
    let mut renewed: BTreeMap<&str, f64> = BTreeMap::new();
    for r in reqs
        .iter()
        .filter(|r| r.verb == "update" && r.resource == "leases" && r.code < 300 && r.at >= back)
    {
        renewed.entry(&r.name).or_insert(r.at - back);
    }
    let slowest = renewed.values().copied().fold(0.0, f64::max);
    // The watches start again as one request each, streaming the node
    // first: no list, no GET of a node.
    let relists: Vec<_> = reqs
        .iter()
        .filter(|r| {
            r.at >= back && r.resource == "nodes" && matches!(r.verb.as_str(), "list" | "get")
        })
        .collect();
    assert!(
        relists.is_empty(),
        "lists or GETs of nodes after the outage: {relists:?}"
    );
    assert_eq!(
        renewed.len(),
        n,
        "not every node renewed its lease after the outage"
    );
    assert!(
        slowest <= 40.0,
        "the last lease renewed {slowest:.1} s after the apiserver came back"
    );
    assert!(
        peak as f64 <= 3.0 * steady_rate,
        "{peak} requests in one second after the outage, against {steady_rate:.1}/s steady: a herd. Per second: {:?}",
        counts_per_second(&after)
    );
    let dropped: Vec<&str> = recovery_log
        .lines()
        .filter(|l| l.contains("dropping its events"))
        .collect();
    let not_ready: Vec<_> = recovery.iter().filter(|s| s.not_ready > 0).collect();
    assert!(
        not_ready.is_empty(),
        "nodes not Ready after the outage: {not_ready:?}"
    );
    eprintln!(
        "FLEET| {n} nodes, started {:.0} s before Ready; window {window:.0} s: leases {rate:.2}/s (model {model}/s), peak {herd}/s; idle status patches 0; flapping patches {flip_patches}; engine {:.1} MB RSS; after a {} s outage: peak {peak}/s against {steady_rate:.1}/s steady, every lease within {slowest:.1} s, no node not Ready, {} plugin events dropped; requests a second after it: {:?}; a vendor's new version on every node {:.1} s after the config named it (one pull), one signed by another key refused with every node kept; a new setter on every node {:.1} s after it was dropped",
        ready_at - started,
        samples.last().map_or(0, |s| s.rss_bytes) as f64 / 1e6,
        OUTAGE.as_secs(),
        dropped.len(),
        counts_per_second(&after),
        rolled_at - rollout_at,
        checked_at - dropped_at
    );
}

/// The apiserver's outage in [`a_fleet_is_as_polite_as_the_kubelet`].
const OUTAGE: Duration = Duration::from_secs(25);
/// How long its recovery is watched.
const RECOVERY: Duration = Duration::from_secs(45);
/// How long a plugin rollout may take to reach every node (two update
/// periods, and the directory's debounce or the config's poll and a pull).
const ROLLOUT_WITHIN: Duration = Duration::from_secs(30);

/// The `(node, message)` of each event of `reason` in `default`.
async fn events_of(admin: &kube::Client, reason: &str) -> Vec<(String, String)> {
    kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(admin.clone(), "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| {
            (
                e.involved_object.name.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// Requests a second, from the first second of `times`.
fn counts_per_second(times: &[f64]) -> Vec<usize> {
    let mut bins: BTreeMap<i64, usize> = BTreeMap::new();
    for t in times {
        *bins.entry(t.floor() as i64).or_default() += 1;
    }
    let Some((&first, _)) = bins.first_key_value() else {
        return Vec::new();
    };
    let last = *bins.last_key_value().unwrap().0;
    (first..=last)
        .map(|s| bins.get(&s).copied().unwrap_or(0))
        .collect()
}

fn peak_per_second(times: &[f64]) -> usize {
    let mut bins: BTreeMap<i64, usize> = BTreeMap::new();
    for t in times {
        *bins.entry(t.floor() as i64).or_default() += 1;
    }
    bins.values().copied().max().unwrap_or(0)
}

/// The fleet bench (`scripts/fleet-bench.sh`) of `nodestatus simulate`:
/// the phases of [`crate::fleet_peer::bench`] (idle, 1 % flapping, a
/// vendor's new plugin version through a local registry, one signed by
/// another key, and a 60 s apiserver outage) for
/// `NODESTATUS_FLEET_NODES` nodes, written to `NODESTATUS_FLEET_OUT`;
/// `fleet_peer::bench_kwok` runs the same with kwok.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "minutes; scripts/fleet-bench.sh runs it"]
async fn bench() {
    crate::fleet_peer::bench::<crate::fleet_peer::Simulate>().await;
}

/// `run` and `simulate` on one machine with one `cacheDir` and one plugin
/// name from two versions (issue 48, item 10): each process writes the
/// components it loads in a directory of its own (`run` in
/// `<cacheDir>/registry-plugins`, simulate in its state directory), so
/// neither replaces the other's file; the registry cache beside them is
/// shared, by content. Before, both wrote `<cacheDir>/registry-plugins/probe.wasm`.
#[test]
fn run_and_simulate_on_one_cache_dir_never_write_each_others_plugin_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let vendor = Vendor::start(d);
    let one = vendor.publish(built::PROBE, "one", Signer::Vendor);
    let two = vendor.publish(built::PROBE, "two", Signer::Vendor);
    let cache = d.join("cache");
    let default = default_config();
    let with_cache = |text: String| format!("cacheDir: {}\n{text}", cache.display());

    // `run` with the first version, on the shared test cluster.
    let run_dir = d.join("run");
    std::fs::create_dir_all(run_dir.join("plugins")).unwrap();
    let run_config = run_dir.join("config.yaml");
    std::fs::write(
        &run_config,
        with_cache(format!(
            "pluginDir: {}\n{}",
            run_dir.join("plugins").display(),
            vendor.config(&default, &one.pinned)
        )),
    )
    .unwrap();
    let mut run = crate::registry::engine(
        &run_dir,
        "shared-cache-node",
        &run_config,
        crate::registry::free_addr(),
    );
    let run_file = cache.join(format!("registry-plugins/{FLEET_PLUGIN}.wasm"));
    let holds = |file: &Path, version: &Published| {
        std::fs::read(file).is_ok_and(|b| Digest::of(&b) == version.layer)
    };
    let run_log = run_dir.join("shared-cache-node.log");
    crate::process::wait_until(90, &run_log, "run never wrote its version", || {
        holds(&run_file, &one)
    });

    // simulate with the second, on a cluster of its own, the same cacheDir.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim_dir = d.join("simulate");
    std::fs::create_dir_all(&sim_dir).unwrap();
    let cluster = rt.block_on(cluster(&sim_dir.join("cluster")));
    let sim_config = sim_dir.join("config.yaml");
    std::fs::write(
        &sim_config,
        with_cache(vendor.config(&default, &two.pinned)),
    )
    .unwrap();
    let kubeconfig = sim_dir.join("kubeconfig-simulator");
    std::fs::write(
        &kubeconfig,
        cluster.kubeconfig_yaml(SIMULATOR_USER, SIMULATOR_TOKEN),
    )
    .unwrap();
    // No setter but the image plugin: nothing else to compile.
    std::fs::create_dir_all(sim_dir.join("plugins")).unwrap();
    let mut c = Command::new(exe());
    c.args(["simulate", "--nodes", "2", "--ramp", "0s", "--config"])
        .arg(&sim_config)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--plugin-dir")
        .arg(sim_dir.join("plugins"))
        .arg("--state-dir")
        .arg(sim_dir.join("machines"))
        .env("RUST_LOG", "info")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(sim_dir.join("simulate.log")).unwrap());
    nodestatus_controlplane::kill_with_parent(&mut c);
    let mut sim = c.spawn().unwrap();
    let sim_file = sim_dir.join(format!("machines/registry-plugins/{FLEET_PLUGIN}.wasm"));
    crate::process::wait_until(
        90,
        &sim_dir.join("simulate.log"),
        "simulate never wrote its version in its own directory",
        || holds(&sim_file, &two),
    );
    // A few of run's pull rounds and passes later, run's file is its own.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        holds(&run_file, &one),
        "run's {} was replaced: {}",
        run_file.display(),
        tail(&run_log)
    );
    assert!(holds(&sim_file, &two));
    for child in [&mut run, &mut sim] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    drop(cluster);
}

/// A node's own credential cannot run a fleet: the Node authorizer
/// refuses every other node's registration (an apiserver of 1.28 or
/// later refuses the credential at once, from its SelfSubjectReview), and
/// simulate exits with the error instead of running nodes that never
/// register.
#[test]
fn a_node_credential_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = crate::kube::write_node_kubeconfig(dir.path(), "reg-node");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    drop_plugin(&plugins, "ready.wasm", Path::new(built::READY));
    let mut c = simulator(&kubeconfig, &plugins, dir.path(), 3);
    c.args(["--ramp", "0s"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("log")).unwrap());
    let mut child = c.spawn().unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!(
                "still running after 60 s:\n{}",
                tail(&dir.path().join("log"))
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stderr = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("every simulated node stopped on a permission error")
            || stderr.contains("is node identity"),
        "{stderr}"
    );
}
