//! The one driver of the agent: it owns the [`State`], performs the
//! [`Action`]s its steps ask for (API calls, passes of the setters, events,
//! metrics, the watch), feeds the answers back as [`Input`]s, wakes it when
//! its next timer is due, and publishes a [`Snapshot`] after every step.
//!
//! Nothing here decides anything about the node: every rule is in the
//! step. No lock is held across an API call: the state has one owner, the
//! driver's task; `/readyz` and `/status` read the last snapshot through an
//! [`AgentHandle`], and never wait on a loop.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::NodeClient;
use super::common::Error;
use super::decide::{Random, ThreadRandom};
use super::handle::{AgentHandle, Command, Waiting};
use super::health::Snapshot;
use super::io::{Action, Answer, Call, Input, Loop, Observation, WatchEvent};
use super::shared::Ctx;
use super::state::State;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::pipeline;
use crate::plugin_dir::PluginDir;
use nodestatus_runtime::facts::{FactSource, Facts};
use nodestatus_runtime::{CallContext, GuestOutputLimits};

/// The agent for one node: its state and the driver that performs its
/// actions.
pub struct Agent {
    state: State,
    client: NodeClient,
    plugins: Arc<PluginDir>,
    facts: FactSource,
    cri: Option<Arc<crate::cri::Client>>,
    /// This node's budgets of plugin log lines and events: in a process
    /// that runs many nodes (`simulate`), one node's plugins never spend
    /// another's.
    guest_output: GuestOutputLimits,
    rng: Arc<dyn Random>,
    metrics: Arc<Metrics>,
    commands: mpsc::UnboundedSender<Command>,
    inbox: mpsc::UnboundedReceiver<Command>,
    watch_tx: mpsc::UnboundedSender<WatchEvent>,
    watch_rx: mpsc::UnboundedReceiver<WatchEvent>,
    restart_watch: Arc<tokio::sync::Notify>,
    snapshot: watch::Sender<Arc<Snapshot>>,
    inflight: JoinSet<Input>,
    /// Who waits for the end of what they asked for.
    waiting: Waiting,
    /// Whether [`Agent::run`] watches the node.
    watch: bool,
    /// Shared by the agents of one process (a simulated fleet): at most
    /// this many passes run at once, the others wait their turn.
    pass_permits: Option<Arc<tokio::sync::Semaphore>>,
    /// The streams and watched paths of the reacting plugins, whose
    /// matches wake a pass ([`Agent::with_streams`]).
    streams: Option<crate::streams::Streams>,
    /// This node's setters' last results, that may stand for their next
    /// calls ([`pipeline::memo`]): one pass holds it at a time.
    memo: Arc<std::sync::Mutex<pipeline::Memo>>,
}

impl Agent {
    /// An agent for `cfg.node_name`, talking through `client`, running the
    /// setters of `plugins` over this machine's facts.
    pub fn new(cfg: Arc<Config>, client: NodeClient, plugins: Arc<PluginDir>) -> Self {
        Self::with_random(cfg, client, plugins, Arc::new(ThreadRandom))
    }

    /// Like [`Self::new`], with the random source of the jitter (tests).
    pub fn with_random(
        cfg: Arc<Config>,
        client: NodeClient,
        plugins: Arc<PluginDir>,
        rng: Arc<dyn Random>,
    ) -> Self {
        Self::with_facts(cfg, client, plugins, rng, FactSource::host())
    }

    /// Like [`Self::with_random`], with the machine facts the setters read
    /// (a simulated node's).
    pub fn with_facts(
        cfg: Arc<Config>,
        client: NodeClient,
        plugins: Arc<PluginDir>,
        rng: Arc<dyn Random>,
        facts: FactSource,
    ) -> Self {
        let metrics = Arc::new(Metrics::new());
        client.traffic().attach(metrics.clone());
        {
            let m = metrics.clone();
            plugins.on_event(move |e| m.reload(e.result()));
        }
        metrics
            .plugins_loaded
            .set(plugins.current().setters().len() as i64);
        let hostname = cfg.hostname(&Facts::new(facts.clone()));
        let state = State::new(cfg.clone(), hostname, Instant::now());
        let (snapshot, _) = watch::channel(Arc::new(state.snapshot()));
        let (commands, inbox) = mpsc::unbounded_channel();
        let (watch_tx, watch_rx) = mpsc::unbounded_channel();
        let memo = pipeline::Memo::new(cfg.incremental, cfg.node_status_report_frequency);
        Self {
            memo: Arc::new(std::sync::Mutex::new(memo)),
            cri: cfg.cri_client().map(Arc::new),
            state,
            client,
            plugins,
            facts,
            guest_output: GuestOutputLimits::default(),
            rng,
            metrics,
            commands,
            inbox,
            watch_tx,
            watch_rx,
            restart_watch: Arc::new(tokio::sync::Notify::new()),
            snapshot,
            inflight: JoinSet::new(),
            waiting: Waiting::default(),
            watch: true,
            pass_permits: None,
            streams: None,
        }
    }

    /// An agent whose reacting plugins follow their streams and watched
    /// paths (`run`'s): a match or a change wakes a pass at once, which
    /// hands each plugin its matches through `on-lines`. Without it (a
    /// simulated fleet, whose machines have no kernel log of their own),
    /// a reacting plugin is only called through `set`.
    pub fn with_streams(mut self, streams: crate::streams::Streams) -> Self {
        self.streams = Some(streams);
        self
    }

    /// An agent that does not watch its node: the live node comes only
    /// from its own GETs and the answers of its writes (request-level
    /// tests; a fleet of simulated nodes whose events come from one
    /// watch, through [`Agent::watch_events`]).
    pub fn without_watch(mut self) -> Self {
        self.watch = false;
        self
    }

    /// An agent whose lease renewals take `phase` (in `[0, 1)`) of a
    /// period as their phase after the first renewal, instead of a random
    /// draw: a fleet in one process spreads its renewals evenly.
    pub fn with_lease_phase(mut self, phase: f64) -> Self {
        self.state.set_lease_phase(phase);
        self
    }

    /// An agent whose passes take a permit of `permits` each: the agents
    /// of a simulated fleet share one engine, whose instance pool and
    /// cores a burst of passes (a start, a rollout) would overrun.
    pub fn with_pass_limit(mut self, permits: Arc<tokio::sync::Semaphore>) -> Self {
        self.pass_permits = Some(permits);
        self
    }

    /// Where events of the node's watch go, when the caller watches it.
    pub fn watch_events(&self) -> mpsc::UnboundedSender<WatchEvent> {
        self.watch_tx.clone()
    }

    /// A handle for `/readyz`, `/status`, signals and live config.
    pub fn handle(&self) -> AgentHandle {
        AgentHandle {
            snapshot: self.snapshot.subscribe(),
            commands: self.commands.clone(),
            metrics: self.metrics.clone(),
            plugins: self.plugins.clone(),
            name: Arc::from(self.state.cfg().node_name.as_str()),
            streams: self.streams.clone(),
        }
    }

    /// The state (for inspection).
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The API calls.
    pub fn client(&self) -> &NodeClient {
        &self.client
    }

    /// An agent that acts only when asked, through its handle
    /// ([`AgentHandle::register`], [`AgentHandle::sync_now`],
    /// [`AgentHandle::renew_lease`]), until [`AgentHandle::run_loops`]:
    /// no timer of its own starts a registration, a status sync or a
    /// renewal (request-level and real-apiserver tests that drive one
    /// step of a loop at a time).
    pub fn on_request(mut self) -> Self {
        self.state = self.state.on_request();
        self.snapshot.send_replace(Arc::new(self.state.snapshot()));
        self
    }

    /// The driver: steps on every input (the answers of its actions, the
    /// watch's events, the handle's commands, the loops' timers) and
    /// performs the actions each step returns, until `cancel` fires; then
    /// returns at once: in-flight calls are dropped and the node is left
    /// as it is. Returns an error only for an identity error at start.
    pub async fn run(mut self, cancel: CancellationToken) -> Result<(), Arc<Error>> {
        let ctx = self.ctx();
        let event = self.state.event(
            &ctx,
            nodestatus_runtime::EventType::Normal,
            "Starting",
            "Starting nodestatus.",
            None,
        );
        let _ = self.perform(vec![event]);
        let watch = self.watch.then(|| {
            tokio::spawn(super::watch::watch_node(
                self.client.clone(),
                self.watch_tx.clone(),
                self.restart_watch.clone(),
                cancel.clone(),
            ))
        });
        let result = self.drive(&cancel).await;
        cancel.cancel();
        if let Some(w) = watch {
            let _ = w.await;
        }
        result
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            now: Instant::now(),
            wall: k8s_openapi::jiff::Timestamp::now(),
            rng: &*self.rng,
        }
    }

    fn step(&mut self, input: Input) -> Vec<Action> {
        let ctx = Ctx {
            now: Instant::now(),
            wall: k8s_openapi::jiff::Timestamp::now(),
            rng: &*self.rng,
        };
        let actions = self.state.step(input, &ctx);
        self.snapshot.send_replace(Arc::new(self.state.snapshot()));
        actions
    }

    /// Steps on inputs until `cancel` fires or an identity error at
    /// start ends the agent.
    async fn drive(&mut self, cancel: &CancellationToken) -> Result<(), Arc<Error>> {
        let due = self.step(Input::Tick);
        self.perform(due)?;
        let streams = self.streams.clone();
        loop {
            let wake = self.state.next_wakeup();
            let input = tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = woken(streams.as_ref()) => Input::Triggered,
                Some(done) = self.inflight.join_next(), if !self.inflight.is_empty() => match done {
                    Ok(input) => input,
                    Err(e) => {
                        tracing::error!("an action of the agent failed: {e}");
                        continue;
                    }
                },
                Some(e) = self.watch_rx.recv() => Input::Watch(e),
                Some(c) = self.inbox.recv() => self.waiting.add(c),
                _ = sleep_until(wake) => Input::Tick,
            };
            let actions = self.step(input);
            self.perform(actions)?;
        }
    }

    /// Performs `actions`; an identity error at start ends the agent.
    fn perform(&mut self, actions: Vec<Action>) -> Result<(), Arc<Error>> {
        for a in actions {
            match a {
                Action::Exit(e) => return Err(self.waiting.exit(e)),
                Action::RegisterDone(r) => self.waiting.registered(r),
                Action::SyncDone {
                    result,
                    for_shutdown,
                } => self.waiting.synced(result, for_shutdown),
                Action::LeaseDone(r) => self.waiting.renewed(r),
                Action::Call(call) => {
                    let client = self.client.clone();
                    self.inflight
                        .spawn(async move { Input::Answer(answer(&client, call).await) });
                }
                Action::Probe {
                    call,
                    connect_within,
                } => {
                    let client = self.client.probe(connect_within);
                    self.inflight
                        .spawn(async move { Input::Answer(answer(&client, call).await) });
                }
                Action::RunPass {
                    for_loop,
                    base,
                    problems,
                    options,
                } => self.run_pass(for_loop, base, problems, options),
                Action::RecordEvent(event) => {
                    let client = self.client.clone();
                    let first_wait = self.rng.unit();
                    tokio::spawn(async move {
                        let post = || client.create_event(&event);
                        match super::events::deliver(post, first_wait).await {
                            super::events::Delivered::Yes(_) => {}
                            super::events::Delivered::Refused(e) => {
                                tracing::debug!("the server refused an event: {e}")
                            }
                            super::events::Delivered::GaveUp(e) => tracing::info!(
                                "an event got no answer in {} tries, dropped: {e}",
                                super::events::EVENT_TRIES
                            ),
                        }
                    });
                }
                Action::ResetConnections { watch } => match self.client.reset_connections() {
                    Ok(true) => {
                        tracing::info!(
                            node = self.client.name(),
                            "closed every API connection after a failed heartbeat; the next try dials anew"
                        );
                        if watch {
                            self.restart_watch.notify_one();
                        }
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!("{e}"),
                },
                Action::RestartWatch => self.restart_watch.notify_one(),
                Action::Observe(o) => self.observe(o),
            }
        }
        Ok(())
    }

    fn observe(&self, o: Observation) {
        let m = &self.metrics;
        match o {
            Observation::SyncResult(r) => m.sync_result(r),
            Observation::Patch(bytes) => {
                m.patches.inc();
                m.patch_bytes.inc_by(bytes as u64);
            }
            Observation::LeaseResult(ok) => m.lease_result(ok),
            Observation::LoopError(l, class) => m.loop_error(l, class),
            Observation::NodeDeleted(gone) => {
                m.node_deleted.set(i64::from(gone));
            }
            Observation::ContainerRuntime(Err(e)) => tracing::warn!("container runtime: {e}"),
            Observation::ContainerRuntime(Ok(runtime)) => {
                tracing::info!("container runtime: {runtime} answers again")
            }
        }
    }

    /// A pass of the setters over `base`: the container runtime read
    /// first (the setters never wait on it), then the pipeline on a
    /// blocking thread.
    fn run_pass(
        &mut self,
        for_loop: Loop,
        base: Arc<Value>,
        problems: Vec<String>,
        options: pipeline::PassOptions,
    ) {
        let set = self.plugins.current();
        let streams = self.streams.clone();
        if let Some(s) = &streams {
            s.update(set.setters().iter().map(|s| &**s.plugin()));
        }
        let runtime = self.plugins.runtime().clone();
        let facts = Arc::new(Facts::new(self.facts.clone()));
        let cri = self.cri.clone();
        let metrics = self.metrics.clone();
        let guest_output = self.guest_output.clone();
        let permits = self.pass_permits.clone();
        let memo = self.memo.clone();
        {
            let cfg = self.state.cfg();
            let mut m = memo.lock().expect("memo lock");
            m.configure(cfg.incremental, cfg.node_status_report_frequency);
        }
        self.inflight.spawn(async move {
            let _permit = match &permits {
                Some(p) => p.clone().acquire_owned().await.ok(),
                None => None,
            };
            let container_runtime = match &cri {
                Some(c) if c.present() => {
                    Some(Arc::new(c.facts().await.map_err(|e| e.to_string())))
                }
                _ => None,
            };
            let answered = container_runtime.as_deref().map(|r| match r {
                Ok(f) => Ok(format!("{} {}", f.name, f.version)),
                Err(e) => Err(e.clone()),
            });
            let ctx = CallContext {
                facts,
                node_problems: problems.into(),
                container_runtime,
                guest_output: Some(guest_output),
            };
            let loaded = set.setters().len();
            let started = std::time::Instant::now();
            let cache_runtime = runtime.clone();
            let pass_streams = streams.clone();
            let pass_memo = memo.clone();
            let result = tokio::task::spawn_blocking(move || {
                let mut memo = pass_memo.lock().unwrap_or_else(|p| p.into_inner());
                pipeline::pass_with(
                    &runtime,
                    &set,
                    &base,
                    &ctx,
                    options,
                    pass_streams.as_ref(),
                    Some(&mut memo),
                )
            })
            .await
            .map_err(|e| e.to_string())
            .map(|(node, mut report)| {
                report.container_runtime = answered;
                (node, report)
            });
            if let Some(s) = &streams {
                metrics.observe_streams(&s.status());
            }
            if let Ok((_, report)) = &result {
                metrics.observe_pass(report, started.elapsed());
                metrics.observe_cache(cache_runtime.cache());
                metrics.observe_loads(cache_runtime.load_stats());
                metrics.plugins_loaded.set(loaded as i64);
            }
            Input::Answer(Answer::Pass(for_loop, result))
        });
    }
}

/// Performs one API call.
async fn answer(client: &NodeClient, call: Call) -> Answer {
    match call {
        Call::GetNode(l) => Answer::Node(l, client.get_node().await),
        Call::CreateNode(node) => Answer::Created(client.create_node(&node).await),
        Call::PatchStatus(l, body) => Answer::Patched(l, client.patch_status(&body).await),
        Call::GetLease => Answer::Lease(client.get_lease().await),
        Call::CreateLease(lease) => Answer::LeaseWritten(client.create_lease(&lease).await),
        Call::UpdateLease(lease) => Answer::LeaseWritten(client.update_lease(&lease).await),
        Call::GetVersion => Answer::Version(client.server_version().await),
    }
}

/// Until a reacting plugin's stream or watched path wakes the agent
/// (never, without streams).
async fn woken(streams: Option<&crate::streams::Streams>) {
    match streams {
        Some(s) => s.woken().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
