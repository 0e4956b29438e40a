//! The node loops at the request level, in virtual time
//! (`tokio::time::pause`): a `tower-test` mock service stands for the
//! apiserver, the test asserts each request in order (method and path) and
//! answers it, as kube-rs tests its own runtime. Every timing rule of the
//! kubelet's loops is checked against the virtual clock, so these tests take
//! no wall time for their minutes and cannot be flaky on a slow machine.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::Body;
use nodestatus_engine::agent::client::{NodeClient, Traffic};
use nodestatus_engine::agent::decide::FixedRandom;
use nodestatus_engine::agent::{self, Agent, AgentHandle, SyncOutcome};
use nodestatus_tests::{built, drop_plugin};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower_test::mock;

type Handle = mock::Handle<Request<Body>, Response<Body>>;
type Send = mock::SendResponse<Response<Body>>;

/// The apiserver's side of the mock: each request in order, events answered
/// on the side (they are recorded in the background and may come at any
/// point), and with `leases`, the lease's requests too (a test of the
/// status sync, while the lease loop runs beside it).
struct Server {
    handle: Handle,
    leases: bool,
    lease_rv: u64,
}

struct Received {
    method: Method,
    path: String,
    body: Value,
    at: Instant,
    send: Send,
}

impl Server {
    /// The next request that is not an Event.
    async fn next(&mut self) -> Received {
        loop {
            let (req, send) = self.handle.next_request().await.expect("the agent is gone");
            let at = Instant::now();
            let method = req.method().clone();
            let path = req.uri().path().to_owned();
            let bytes = req.into_body().collect_bytes().await.unwrap();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if path.ends_with("/events") {
                reply(send, 201, &body);
                continue;
            }
            // The server's version, asked once before registration.
            if path == "/version" {
                reply(send, 200, &version());
                continue;
            }
            if self.leases && path.contains("/leases") {
                self.lease_rv += 1;
                match method {
                    Method::GET => reply(send, 404, &status(404, "NotFound")),
                    _ => {
                        let mut l = body;
                        l["metadata"]["resourceVersion"] = json!(self.lease_rv.to_string());
                        reply(send, if method == Method::POST { 201 } else { 200 }, &l);
                    }
                }
                continue;
            }
            return Received {
                method,
                path,
                body,
                at,
                send,
            };
        }
    }

    /// The next request, which must be `method path`.
    async fn expect(&mut self, method: Method, path: &str) -> Received {
        let r = self.next().await;
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            (method.as_str(), path),
            "unexpected request"
        );
        r
    }
}

fn reply(send: Send, code: u16, body: &Value) {
    send.send_response(
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap(),
    );
}

/// `/version` of a 1.37.2 apiserver.
fn version() -> Value {
    json!({
        "major": "1", "minor": "37", "gitVersion": "v1.37.2", "gitCommit": "",
        "gitTreeState": "clean", "buildDate": "2026-11-27T00:00:00Z",
        "goVersion": "go1.26.8", "compiler": "gc", "platform": "linux/amd64"
    })
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": format!("{reason} (from the test)"), "reason": reason, "code": code})
}

const NODE: &str = "/api/v1/nodes/vt-node";
const NODE_STATUS: &str = "/api/v1/nodes/vt-node/status";
const NODES: &str = "/api/v1/nodes";
const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/vt-node";

struct Rig {
    agent: Driven,
    server: Server,
    _dir: tempfile::TempDir,
}

/// An agent for `vt-node` over the mock, with the thread's draws replaced
/// by `r`, and the `ready` setter when `ready` is set.
fn rig(yaml: &str, ready: bool, r: f64) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    if ready {
        drop_plugin(dir.path(), "ready.wasm", Path::new(built::READY));
    }
    let (cfg, plugins) = crate::common::configured(
        &format!(
            "nodeName: vt-node\npluginDir: {}\n{yaml}",
            dir.path().display()
        ),
        dir.path(),
    );
    let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(svc, "default");
    let nc = NodeClient::new(client, "vt-node", Arc::new(Traffic::default()));
    // No watch: every request is the loops' own.
    let agent = Driven::start(
        Agent::with_random(cfg, nc, plugins, Arc::new(FixedRandom(r))).without_watch(),
    );
    Rig {
        agent,
        server: Server {
            handle,
            leases: false,
            lease_rv: 0,
        },
        _dir: dir,
    }
}

/// An agent's driver in a task of its own, acting only when asked until
/// [`Driven::run`] (the mock answers from the test's task).
struct Driven {
    handle: AgentHandle,
    task: tokio::task::JoinHandle<Result<(), Arc<agent::Error>>>,
    stop: CancellationToken,
}

impl Driven {
    fn start(agent: Agent) -> Self {
        let agent = agent.on_request();
        let stop = CancellationToken::new();
        Self {
            handle: agent.handle(),
            task: tokio::spawn(agent.run(stop.clone())),
            stop,
        }
    }

    fn handle(&self) -> AgentHandle {
        self.handle.clone()
    }

    /// Runs its loops until `cancel`; the task ends with the driver's
    /// result.
    fn run(
        self,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<Result<(), Arc<agent::Error>>> {
        let Self {
            handle,
            mut task,
            stop,
        } = self;
        handle.run_loops();
        tokio::spawn(async move {
            tokio::select! {
                r = &mut task => r.unwrap(),
                _ = cancel.cancelled() => {
                    stop.cancel();
                    task.await.unwrap()
                }
            }
        })
    }
}

/// Asks the agent through its handle in a task of its own (the mock
/// answers from this one); gives the agent back with the answer.
fn drive<T: std::marker::Send + 'static, F>(
    agent: Driven,
    f: impl FnOnce(AgentHandle) -> F,
) -> tokio::task::JoinHandle<(Driven, T)>
where
    F: std::future::Future<Output = T> + std::marker::Send + 'static,
{
    let asked = f(agent.handle());
    tokio::spawn(async move {
        let r = asked.await;
        (agent, r)
    })
}

/// The node as the server would answer it: `node` with a uid and a
/// resourceVersion.
fn stored(node: &Value, rv: u64) -> Value {
    let mut n = node.clone();
    n["metadata"]["uid"] = json!("uid-1");
    n["metadata"]["resourceVersion"] = json!(rv.to_string());
    n
}

fn lease(rv: u64) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "vt-node", "namespace": "kube-node-lease", "resourceVersion": rv.to_string()},
        "spec": {"holderIdentity": "vt-node", "leaseDurationSeconds": 40}})
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

#[tokio::test(start_paused = true)]
async fn registration_backs_off_from_100ms_doubling_to_7s() {
    let Rig {
        agent,
        mut server,
        _dir,
    } = rig("", false, 0.0);
    let t0 = Instant::now();
    let run = drive(agent, |a| async move { a.register().await });
    let mut at = Vec::new();
    for _ in 0..9 {
        let r = server.expect(Method::POST, NODES).await;
        at.push(r.at);
        reply(r.send, 500, &status(500, "InternalError"));
    }
    let r = server.expect(Method::POST, NODES).await;
    let created = stored(&r.body, 1);
    reply(r.send, 201, &created);
    let (agent, registered) = run.await.unwrap();
    registered.unwrap();
    let gaps: Vec<u128> = std::iter::once(ms(at[0] - t0))
        .chain(at.windows(2).map(|w| ms(w[1] - w[0])))
        .collect();
    assert_eq!(
        gaps,
        vec![100, 200, 400, 800, 1600, 3200, 6400, 7000, 7000],
        "the sleep before each try"
    );
    assert!(agent.handle().ready_reason().is_some(), "no sync yet");
}

#[tokio::test(start_paused = true)]
async fn a_403_on_the_lease_after_start_is_retried_with_backoff_and_reported() {
    let Rig {
        agent,
        mut server,
        _dir,
    } = rig("nodeLeaseDurationSeconds: 40\n", false, 0.5);
    // Registered: the status sync has nothing to write (no setter), and the
    // lease loop starts.
    let (agent, _) = register(agent, &mut server).await;
    let handle = agent.handle();
    let cancel = CancellationToken::new();
    let run = agent.run(cancel.clone());
    // No lease cached: GET. Refused 5 times (5 tries), then the loop backs
    // off 200 ms and tries again.
    let mut last = None;
    for _ in 0..5 {
        let r = server.expect(Method::GET, LEASE).await;
        last = Some(r.at);
        reply(r.send, 403, &status(403, "Forbidden"));
    }
    let r = server.expect(Method::GET, LEASE).await;
    assert_eq!(
        ms(r.at - last.unwrap()),
        200,
        "the lease backoff starts at 200 ms"
    );
    reply(r.send, 200, &lease(5));
    let r = server.expect(Method::PUT, LEASE).await;
    assert_eq!(r.body["metadata"]["resourceVersion"], "5", "optimistic");
    assert!(
        r.body["spec"]["renewTime"].as_str().unwrap().contains('.'),
        "MicroTime"
    );
    let renewed = r.at;
    reply(r.send, 200, &lease(6));
    // Renewed every 10 s x (1 + 0.5 x 4 %) = 10.2 s, from the cached lease,
    // no GET; the second renewal of a start has its random phase too (the
    // draw 0.5: half a period later still).
    let r = server.expect(Method::PUT, LEASE).await;
    assert_eq!(ms(r.at - renewed), 15_200);
    assert_eq!(r.body["metadata"]["resourceVersion"], "6");
    let renewed = r.at;
    reply(r.send, 200, &lease(7));
    // A 409: a GET for a fresh copy, then the update again, at once.
    let r = server.expect(Method::PUT, LEASE).await;
    assert_eq!(ms(r.at - renewed), 10_200);
    reply(r.send, 409, &status(409, "Conflict"));
    let r = server.expect(Method::GET, LEASE).await;
    reply(r.send, 200, &lease(9));
    let r = server.expect(Method::PUT, LEASE).await;
    assert_eq!(r.body["metadata"]["resourceVersion"], "9");
    reply(r.send, 200, &lease(10));
    assert!(
        !run.is_finished(),
        "a 403 after start must not end the lease loop"
    );
    let metrics = handle.metrics().encode();
    assert!(
        metrics.contains("nodestatus_loop_errors_total{loop=\"lease\",kind=\"forbidden\"} 1"),
        "{metrics}"
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
}

/// Registers `vt-node` through the mock (one POST answered 201); returns
/// the agent and the stored node.
async fn register(agent: Driven, server: &mut Server) -> (Driven, Value) {
    let reg = drive(agent, |a| async move { a.register().await });
    let r = server.expect(Method::POST, NODES).await;
    let created = stored(&r.body, 1);
    reply(r.send, 201, &created);
    let (agent, registered) = reg.await.unwrap();
    registered.unwrap();
    (agent, created)
}

/// One status sync in a task of its own.
fn sync_once(
    agent: Driven,
) -> tokio::task::JoinHandle<(Driven, Result<SyncOutcome, Arc<agent::Error>>)> {
    drive(agent, |a| async move { a.sync_now().await })
}

#[tokio::test(start_paused = true)]
async fn five_tries_the_first_from_the_cache_the_others_from_a_get_each_with_a_deadline() {
    let Rig {
        agent,
        mut server,
        _dir,
    } = rig("", true, 0.5);
    let (agent, created) = register(agent, &mut server).await;
    assert!(
        created["status"]["conditions"]
            .as_array()
            .is_none_or(|l| l.iter().all(|c| c["type"] != "Ready")),
        "no Ready before the readiness checks ran: {created}"
    );
    let sync = sync_once(agent);
    // Try 0 diffs against the cached node: no GET before the patch. The
    // server never answers: the call ends at its deadline (10 s by default).
    let first = server.expect(Method::PATCH, NODE_STATUS).await;
    assert_eq!(
        first.body["status"]["conditions"][0]["type"], "Ready",
        "{}",
        first.body
    );
    let _unanswered = first.send;
    let mut prev = first.at;
    for attempt in 1..5 {
        let g = server.expect(Method::GET, NODE).await;
        if attempt == 1 {
            assert_eq!(ms(g.at - prev), 10_000, "the deadline of a call");
        }
        reply(g.send, 200, &created);
        let p = server.expect(Method::PATCH, NODE_STATUS).await;
        if attempt < 4 {
            reply(p.send, 500, &status(500, "InternalError"));
        } else {
            let mut patched = created.clone();
            patched["status"]["conditions"] = p.body["status"]["conditions"].clone();
            patched["metadata"]["resourceVersion"] = json!("9");
            reply(p.send, 200, &patched);
        }
        prev = p.at;
    }
    assert!(matches!(
        sync.await.unwrap().1.unwrap(),
        SyncOutcome::Patched { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn five_failed_tries_end_the_pass_with_the_kubelets_error_and_the_next_pass_reads_the_cache()
{
    let Rig {
        agent,
        mut server,
        _dir,
    } = rig("", true, 0.5);
    let (agent, created) = register(agent, &mut server).await;
    let sync = sync_once(agent);
    let p = server.expect(Method::PATCH, NODE_STATUS).await;
    reply(p.send, 503, &status(503, "ServiceUnavailable"));
    for _ in 1..5 {
        let g = server.expect(Method::GET, NODE).await;
        reply(g.send, 200, &created);
        let p = server.expect(Method::PATCH, NODE_STATUS).await;
        reply(p.send, 503, &status(503, "ServiceUnavailable"));
    }
    let (agent, result) = sync.await.unwrap();
    let err = result.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("update node status exceeds retry count"),
        "{err}"
    );
    // The failures counted one pass, not five tries: a readiness setter
    // would need three such passes.
    let text = agent.handle().metrics().encode();
    assert!(
        text.contains("nodestatus_sync_passes_total{result=\"error\"} 1"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn updates_every_jittered_period_and_reports_after_the_jittered_report_period() {
    // A restart: the node exists and is Ready. Draw 0.25: updates every
    // 10 s x 1.01 = 10.1 s; the first report after a restart comes a
    // random part of the period later: 300 s + (0.25 - 0.5) x 300 s = 225 s
    // after the first write, then exactly every 300 s.
    let Rig {
        agent,
        mut server,
        _dir,
    } = rig("registerNode: false\n", true, 0.25);
    let t0 = Instant::now();
    let reg = drive(agent, |a| async move { a.register().await });
    let g = server.expect(Method::GET, NODE).await;
    let ready = json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let node = stored(
        &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "vt-node", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": nodestatus_model::node::kubelet::go_arch()}}, "status": {"conditions": [ready]}}),
        3,
    );
    reply(g.send, 200, &node);
    let (agent, registered) = reg.await.unwrap();
    registered.unwrap();
    let started = Instant::now();
    assert_eq!(ms(started - t0), 100);
    let cancel = CancellationToken::new();
    server.leases = true;
    let run = agent.run(cancel.clone());
    let mut writes = Vec::new();
    let mut current = node.clone();
    for i in 0..3u64 {
        let p = server.expect(Method::PATCH, NODE_STATUS).await;
        writes.push(ms(p.at - started));
        let conditions = p.body["status"]["conditions"].as_array().cloned();
        if i == 0 {
            // The first pass after a restart keeps Ready as it is: the patch
            // carries the setters' ownership record, not a Ready.
            assert!(conditions.is_none(), "{}", p.body);
        } else {
            // A periodic report: only heartbeats.
            for c in conditions.unwrap() {
                let keys: Vec<&str> = c.as_object().unwrap().keys().map(String::as_str).collect();
                assert_eq!(keys, vec!["lastHeartbeatTime", "type"], "{}", p.body);
            }
        }
        current = nodestatus_tests::patch::apply(&current, &p.body);
        current["metadata"]["resourceVersion"] = json!((4 + i).to_string());
        // The heartbeat is wall-clock time, to the second, and virtual time
        // runs minutes in a real second: keep the stored one old, so that
        // each report has a heartbeat to send.
        current["status"]["conditions"][0]["lastHeartbeatTime"] = json!("2026-01-01T00:00:00Z");
        reply(p.send, 200, &current);
    }
    // Pass 1 (at 0) writes the change (the ownership record, Ready kept);
    // the next report is due 300 + (0.25 - 0.5) x 300 = 225 s later, seen
    // by the pass at 23 x 10.1 = 232.3 s; then due exactly 300 s later, at
    // 532.3 s, seen by the pass at 53 x 10.1 = 535.3 s. No write between.
    assert_eq!(writes, vec![0, 232_300, 535_300]);
    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_fast_update_runs_every_100ms_until_ready_for_at_most_two_minutes() {
    // No setter: the node never becomes Ready and nothing ever changes, so
    // no pass writes; the passes are counted from the metrics.
    let Rig {
        agent,
        mut server,
        _dir,
    } = rig("", false, 0.0);
    let (agent, _) = register(agent, &mut server).await;
    let handle = agent.handle();
    let passes = |agent: &AgentHandle| -> u64 {
        agent
            .metrics()
            .encode()
            .lines()
            .filter(|l| l.starts_with("nodestatus_sync_passes_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let cancel = CancellationToken::new();
    server.leases = true;
    let leases = tokio::spawn(async move {
        // Nothing but the lease's requests, answered on the side.
        server.next().await;
        unreachable!("the status sync wrote nothing");
    });
    let run = agent.run(cancel.clone());
    tokio::time::sleep(Duration::from_millis(10_050)).await;
    // 0, 0.1, ..., 10.0 s: 101 passes.
    assert_eq!(passes(&handle), 101);
    tokio::time::sleep(Duration::from_secs(120)).await;
    let at_130 = passes(&handle);
    // After 120 s only the regular passes (every 10 s, draw 0): 130.0 ..
    // 200.0 s.
    tokio::time::sleep(Duration::from_secs(70)).await;
    assert_eq!(passes(&handle) - at_130, 7);
    assert!(
        (1195..=1210).contains(&at_130),
        "{at_130} passes in the first 130 s"
    );
    assert!(!leases.is_finished(), "no request but the lease's");
    leases.abort();
    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_is_immediate_while_the_apiserver_never_answers() {
    let Rig {
        agent,
        mut server,
        _dir,
    } = rig("", true, 0.5);
    let cancel = CancellationToken::new();
    let run = agent.run(cancel.clone());
    // Take requests and never answer them (the watch's list, the create).
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            match server.handle.next_request().await {
                Some((_, send)) => held.push(send),
                None => return held.len(),
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(30)).await;
    cancel.cancel();
    let stopped = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(1), run)
        .await
        .expect("run() did not return within 1 s of the cancel");
    result.unwrap().unwrap();
    assert_eq!(Instant::now(), stopped, "no wait at all");
    hold.abort();
}

/// The engine's own writes go through the checks of a setter's output: the
/// allocatable for every capacity key (a built-in step of the pipeline),
/// copying a fractional extended resource that the stored node's capacity
/// holds, would make a node that the apiserver refuses. The step's output is
/// discarded with kind `invalid` and reported in the pass, like a setter's,
/// and the status PATCH goes out without it. (It used to be written after
/// the pipeline, so the whole status update was refused every pass.)
#[tokio::test(start_paused = true)]
async fn a_built_in_write_the_apiserver_would_refuse_is_discarded_not_patched() {
    let Rig {
        agent,
        mut server,
        _dir,
    } = rig("", true, 0.5);
    let reg = drive(agent, |a| async move { a.register().await });
    let r = server.expect(Method::POST, NODES).await;
    let mut stored_node = stored(&r.body, 1);
    stored_node["status"]["capacity"]["example.com/fpga"] = json!("1.5");
    reply(r.send, 201, &stored_node);
    let (agent, registered) = reg.await.unwrap();
    registered.unwrap();
    let sync = sync_once(agent);
    let p = server.expect(Method::PATCH, NODE_STATUS).await;
    assert!(
        p.body
            .pointer("/status/allocatable/example.com~1fpga")
            .is_none(),
        "{}",
        p.body
    );
    reply(p.send, 200, &stored_node);
    let (agent, synced) = sync.await.unwrap();
    synced.unwrap();
    let pass = agent.handle().last_pass().unwrap();
    let step = pass
        .builtins
        .iter()
        .find(|b| b.plugin == nodestatus_engine::pipeline::ALLOCATABLE)
        .unwrap();
    let err = step.outcome.as_ref().unwrap_err();
    assert_eq!(
        err.kind,
        nodestatus_engine::pipeline::SetterErrorKind::Invalid,
        "{err}"
    );
    assert!(err.to_string().contains("example.com/fpga"), "{err}");
}
