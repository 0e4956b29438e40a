//! The real-node suite (issue 14): a real kubelet 1.37.2 on containerd 1.6
//! with runc and a CNI bridge, on this machine, beside etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler from the same Go module build;
//! nodestatus's own container image imported into containerd, and the
//! DaemonSet of `deploy/kubernetes/` applied to it.
//!
//! It checks, on that node:
//! - **companion mode**: the DaemonSet's pod runs beside the kubelet for
//!   `NODESTATUS_REALNODE_SECONDS` (default 180); its plugins' condition,
//!   label, annotation and extended resource reach the node; the audit log
//!   shows that neither the kubelet nor nodestatus changes a field the other
//!   wrote, and that no field flaps; the kubelet's Ready stays True;
//! - **least privilege**: the kubelet's credential, which the DaemonSet
//!   mounts, writes its own Node, Node status and Lease, and is refused
//!   (403) for another node's;
//! - **an extended resource**: the disk reporter, from the image, counts a
//!   fixture mount (a tmpfs standing in for a local SSD: this machine has no
//!   spare disk) as `example.com/local-disk: 1`, allocatable too; the real
//!   scheduler places a pod that requests it, and leaves one that requests 2
//!   Pending.
//!
//! Everything is torn down at the end, also on failure (see [`Node`]).
//! It needs root, cgroups, and the binaries of `scripts/ensure-apiserver.sh`;
//! without them it fails, naming what is missing. `NODESTATUS_SKIP_REALNODE=1`
//! skips it (it then says so). Runs of it on one machine take turns (a lock
//! file): there is one kubelet port and one CNI bridge.
//!
//! It is not run by `cargo test --workspace` (`test = false`): run it with
//! `cargo test -p nodestatus-tests --test realnode`. It prints a `REALNODE|`
//! line for every figure it measured; docs/real-node.md quotes them.

mod audit;
mod parity;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node as KNode, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodestatus_controlplane::{EmbeddedApiserver, Extras, NodeParts, node_token};
use serde_json::{Value, json};

use audit::{TEST_AGENT, Writer};

/// The kubelet's node.
const NODE: &str = "realnode-a";
/// Another node, registered by the admin: the node's credential must not
/// write it.
const OTHER: &str = "realnode-other";
/// The second node, registered by `nodestatus run` on the same machine.
const NODE_B: &str = "realnode-b";
/// The extended resource the disk reporter advertises.
const RESOURCE: &str = "example.com/local-disk";
/// Where the DaemonSet's pod sees the fixture mount.
const FAKE_DISK: &str = "/var/lib/nodestatus/fake-disk";

/// The companion config the test puts in the manifest's ConfigMap: the
/// vendor setters only (the kubelet's own set would fight the kubelet).
const COMPANION_CONFIG: &str = "\
# companion mode beside the kubelet: a vendor's setters only. An unchanged
# status is reported every minute (default 5m), so that the companion window
# (3 minutes) holds several writes of each writer.
companion: true
nodeStatusReportFrequency: 1m
plugins:
  kernel-check:
    config: {minKernel: \"4.19\"}
  disk:
    paths: [/var/lib/nodestatus/fake-disk]
    config:
      mounts: [{path: /var/lib/nodestatus/fake-disk, name: fake-ssd0}]
      extendedResource: {name: example.com/local-disk, mounts: [fake-ssd0]}
  gpu:
    enabled: false
";

/// The release of the kubelet beside which the suite runs (`kubelet
/// --version`: `Kubernetes v1.36.3`), as `nodestatus once
/// --kubernetes-version` takes it: what nodestatus writes is compared with
/// what that release's kubelet writes.
fn release() -> String {
    static RELEASE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RELEASE
        .get_or_init(|| {
            let kubelet = nodestatus_controlplane::apiserver_binary().with_file_name("kubelet");
            let out = Command::new(&kubelet)
                .arg("--version")
                .output()
                .unwrap_or_else(|e| panic!("{}: {e}", kubelet.display()));
            let text = String::from_utf8_lossy(&out.stdout);
            text.split_whitespace()
                .last()
                .unwrap_or_else(|| panic!("{} --version said {text:?}", kubelet.display()))
                .to_owned()
        })
        .clone()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_owned()
}

fn figure(name: &str, value: impl std::fmt::Display) {
    println!("REALNODE| {name} | {value}");
}

/// Runs a command, failing with its output when it fails.
fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(text)
}

fn script(name: &str) -> Command {
    Command::new(repo().join("scripts").join(name))
}

/// The machine can run a real node, or the reason it cannot.
fn preflight() -> anyhow::Result<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    ensure!(
        uid == 0,
        "the real-node suite needs root (containerd, runc and the kubelet do); run it as root, or set NODESTATUS_SKIP_REALNODE=1 to skip it on this machine"
    );
    ensure!(
        Path::new("/sys/fs/cgroup/memory").is_dir()
            || Path::new("/sys/fs/cgroup/cgroup.controllers").is_file(),
        "no cgroup hierarchy under /sys/fs/cgroup: the kubelet cannot run here (set NODESTATUS_SKIP_REALNODE=1 to skip)"
    );
    let kubelet = nodestatus_controlplane::apiserver_binary().with_file_name("kubelet");
    ensure!(
        kubelet.exists(),
        "no kubelet at {}: run scripts/ensure-apiserver.sh (it builds it with the apiserver)",
        kubelet.display()
    );
    let bin = std::env::var_os("NODESTATUS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // target/<profile>/deps/realnode-<hash> -> target/<profile>/nodestatus
            let exe = std::env::current_exe().expect("the test's own path");
            exe.parent()
                .and_then(Path::parent)
                .map(|d| d.join("nodestatus"))
                .unwrap_or_default()
        });
    ensure!(
        bin.is_file(),
        "no nodestatus binary at {}: run `cargo build -p nodestatus --bin nodestatus` first (or set NODESTATUS_BIN)",
        bin.display()
    );
    Ok(bin)
}

/// Holds the machine-wide lock of real-node runs until dropped.
struct MachineLock(#[expect(dead_code, reason = "held for its lock")] std::fs::File);

fn machine_lock() -> anyhow::Result<MachineLock> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/run/nodestatus-real-node.lock")
        .context("opening /run/nodestatus-real-node.lock")?;
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        println!("another real-node run holds /run/nodestatus-real-node.lock: waiting");
        // SAFETY: as above.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        ensure!(r == 0, "flock failed: {}", std::io::Error::last_os_error());
    }
    Ok(MachineLock(f))
}

/// The node (containerd and the kubelet) and what runs on it. Dropping it
/// tears it all down: the test's pods and the DaemonSet deleted through the
/// apiserver while the kubelet still runs (so it stops their sandboxes
/// through the CRI, with CNI DEL), then `scripts/real-node.sh down`.
struct Node {
    dir: PathBuf,
    admin_kubeconfig: PathBuf,
    down: bool,
}

impl Node {
    fn kubectl(&self) -> Command {
        let mut c = Command::new("kubectl");
        c.arg(format!("--kubeconfig={}", self.admin_kubeconfig.display()));
        c
    }

    /// Deletes the test's workloads and waits (up to 60 s) until the kubelet
    /// has removed their pods; then stops the node. Idempotent.
    fn tear_down(&mut self) -> anyhow::Result<Duration> {
        let t = Instant::now();
        if self.down {
            return Ok(Duration::ZERO);
        }
        self.down = true;
        let quiet = |c: &mut Command| {
            let _ = c.stdout(Stdio::null()).stderr(Stdio::null()).status();
        };
        quiet(self.kubectl().args([
            "delete",
            "daemonset",
            "-n",
            "nodestatus",
            "nodestatus",
            "--ignore-not-found",
            "--wait=false",
        ]));
        for ns in ["default", "nodestatus"] {
            quiet(self.kubectl().args([
                "delete",
                "pods",
                "--all",
                "-n",
                ns,
                "--grace-period=1",
                "--wait=false",
            ]));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let out = self
                .kubectl()
                .args(["get", "pods", "-A", "-o", "name"])
                .output();
            match out {
                Ok(o) if o.status.success() && o.stdout.is_empty() => break,
                Ok(o) if !o.status.success() => break, // the apiserver is gone
                _ => std::thread::sleep(Duration::from_millis(500)),
            }
        }
        run(script("real-node.sh").arg("down").arg(&self.dir))
            .context("scripts/real-node.sh down failed")?;
        Ok(t.elapsed())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Err(e) = self.tear_down() {
            println!("tear-down failed: {e:#}");
        }
    }
}

/// The manifests of `deploy/kubernetes/`, with the host paths moved under
/// `host` (the kubelet's credential, its root dir's pki and statfs
/// directory, the plugin directory, NFD's feature files), the vendor setters of the image as the
/// plugin directory, the companion config, the fixture mount, and a free
/// port for the engine's HTTP endpoint (the DaemonSet runs on the host's
/// network, and other tests use the default port).
fn manifests(host: &Path, kubelet_root: &Path, port: u16) -> anyhow::Result<Vec<Value>> {
    let read = |name: &str| -> anyhow::Result<Value> {
        let p = repo().join("deploy/kubernetes").join(name);
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        Ok(serde_yaml::from_str(&text)?)
    };
    let namespace = read("namespace.yaml")?;
    let mut configmap = read("configmap.yaml")?;
    let mut ds = read("daemonset.yaml")?;
    configmap["data"]["config.yaml"] = json!(COMPANION_CONFIG);

    let spec = &mut ds["spec"]["template"]["spec"];
    let moved = [
        (
            "kubelet-kubeconfig",
            host.join("etc/kubernetes/kubelet.conf"),
        ),
        ("kubelet-pki", kubelet_root.join("pki")),
        ("plugins", host.join("etc/nodestatus/plugins")),
        ("kubelet-fs", kubelet_root.join("nodestatus-statfs")),
        ("cache", host.join("var/cache/nodestatus")),
        (
            "features-d",
            host.join("etc/kubernetes/node-feature-discovery/features.d"),
        ),
    ];
    let volumes = spec["volumes"]
        .as_array_mut()
        .context("the DaemonSet has no volumes")?;
    for (name, path) in &moved {
        let v = volumes
            .iter_mut()
            .find(|v| v["name"] == *name)
            .with_context(|| {
                format!("the DaemonSet has no volume {name}: update tests/realnode")
            })?;
        v["hostPath"]["path"] = json!(path.display().to_string());
    }
    volumes.push(json!({"name": "fake-disk", "hostPath": {"path": host.join("fake-disk").display().to_string(), "type": "Directory"}}));
    let c = &mut spec["containers"][0];
    let args = c["args"]
        .as_array_mut()
        .context("the container has no args")?;
    let mut replaced = 0;
    for a in args.iter_mut() {
        let s = a.as_str().unwrap_or_default();
        if s.starts_with("--plugin-dir=") {
            *a = json!("--plugin-dir=/usr/lib/nodestatus/vendor-plugins");
            replaced += 1;
        } else if s.starts_with("--address=") {
            *a = json!(format!("--address=0.0.0.0:{port}"));
            replaced += 1;
        }
    }
    ensure!(
        replaced == 2,
        "the DaemonSet's args changed: update tests/realnode ({args:?})"
    );
    c["ports"][0]["containerPort"] = json!(port);
    c["volumeMounts"]
        .as_array_mut()
        .context("the container has no volumeMounts")?
        .push(json!({"name": "fake-disk", "mountPath": FAKE_DISK}));
    Ok(vec![namespace, configmap, ds])
}

/// Waits (up to 30 s) until the serviceaccount controller has made
/// namespace `ns`'s `default` ServiceAccount: the ServiceAccount admission
/// refuses pods until then.
async fn default_service_account(node: &Node, ns: &str) -> anyhow::Result<()> {
    let made = until(
        Duration::from_secs(30),
        Duration::from_millis(250),
        || async {
            let out = node
                .kubectl()
                .args(["get", "serviceaccount", "default", "-n", ns, "-o", "name"])
                .output()
                .ok()?;
            out.status.success().then_some(())
        },
    )
    .await;
    ensure!(
        made.is_some(),
        "the serviceaccount controller made no default ServiceAccount in {ns} within 30 s"
    );
    Ok(())
}

/// A plain HTTP/1.0 GET on loopback: its status code and body.
fn http_get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// The last lines of a pod's container logs, from the kubelet's
/// `/var/log/pods` (the apiserver cannot reach this kubelet, which serves
/// on loopback only).
fn pod_log(namespace: &str, pod: &str) -> String {
    pod_log_files(namespace, pod)
        .iter()
        .map(|f| format!("--- {}\n{}\n", f.display(), log_tail(f, 20)))
        .collect()
}

/// The kubelet's log files of a pod's containers, under `/var/log/pods`.
fn pod_log_files(namespace: &str, pod: &str) -> Vec<PathBuf> {
    let prefix = format!("{namespace}_{pod}_");
    let entries = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect()
    };
    entries(Path::new("/var/log/pods"))
        .into_iter()
        .filter(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .flat_map(|d| entries(&d))
        .flat_map(|c| entries(&c))
        .collect()
}

/// CPU seconds (user and system, the process's own and its waited-for
/// children's) of the processes whose command line holds one of `markers`,
/// summed by process name.
fn cpu_by_process(markers: &[String]) -> std::collections::BTreeMap<String, f64> {
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut out = std::collections::BTreeMap::new();
    for d in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(d.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !markers.iter().any(|m| cmdline.contains(m.as_str())) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(d.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        // After the name: state is field 3; utime, stime, cutime, cstime
        // are fields 14 to 17.
        let f: Vec<f64> = stat[close + 1..]
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0.0))
            .collect();
        if f.len() > 14 {
            *out.entry(name).or_insert(0.0) += (f[11] + f[12] + f[13] + f[14]) / tick;
        }
    }
    out
}

/// `nodestatus once` in a pod on the node: the DaemonSet's pod template
/// (its image, security context and volumes) with the image's default
/// plugin set, and the shipped ConfigMap's config (with the kubelet's
/// `--hostname-override`) in a ConfigMap of its own. The Node it prints, and
/// each setter failure it logs.
async fn once_in_pod(
    node: &Node,
    pods: &Api<Pod>,
    template: &Value,
) -> anyhow::Result<(Value, Vec<String>)> {
    let shipped = std::fs::read_to_string(repo().join("deploy/kubernetes/configmap.yaml"))?;
    let mut cm: Value = serde_yaml::from_str(&shipped)?;
    cm["metadata"]["name"] = json!("nodestatus-once-config");
    let config = cm["data"]["config.yaml"]
        .as_str()
        .context("the shipped ConfigMap has no config.yaml")?;
    cm["data"]["config.yaml"] = json!(format!("hostnameOverride: {NODE}\n{config}"));
    let mut spec = template["spec"].clone();
    spec["nodeName"] = json!(NODE);
    spec["restartPolicy"] = json!("Never");
    let c = &mut spec["containers"][0];
    c["args"] = json!([
        "once",
        "--config=/etc/nodestatus/config/config.yaml",
        "--plugin-dir=/usr/lib/nodestatus/plugins",
        format!("--node-name={NODE}"),
        "--cache-dir=/var/cache/nodestatus",
        format!("--kubernetes-version={}", release()),
    ]);
    for k in ["ports", "livenessProbe", "readinessProbe"] {
        c.as_object_mut().context("a container")?.remove(k);
    }
    for v in spec["volumes"].as_array_mut().context("volumes")? {
        if v["name"] == "config" {
            v["configMap"]["name"] = json!("nodestatus-once-config");
        }
    }
    // No labels: the DaemonSet must not adopt it.
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nodestatus-once", "namespace": "nodestatus"},
        "spec": spec,
    });
    let file = node.dir.join("once-pod.json");
    std::fs::write(
        &file,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": [cm, pod]}))?,
    )?;
    run(node.kubectl().arg("apply").arg("-f").arg(&file))?;
    let phase = until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let p = serde_json::to_value(pods.get("nodestatus-once").await.ok()?).ok()?;
            let phase = p["status"]["phase"].as_str()?.to_owned();
            matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
        },
    )
    .await
    .context("the pod did not finish within 120 s")?;
    let (stdout, stderr) = pod_output("nodestatus", "nodestatus-once");
    ensure!(
        phase == "Succeeded",
        "the pod {phase}; its stderr:\n{}",
        stderr.lines().rev().take(20).collect::<Vec<_>>().join("\n")
    );
    let failures = stderr
        .lines()
        .filter(|l| l.contains("setter failed") || l.contains("plugin refused"))
        .map(|l| format!("once in a pod: {l}"))
        .collect();
    let node_json = serde_json::from_str(&stdout)
        .with_context(|| format!("its stdout is not a Node: {stdout:.300}"))?;
    Ok((node_json, failures))
}

/// A finished pod's stdout and stderr, from the kubelet's CRI log files
/// (`<time> <stream> <P|F> <text>`; `P` is a partial line).
fn pod_output(namespace: &str, pod: &str) -> (String, String) {
    let (mut out, mut err) = (String::new(), String::new());
    for f in pod_log_files(namespace, pod) {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for line in text.lines() {
            let mut parts = line.splitn(4, ' ');
            let (_, stream, tag) = (parts.next(), parts.next(), parts.next());
            let body = parts.next().unwrap_or("");
            let to = if stream == Some("stdout") {
                &mut out
            } else {
                &mut err
            };
            to.push_str(body);
            if tag != Some("P") {
                to.push('\n');
            }
        }
    }
    (out, err)
}

/// A written value in a line: `(removed)`, or at most 80 characters.
fn short(v: &Option<Value>) -> String {
    match v {
        None => "(removed)".into(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 80 {
                format!("{}…", s.chars().take(80).collect::<String>())
            } else {
                s
            }
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("0.0.0.0:0")?
        .local_addr()?
        .port())
}

fn condition<'a>(n: &'a Value, t: &str) -> Option<&'a Value> {
    n["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

fn ready(n: &Value) -> Option<String> {
    condition(n, "Ready").and_then(|c| c["status"].as_str().map(str::to_owned))
}

/// Polls `f` every `every` until it gives `Some`, for at most `limit`.
async fn until<T, F, Fut>(limit: Duration, every: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let l: Vec<&str> = text.lines().collect();
    l[l.len().saturating_sub(lines)..].join("\n")
}

/// A client with `token` and the test's user agent (so that its writes are
/// told apart from the kubelet's and nodestatus's in the audit log).
fn client(cluster: &EmbeddedApiserver, token: &str) -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::new(cluster.server.parse()?);
    config.accept_invalid_certs = true;
    config.auth_info.token = Some(token.to_owned().into());
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(TEST_AGENT),
    ));
    Ok(kube::Client::try_from(config)?)
}

/// What the least-privilege check writes.
#[derive(Debug, Clone, Copy)]
enum Object {
    Node,
    Status,
    Lease,
}

/// Patches node `name`'s Node, Node status or Lease (in `kube-node-lease`)
/// with `client`; the status code.
async fn try_write(client: &kube::Client, what: Object, name: &str) -> u16 {
    let pp = PatchParams::default();
    let note = Patch::Merge(
        json!({"metadata": {"annotations": {"realnode.nodestatus.io/least-privilege": "written"}}}),
    );
    let nodes: Api<KNode> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    match what {
        Object::Node => code(&nodes.patch(name, &pp, &note).await),
        Object::Status => code(
            &nodes
                .patch_status(name, &pp, &Patch::Merge(json!({"status": {}})))
                .await,
        ),
        Object::Lease => code(&leases.patch(name, &pp, &note).await),
    }
}

/// The status code of a request's result: 200 for success.
fn code<T>(r: &Result<T, kube::Error>) -> u16 {
    match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(_) => 0,
    }
}

async fn suite(work: &Path, bin: &Path) -> anyhow::Result<()> {
    let seconds: u64 = std::env::var("NODESTATUS_REALNODE_SECONDS")
        .ok()
        .map(|s| {
            s.parse()
                .context("NODESTATUS_REALNODE_SECONDS must be whole seconds")
        })
        .transpose()?
        .unwrap_or(180);

    let t = Instant::now();
    let cache =
        run(script("real-node.sh").arg("prepare")).context("scripts/real-node.sh prepare")?;
    figure(
        "prepare (packages, pause and busybox images)",
        format!("{:.1} s", t.elapsed().as_secs_f64()),
    );
    let t = Instant::now();
    let wasm_dir = Path::new(nodestatus_tests::built::DISK)
        .parent()
        .context("the plugins' directory")?;
    // In the node's directory: `scripts/real-node.sh up` removes the directory
    // of a node left by a killed run, and this with it.
    let image = work.join("node/nodestatus-image.tar");
    run(script("build-image.sh")
        .arg("--bin")
        .arg(bin)
        .arg("--wasm")
        .arg(wasm_dir)
        .arg("--out")
        .arg(&image))
    .context("scripts/build-image.sh")?;
    figure(
        "nodestatus image built (stripped debug binary, plugins)",
        format!(
            "{:.1} s, {} MB",
            t.elapsed().as_secs_f64(),
            std::fs::metadata(&image)?.len() / 1_000_000
        ),
    );

    let t = Instant::now();
    let cluster = EmbeddedApiserver::start_with_parts(
        &work.join("cluster"),
        &[NODE, OTHER, NODE_B],
        false,
        true,
        Extras {
            audit_log: true,
            node_lifecycle_grace: Some(nodestatus_controlplane::DEFAULT_NODE_MONITOR_GRACE),
            ..Default::default()
        },
        NodeParts {
            more_controllers: vec![
                "daemonset",
                "serviceaccount",
                "serviceaccount-token",
                "root-ca-cert-publisher",
            ],
            scheduler: true,
            audit_node_writes: true,
        },
    )
    .await?;
    figure(
        "control plane ready (etcd, apiserver, controller-manager, scheduler)",
        format!("{:.1} s", t.elapsed().as_secs_f64()),
    );
    let admin = client(&cluster, &cluster.admin_token)?;
    let nodes: Api<KNode> = Api::all(admin.clone());
    let node_kubeconfig = cluster.write_node_kubeconfig(NODE)?;
    let node_dir = work.join("node");
    std::fs::create_dir_all(&node_dir)?;
    let mut node = Node {
        dir: node_dir.clone(),
        admin_kubeconfig: cluster.write_admin_kubeconfig()?,
        down: false,
    };

    // containerd and the kubelet.
    let t = Instant::now();
    run(script("real-node.sh")
        .arg("up")
        .arg(&node_dir)
        .arg(&node_kubeconfig)
        .arg(NODE))
    .context("scripts/real-node.sh up")?;
    figure(
        "containerd and kubelet up (healthz)",
        format!("{:.1} s", t.elapsed().as_secs_f64()),
    );
    let kubelet_log = node_dir.join("kubelet.log");
    let registered = until(
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async { nodes.get_opt(NODE).await.ok().flatten().map(|_| ()) },
    )
    .await;
    ensure!(
        registered.is_some(),
        "the kubelet did not register {NODE} within 60 s; its log:\n{}",
        log_tail(&kubelet_log, 30)
    );
    figure(
        "node registered, from the kubelet's start",
        format!("{:.1} s", t.elapsed().as_secs_f64()),
    );
    let got_ready = until(
        Duration::from_secs(90),
        Duration::from_millis(250),
        || async {
            let n = serde_json::to_value(nodes.get(NODE).await.ok()?).ok()?;
            (ready(&n).as_deref() == Some("True")).then_some(())
        },
    )
    .await;
    ensure!(
        got_ready.is_some(),
        "{NODE} was not Ready within 90 s; the kubelet's log:\n{}",
        log_tail(&kubelet_log, 30)
    );
    figure(
        "node Ready=True, from the kubelet's start",
        format!("{:.1} s", t.elapsed().as_secs_f64()),
    );
    // A disk too full for the kubelet's eviction thresholds makes it evict
    // pods and delete images: say so rather than fail later for no clear
    // reason.
    let n = serde_json::to_value(nodes.get(NODE).await?)?;
    ensure!(
        condition(&n, "DiskPressure").is_some_and(|c| c["status"] == "False"),
        "the kubelet reports DiskPressure on this machine ({}): free some disk (it evicts below 10% free on the kubelet's filesystem, 15% on containerd's)",
        condition(&n, "DiskPressure").cloned().unwrap_or_default()
    );
    // The kubelet's nodefs and imagefs are both the node's disk
    // (scripts/real-node.sh), never the build machine's, whose free space
    // the build beside this suite changes.
    let summary = until(Duration::from_secs(30), Duration::from_secs(1), || async {
        let text =
            run(Command::new("curl").args(["-sfk", "https://127.0.0.1:10250/stats/summary"]))
                .ok()?;
        let s: Value = serde_json::from_str(&text).ok()?;
        s["node"]["runtime"]["imageFs"]["capacityBytes"]
            .is_u64()
            .then_some(s)
    })
    .await
    .context("the kubelet's /stats/summary has no imagefs after 30 s")?;
    let disk = nodestatus_runtime::facts::statvfs(&node_dir.join("disk"))?;
    for (name, fs) in [
        ("nodefs", &summary["node"]["fs"]),
        ("imagefs", &summary["node"]["runtime"]["imageFs"]),
    ] {
        ensure!(
            fs["capacityBytes"].as_u64() == Some(disk.total_bytes),
            "the kubelet's {name} is not the node's disk ({} bytes): {fs}",
            disk.total_bytes
        );
    }

    let t = Instant::now();
    run(script("real-node.sh")
        .arg("import")
        .arg(&node_dir)
        .arg(&image))?;
    figure(
        "nodestatus image imported",
        format!("{:.1} s", t.elapsed().as_secs_f64()),
    );
    let images = run(script("real-node.sh")
        .args(["ctr"])
        .arg(&node_dir)
        .args(["images", "ls", "-q"]))?;
    for want in [
        "registry.k8s.io/pause:3.10.2",
        "docker.io/library/busybox:latest",
        "docker.io/library/nodestatus:0.1.0",
    ] {
        ensure!(
            images.lines().any(|l| l == want),
            "{want} is not in containerd: {images}"
        );
    }
    println!(
        "images in containerd (k8s.io), from {}: {}",
        cache.trim(),
        images.split_whitespace().collect::<Vec<_>>().join(" ")
    );

    // The host side of the DaemonSet's volumes.
    let host = node_dir.join("host");
    let kubelet_root = node_dir.join("kubelet");
    std::fs::create_dir_all(host.join("etc/kubernetes"))?;
    std::fs::create_dir_all(host.join("etc/nodestatus/plugins"))?;
    std::fs::create_dir_all(host.join("fake-disk"))?;
    let kubelet_conf = host.join("etc/kubernetes/kubelet.conf");
    std::fs::copy(node_dir.join("kubelet.kubeconfig"), &kubelet_conf)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&kubelet_conf, std::fs::Permissions::from_mode(0o600))?;
    }
    // The fixture: a small tmpfs stands in for a local SSD (no spare device here).
    run(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=16m", "nodestatus-fake-ssd0"])
        .arg(host.join("fake-disk")))
    .context("mounting the fixture tmpfs")?;

    // The manifests.
    let port = free_port()?;
    let docs = manifests(&host, &kubelet_root, port)?;
    let pod_template = docs[2]["spec"]["template"].clone();
    let manifest_file = work.join("manifests.json");
    std::fs::write(
        &manifest_file,
        serde_json::to_vec_pretty(&json!({"apiVersion": "v1", "kind": "List", "items": docs}))?,
    )?;
    // The ServiceAccount admission refuses pods until the namespace's
    // `default` ServiceAccount exists.
    run(node
        .kubectl()
        .arg("apply")
        .arg("-f")
        .arg(repo().join("deploy/kubernetes/namespace.yaml")))?;
    default_service_account(&node, "nodestatus").await?;
    let applied = Instant::now();
    run(node.kubectl().arg("apply").arg("-f").arg(&manifest_file))?;

    let pods: Api<Pod> = Api::namespaced(admin.clone(), "nodestatus");
    let pod_running = until(
        Duration::from_secs(120),
        Duration::from_millis(500),
        || async {
            let list = pods.list(&Default::default()).await.ok()?;
            let p = list.items.into_iter().next()?;
            let v = serde_json::to_value(&p).ok()?;
            let running = v["status"]["phase"] == "Running"
                && v["status"]["containerStatuses"][0]["state"]["running"].is_object();
            let ready = v["status"]["containerStatuses"][0]["ready"] == true;
            running.then_some((v, ready))
        },
    )
    .await;
    let Some((pod, pod_ready)) = pod_running else {
        let list = pods.list(&Default::default()).await?;
        let status: Vec<_> = list.items.iter().map(|p| &p.status).collect();
        bail!(
            "the DaemonSet's pod did not run within 120 s: {}\nthe kubelet's log:\n{}",
            serde_json::to_string(&status)?,
            log_tail(&kubelet_log, 30)
        );
    };
    figure(
        "DaemonSet pod Running, from kubectl apply",
        format!("{:.1} s", applied.elapsed().as_secs_f64()),
    );
    let pod_name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ensure!(
        pod["spec"]["nodeName"] == NODE,
        "the pod runs on {}",
        pod["spec"]["nodeName"]
    );

    // The plugins' fields reach the node.
    let fields = until(
        Duration::from_secs(90),
        Duration::from_millis(500),
        || async {
            let n = serde_json::to_value(nodes.get(NODE).await.ok()?).ok()?;
            let ok = condition(&n, "KernelSupported").is_some()
                && condition(&n, "ReadonlyFilesystem").is_some()
                && n["metadata"]["labels"]["kernel.example.com/version"].is_string()
                && n["metadata"]["annotations"]["disk.nodestatus.io/fake-ssd0"].is_string()
                && n["status"]["allocatable"][RESOURCE] == "1";
            ok.then_some(n)
        },
    )
    .await;
    let Some(n) = fields else {
        let n = serde_json::to_value(nodes.get(NODE).await?)?;
        let p = serde_json::to_value(pods.get(&pod_name).await?)?;
        bail!(
            "the plugins' fields did not reach the node within 90 s: {}\nthe pod's container: {}\nits log:\n{}",
            serde_json::to_string(&n["status"])?,
            p["status"]["containerStatuses"],
            pod_log("nodestatus", &pod_name)
        );
    };
    figure(
        "plugin fields on the node, from kubectl apply",
        format!("{:.1} s", applied.elapsed().as_secs_f64()),
    );
    figure(
        "the DaemonSet container ready at once (its readinessProbe, /readyz)",
        pod_ready,
    );
    ensure!(
        n["status"]["capacity"][RESOURCE] == "1",
        "capacity of {RESOURCE}: {}",
        n["status"]["capacity"][RESOURCE]
    );
    ensure!(
        condition(&n, "ReadonlyFilesystem").unwrap()["status"] == "False",
        "the fixture mount is read-write: {}",
        condition(&n, "ReadonlyFilesystem").unwrap()
    );
    println!(
        "plugins' fields: KernelSupported={} kernel.example.com/version={} ReadonlyFilesystem={} {RESOURCE}: capacity {} allocatable {}\n  {}",
        condition(&n, "KernelSupported").unwrap()["status"],
        n["metadata"]["labels"]["kernel.example.com/version"],
        condition(&n, "ReadonlyFilesystem").unwrap()["status"],
        n["status"]["capacity"][RESOURCE],
        n["status"]["allocatable"][RESOURCE],
        n["metadata"]["annotations"]["disk.nodestatus.io/fake-ssd0"]
    );

    // The extended resource is schedulable: the real scheduler places a pod
    // that requests 1, and leaves one that requests 2 (more than the node
    // has) Pending.
    default_service_account(&node, "default").await?;
    let test_pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let pod_for = |name: &str, count: u32| -> anyhow::Result<Pod> {
        Ok(serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 0,
                "containers": [{
                    "name": "main", "image": "busybox:latest", "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "resources": {"requests": {RESOURCE: count.to_string()}, "limits": {RESOURCE: count.to_string()}}
                }]
            }
        }))?)
    };
    let created = Instant::now();
    test_pods
        .create(&PostParams::default(), &pod_for("wants-local-disk", 1)?)
        .await?;
    test_pods
        .create(
            &PostParams::default(),
            &pod_for("wants-two-local-disks", 2)?,
        )
        .await?;
    let scheduled = until(
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async {
            let p = serde_json::to_value(test_pods.get("wants-local-disk").await.ok()?).ok()?;
            (p["spec"]["nodeName"] == NODE).then_some(())
        },
    )
    .await;
    ensure!(
        scheduled.is_some(),
        "the scheduler did not place the pod that requests {RESOURCE}: 1 on {NODE} within 60 s"
    );
    figure(
        "pod requesting 1 local-disk scheduled",
        format!("{:.1} s", created.elapsed().as_secs_f64()),
    );
    let running = until(
        Duration::from_secs(60),
        Duration::from_millis(250),
        || async {
            let p = serde_json::to_value(test_pods.get("wants-local-disk").await.ok()?).ok()?;
            (p["status"]["phase"] == "Running").then_some(())
        },
    )
    .await;
    ensure!(
        running.is_some(),
        "the pod that requests {RESOURCE}: 1 did not run within 60 s: {}",
        serde_json::to_string(&test_pods.get("wants-local-disk").await?)?
    );
    figure(
        "pod requesting 1 local-disk Running (busybox, CNI bridge)",
        format!("{:.1} s", created.elapsed().as_secs_f64()),
    );
    let two = serde_json::to_value(test_pods.get("wants-two-local-disks").await?)?;
    ensure!(
        two["spec"]["nodeName"].is_null(),
        "a pod that requests 2 of a resource the node has 1 of was placed: {}",
        two["spec"]
    );
    let unschedulable = two["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"))
        .cloned()
        .unwrap_or_default();
    ensure!(
        unschedulable["reason"] == "Unschedulable"
            && unschedulable["message"]
                .as_str()
                .unwrap_or("")
                .contains(RESOURCE),
        "the pod that requests 2 is not Unschedulable for {RESOURCE}: {unschedulable}"
    );
    println!("pod requesting 2: {}", unschedulable["message"]);

    // Least privilege: the credential the DaemonSet mounts (the kubelet's).
    // The kubelet creates its Lease on its lease controller's first round
    // after the node exists (1.37: up to 10 s after registering): the own
    // Lease is written once it is there.
    let admin_leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-node-lease");
    let t = Instant::now();
    while admin_leases.get_opt(NODE).await?.is_none() {
        ensure!(
            t.elapsed() < Duration::from_secs(60),
            "the kubelet made no Lease for {NODE} in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let other: KNode = serde_json::from_value(json!({"metadata": {"name": OTHER}}))?;
    nodes.create(&PostParams::default(), &other).await?;
    let as_node = client(&cluster, &node_token(NODE))?;
    for (whose, name, want) in [("own", NODE, 200), ("another node's", OTHER, 403)] {
        for what in [Object::Node, Object::Status, Object::Lease] {
            let got = try_write(&as_node, what, name).await;
            let what = format!("{whose} {what:?}");
            figure(
                &format!("least privilege: the node's credential writes {what}"),
                got,
            );
            ensure!(
                got == want,
                "the node's credential writing {what}: {got}, expected {want}"
            );
        }
    }

    // Companion mode, for the window: Ready stays True, the plugins' fields
    // stay, the pod keeps running.
    let window = Instant::now();
    println!("companion window: {seconds} s (NODESTATUS_REALNODE_SECONDS)");
    let markers = [
        work.display().to_string(),
        format!("--address=0.0.0.0:{port}"),
    ];
    let cpu_before = cpu_by_process(&markers);
    let mut polls = 0;
    let mut not_ready = Vec::new();
    let mut missing = Vec::new();
    while window.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        polls += 1;
        let n = serde_json::to_value(nodes.get(NODE).await?)?;
        let at = window.elapsed().as_secs();
        if ready(&n).as_deref() != Some("True") {
            not_ready.push(format!(
                "+{at}s: {}",
                condition(&n, "Ready").cloned().unwrap_or_default()
            ));
        }
        if condition(&n, "KernelSupported").is_none() || n["status"]["allocatable"][RESOURCE] != "1"
        {
            missing.push(format!("+{at}s"));
        }
    }
    let p = serde_json::to_value(pods.get_opt(&pod_name).await?)?;
    let (readyz_code, readyz_body) = http_get(port, "/readyz").unwrap_or((0, String::new()));
    figure(
        "companion window end: the engine's /readyz",
        format!("{readyz_code} {}", readyz_body.trim().replace('\n', " ")),
    );
    figure(
        "companion window end: the DaemonSet container ready",
        &p["status"]["containerStatuses"][0]["ready"],
    );
    let restarts = p["status"]["containerStatuses"][0]["restartCount"]
        .as_u64()
        .unwrap_or(0);
    figure("companion window: polls of the node (every 2 s)", polls);
    figure(
        "companion window: polls with Ready not True",
        not_ready.len(),
    );
    figure(
        "companion window: polls with a plugin field missing",
        missing.len(),
    );
    figure("companion window: DaemonSet container restarts", restarts);
    let cpu_after = cpu_by_process(&markers);
    let span = window.elapsed().as_secs_f64();
    let mut total = 0.0;
    for (name, after) in &cpu_after {
        let used = after - cpu_before.get(name).copied().unwrap_or(0.0);
        total += used;
        figure(
            &format!("companion window: CPU of {name}"),
            format!("{used:.1} s ({:.1}% of a core)", 100.0 * used / span),
        );
    }
    figure(
        "companion window: CPU of the node and control plane, all",
        format!(
            "{total:.1} s in {span:.0} s ({:.1}% of a core)",
            100.0 * total / span
        ),
    );
    // Every check of the window and of the audit log is made and printed
    // before the test fails on any of them.
    let mut failures = Vec::new();
    if !not_ready.is_empty() {
        failures.push(format!("the kubelet's Ready left True: {not_ready:?}"));
    }
    if !missing.is_empty() {
        failures.push(format!("the plugins' fields went missing at {missing:?}"));
    }
    if p["status"]["phase"] != "Running" || restarts != 0 {
        failures.push(format!(
            "the DaemonSet's pod did not keep running: {}",
            p["status"]
        ));
    }

    // The audit log: who wrote what.
    let audit_path = cluster.audit_log_path().context("the audit log is on")?;
    let report = audit::read(&std::fs::read_to_string(&audit_path)?, NODE);
    for (w, agents) in &report.agents {
        println!("user agents of {w:?}: {agents:?}");
    }
    for ((w, what, verb), codes) in &report.requests {
        figure(
            &format!("requests: {w:?} {verb} {what}"),
            format!("{codes:?}"),
        );
    }
    for w in [Writer::Kubelet, Writer::Nodestatus] {
        figure(&format!("Node writes by {w:?}"), report.writes_by(w));
        println!("fields written by {w:?}: {:?}", report.paths_by(w));
    }
    for w in [Writer::Kubelet, Writer::Nodestatus] {
        if report.writes_by(w) == 0 {
            failures.push(format!("no {w:?} write in the audit log"));
        }
    }
    let shared: Vec<String> = report
        .paths_by(Writer::Kubelet)
        .intersection(&report.paths_by(Writer::Nodestatus))
        .cloned()
        .collect();
    figure("fields written by both", format!("{shared:?}"));
    let undos = report.undos();
    let flaps = report.flaps();
    figure("writes that changed the other writer's field", undos.len());
    figure("flapping fields", flaps.len());
    for u in undos.iter().take(20) {
        failures.push(format!(
            "{:?} changed {} that {:?} wrote: {} -> {}",
            u.then,
            u.path,
            u.first,
            short(&u.was),
            short(&u.to)
        ));
    }
    for f in flaps.iter().take(20) {
        let values: Vec<String> = f.values.iter().map(short).collect();
        failures.push(format!(
            "{:?} flapped {}: {}",
            f.writer,
            f.path,
            values.join(" -> ")
        ));
    }
    if undos.len() + flaps.len() > 40 {
        failures.push(format!(
            "({} undos and {} flaps in all)",
            undos.len(),
            flaps.len()
        ));
    }
    // The image's default set, under the DaemonSet's security context (a
    // read-only root filesystem, every capability dropped), with the
    // shipped ConfigMap: `nodestatus once` in a pod on the node.
    let t = Instant::now();
    match once_in_pod(&node, &pods, &pod_template).await {
        Ok((ours, setter_failures)) => {
            figure(
                "once in a pod (image's default set, shipped config): setters failed",
                setter_failures.len(),
            );
            figure(
                "once in a pod: run time, from the pod's creation",
                format!("{:.1} s", t.elapsed().as_secs_f64()),
            );
            failures.extend(setter_failures);
            let theirs = serde_json::to_value(nodes.get(NODE).await?)?;
            let expected: Vec<(&str, &str)> = parity::EXPECTED
                .iter()
                .chain(parity::WITHOUT_CRI)
                .chain(parity::COMPANION)
                .copied()
                .collect();
            let (table, unexpected) = parity::table(&theirs, &ours, &expected);
            figure(
                "once in a pod: unexpected differences from the kubelet's node",
                unexpected,
            );
            for row in table.lines().filter(|l| l.contains("**DIFFERS**")) {
                failures.push(format!("once in a pod, parity: {row}"));
            }
        }
        Err(e) => failures.push(format!("nodestatus once in a pod: {e:#}")),
    }
    // Parity: `nodestatus once` on the host with the default config and
    // the kubelet's containerd over CRI, against the kubelet's Node, field
    // by field; every difference must be in parity::EXPECTED.
    match parity::once_on_host(
        bin,
        &kubelet_root,
        &format!(
            "unix://{}",
            node_dir.join("containerd/containerd.sock").display()
        ),
    ) {
        Ok(ours) => {
            let theirs = serde_json::to_value(nodes.get(NODE).await?)?;
            let (table, unexpected) = parity::table(&theirs, &ours, parity::EXPECTED);
            println!("{table}");
            figure(
                "once on the host, with CRI: unexpected differences from the kubelet's node",
                unexpected,
            );
            for row in table.lines().filter(|l| l.contains("**DIFFERS**")) {
                failures.push(format!("once on the host, parity: {row}"));
            }
        }
        Err(e) => failures.push(format!("nodestatus once on the host: {e:#}")),
    }
    // Standalone parity: `nodestatus run` registers node B from the same
    // machine (same hostname, root dir and containerd), and keeps it
    // current; node A (the kubelet's) and node B, field by field.
    let b_kubeconfig = cluster.write_node_kubeconfig(NODE_B)?;
    let (mut b, b_dir) = parity::run_on_host(
        bin,
        &kubelet_root,
        &format!(
            "unix://{}",
            node_dir.join("containerd/containerd.sock").display()
        ),
        &b_kubeconfig,
        NODE_B,
    )?;
    let t = Instant::now();
    // `run` registers at once and compiles what the precompile cache does
    // not hold in the background (each plugin joins the first pass after it
    // is ready; `once` before it cached Winch's code, `run` looks for
    // Cranelift's): the comparison waits for the start's loads, which the
    // log says, and the pass they start.
    let log = b_dir.path().join("nodestatus.log");
    while t.elapsed() < Duration::from_secs(60) {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("every load of the start done")
            || !text.contains("in the background") && text.contains("setters, in run order")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut node_b = None;
    while t.elapsed() < Duration::from_secs(60) {
        if let Some(n) = nodes.get_opt(NODE_B).await? {
            let n = serde_json::to_value(n)?;
            // Ready, and the lifecycle controller's start-up taints gone.
            let ready = n["status"]["conditions"].as_array().is_some_and(|l| {
                l.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            if ready && n["spec"]["taints"].is_null() {
                node_b = Some(n);
                break;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let _ = b.kill();
    let _ = b.wait();
    match node_b {
        Some(ours) => {
            figure(
                "node B (nodestatus run, standalone, CRI) Ready and untainted, from its start",
                format!("{:.1} s", t.elapsed().as_secs_f64()),
            );
            let theirs = serde_json::to_value(nodes.get(NODE).await?)?;
            let (table, unexpected) = parity::table(&theirs, &ours, parity::EXPECTED);
            println!("node A (kubelet) against node B (nodestatus run):\n{table}");
            figure(
                "node B: unexpected differences from the kubelet's node A",
                unexpected,
            );
            for row in table.lines().filter(|l| l.contains("**DIFFERS**")) {
                failures.push(format!("node B, parity: {row}"));
            }
        }
        None => failures.push(format!(
            "node B was not Ready and untainted within 60 s: {}",
            std::fs::read_to_string(b_dir.path().join("nodestatus.log")).unwrap_or_default()
        )),
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n"));

    let took = node.tear_down()?;
    figure(
        "teardown (pods deleted, node down)",
        format!("{:.1} s", took.as_secs_f64()),
    );
    drop(cluster);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("realnode: test");
        return ExitCode::SUCCESS;
    }
    // libtest-style filters: run only when none is given or one matches.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| "realnode".contains(f.as_str())) {
        println!("\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored\n");
        return ExitCode::SUCCESS;
    }
    println!("\nrunning 1 test");
    if std::env::var("NODESTATUS_SKIP_REALNODE").as_deref() == Ok("1") {
        println!(
            "test realnode ... ignored, NODESTATUS_SKIP_REALNODE=1\n\ntest result: ok. 0 passed; 0 failed; 1 ignored\n"
        );
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    let result = (|| -> anyhow::Result<()> {
        audit::self_check().map_err(anyhow::Error::msg)?;
        let bin = preflight()?;
        let _lock = machine_lock()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let work = tempfile::Builder::new()
            .prefix("nodestatus-realnode")
            .tempdir()?;
        // The cluster's processes die with the thread that started them:
        // this (the main) thread, inside block_on.
        let r = rt.block_on(suite(work.path(), &bin));
        if r.is_err() {
            // Kept for a look, once the node is down (nothing is mounted in it).
            let kept = work.keep();
            println!("state kept in {}", kept.display());
        }
        r
    })();
    match result {
        Ok(()) => {
            println!(
                "test realnode ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; finished in {:.1} s\n",
                started.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!(
                "test realnode ... FAILED\n---- realnode ----\n{e:#}\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; finished in {:.1} s\n",
                started.elapsed().as_secs_f64()
            );
            ExitCode::FAILURE
        }
    }
}
