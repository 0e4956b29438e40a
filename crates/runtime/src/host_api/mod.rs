//! The host side of the `nodestatus:plugin/host` interface, and the state one
//! call's [`wasmtime::Store`] carries.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::filesystem::types as fs;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::facts::{self, Facts};
use super::limits::CallLimits;
use super::proc_view::{self, ProcGrant};
use super::trace::{Access, HostRead, Trace, Unrepeatable, print_debug};

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        // The world with every export a plugin may have: `setter`, and
        // `reactor` (0.2.1), which a plain setter lacks and the host looks
        // up by its index.
        world: "reactor-plugin",
        // Exports are called with `call_async`, under a deadline that also
        // covers blocking WASI calls. The host's own imports stay sync: they
        // never block.
        exports: { default: async },
    });
}

use bindings::nodestatus::plugin0_1_1::host;

/// Longest log line kept from a plugin, in bytes.
const MAX_LOG_LINE: usize = 4096;
/// Log lines (host `log` and stderr together) kept from one plugin per
/// [`GUEST_OUTPUT_WINDOW`].
pub const LOG_LINES_PER_WINDOW: u32 = 100;
/// Events kept from one plugin per [`GUEST_OUTPUT_WINDOW`].
pub const EVENTS_PER_WINDOW: u32 = 10;
/// The window of the log and event budgets.
pub const GUEST_OUTPUT_WINDOW: Duration = Duration::from_secs(60);
/// Bytes of guest stderr kept from one call and logged afterwards.
pub(crate) const STDERR_CAPACITY: usize = 4096;

/// Everything a call needs to know about the node and the pass it runs in.
/// Built by the caller (the pipeline); the runtime itself keeps none of it.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// Facts about the machine, shared by all calls of one pass.
    pub facts: Arc<Facts>,
    /// Problems that make the node not ready, for `node-problems`.
    pub node_problems: Arc<[String]>,
    /// What the container runtime answered before this pass, for
    /// `container-runtime`; `None` when no runtime endpoint is configured.
    pub container_runtime: Option<Arc<Result<crate::facts::RuntimeFacts, String>>>,
    /// The budgets of log lines and events of the node the call is for
    /// (one per simulated node); `None`: the runtime's own, for a process
    /// that runs one node.
    pub guest_output: Option<GuestOutputLimits>,
}

impl Default for CallContext {
    fn default() -> Self {
        Self {
            facts: Arc::new(Facts::default()),
            node_problems: Arc::from(Vec::new()),
            container_runtime: None,
            guest_output: None,
        }
    }
}

/// The type of an event a plugin asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// An event a plugin recorded during a call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EmittedEvent {
    /// Normal or Warning.
    pub event_type: EventType,
    /// UpperCamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// What one plugin was granted, resolved at load time.
#[derive(Debug, Clone)]
pub(crate) struct Grants {
    /// Read-only directories, normalized and absolute.
    pub paths: Vec<super::PathGrant>,
    /// Environment variables, with their values taken from the host at load.
    pub env: Vec<(String, String)>,
    /// The plugin's own config, as JSON.
    pub config: Arc<str>,
    /// Whether it may read the container runtime's facts.
    pub container_runtime: bool,
    /// Events it may record per [`GUEST_OUTPUT_WINDOW`].
    pub events_per_window: u32,
}

impl Default for Grants {
    fn default() -> Self {
        Self {
            paths: Vec::new(),
            env: Vec::new(),
            config: Arc::from("{}"),
            container_runtime: false,
            events_per_window: EVENTS_PER_WINDOW,
        }
    }
}

/// A host function the host refused a call because the plugin was not
/// granted what it needs. Recorded in the call's state, so that a setter
/// failing after it is reported as [`super::CallErrorKind::Ungranted`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Denied {
    /// `statvfs` of a path outside every path granted to the plugin.
    Statvfs(String),
    /// `container-runtime` without `containerRuntime: true`.
    ContainerRuntime,
}

impl Denied {
    /// What was refused, and the config setting that grants it.
    pub fn advice(&self, plugin: &str) -> String {
        match self {
            Self::Statvfs(path) => format!(
                "statvfs of {path:?} was refused: grant a directory that holds it in plugins.{plugin}.paths"
            ),
            Self::ContainerRuntime => format!(
                "the container runtime was refused: set `containerRuntime: true` under plugins.{plugin}"
            ),
        }
    }
}

/// How much a plugin logged and recorded in the current window, and in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GuestOutputCounts {
    /// Log lines passed to the host's log since start.
    pub lines_kept: u64,
    /// Log lines dropped by the budget since start.
    pub lines_dropped: u64,
    /// Events kept since start.
    pub events_kept: u64,
    /// Events dropped by the budget since start.
    pub events_dropped: u64,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    lines: u32,
    events: u32,
    totals: GuestOutputCounts,
}

/// The per-plugin budgets of log lines and events: at most
/// [`LOG_LINES_PER_WINDOW`] lines and [`EVENTS_PER_WINDOW`] events per
/// [`GUEST_OUTPUT_WINDOW`], however many calls the plugin makes. Keyed by
/// plugin name, so a reload does not reset it. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct GuestOutputLimits {
    windows: Arc<Mutex<HashMap<Arc<str>, Window>>>,
}

/// What the budget said about one line or event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    Yes,
    /// No, and it is the first refusal in this window (say so once).
    FirstNo,
    No,
}

impl GuestOutputLimits {
    /// What `plugin` logged and recorded so far.
    pub fn counts(&self, plugin: &str) -> GuestOutputCounts {
        let windows = self.windows.lock().expect("guest output lock");
        windows.get(plugin).map(|w| w.totals).unwrap_or_default()
    }

    fn admit(&self, plugin: &Arc<str>, event: bool) -> Admit {
        self.admit_up_to(plugin, event, EVENTS_PER_WINDOW)
    }

    /// [`Self::admit`], with `events` events per window for this plugin.
    fn admit_up_to(&self, plugin: &Arc<str>, event: bool, events: u32) -> Admit {
        let mut windows = self.windows.lock().expect("guest output lock");
        let now = Instant::now();
        let w = windows.entry(plugin.clone()).or_insert_with(|| Window {
            started: now,
            lines: 0,
            events: 0,
            totals: GuestOutputCounts::default(),
        });
        if now.duration_since(w.started) >= GUEST_OUTPUT_WINDOW {
            (w.started, w.lines, w.events) = (now, 0, 0);
        }
        let (used, cap, kept, dropped) = match event {
            false => (
                &mut w.lines,
                LOG_LINES_PER_WINDOW,
                &mut w.totals.lines_kept,
                &mut w.totals.lines_dropped,
            ),
            true => (
                &mut w.events,
                events,
                &mut w.totals.events_kept,
                &mut w.totals.events_dropped,
            ),
        };
        *used = used.saturating_add(1);
        if *used <= cap {
            *kept += 1;
            return Admit::Yes;
        }
        *dropped += 1;
        if *used == cap + 1 {
            Admit::FirstNo
        } else {
            Admit::No
        }
    }
}

/// Guest text made safe for one line of the host's log: quoted, with
/// newlines, carriage returns, escape sequences and every other control or
/// invisible character escaped, so it cannot start a line of its own or
/// pass for one of the host's fields.
pub(crate) fn quote(text: &str) -> String {
    format!("{text:?}")
}

/// The directories one call's sandbox preopens, worked out from the grants
/// and the pass's facts.
#[derive(Debug, Default)]
pub(crate) struct Preopens {
    /// Read-only.
    dirs: Vec<Preopen>,
    /// Whether one of them may hold a file whose read never returns (see
    /// [`ProcGrant::may_block`]).
    may_block: bool,
    /// The pass's filtered `/proc` views they include.
    /// Each with the granted host path of its procfs root.
    snapshots: Vec<(PathBuf, Arc<proc_view::Snapshot>)>,
}

/// One directory a sandbox preopens.
#[derive(Debug, PartialEq, Eq)]
struct Preopen {
    host: PathBuf,
    guest: String,
    /// Which directory it is (device and inode), not only where.
    id: Option<(u64, u64)>,
}

impl Preopens {
    /// What `grants` preopen in the pass of `ctx`: each granted directory
    /// that exists at its own guest path, a procfs root as its filtered view.
    pub fn plan(grants: &Grants, ctx: &CallContext) -> std::io::Result<Self> {
        let mut plan = Self::default();
        for g in &grants.paths {
            // Absent now, perhaps present at the next pass: see
            // Plugin::load_bytes.
            let Some(grant) = ctx.facts.grant(&g.from) else {
                continue;
            };
            plan.may_block |= grant.may_block();
            let mut add = |host: PathBuf, guest: &Path| {
                // Which directory it is, not only where.
                let id = ctx.facts.dir_id(&host);
                let guest = guest.to_string_lossy().into_owned();
                plan.dirs.push(Preopen { host, guest, id });
            };
            match grant {
                ProcGrant::Plain | ProcGrant::KernelMm | ProcGrant::Allowed | ProcGrant::Driver => {
                    add(ctx.facts.host_path(&g.from).into_owned(), &g.path);
                }
                ProcGrant::Root => {
                    let snap = ctx.facts.proc_view(&g.from)?;
                    add(snap.path().to_owned(), &g.path);
                    for d in snap.live() {
                        add(ctx.facts.host_path(&g.from).join(d), &g.path.join(d));
                    }
                    plan.snapshots.push((g.from.clone(), snap));
                }
                // Host facts only (see proc_view); or refused at load, and
                // skipped if it became refusable since (a mount appeared).
                ProcGrant::HoldsProc | ProcGrant::Refused(_) => {}
            }
        }
        Ok(plan)
    }
}

/// The data inside one call's store (or, for a plugin that reuses its
/// instance, inside one store's calls).
pub(crate) struct CallState {
    pub plugin: Arc<str>,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limits: CallLimits,
    /// The call's deadline (the plugin's `timeout`), for error messages.
    pub timeout: Duration,
    pub grants: Arc<Grants>,
    pub ctx: CallContext,
    pub output: GuestOutputLimits,
    pub events: Vec<EmittedEvent>,
    /// The host functions refused in this call for want of a grant.
    pub denied: Vec<Denied>,
    pub stderr: MemoryOutputPipe,
    /// How much of `stderr` was logged already.
    pub stderr_logged: usize,
    /// What the sandbox preopened.
    preopens: Preopens,
    /// Per entry of [`proc_view::PROC_FILES`]: opened by the guest in a
    /// filtered `/proc` during this store's life.
    proc_opened: [bool; proc_view::PROC_FILES.len()],
    /// What this call read (see [`crate::trace`]).
    pub trace: Trace,
}

impl CallState {
    /// A sandbox with exactly `grants`: read-only preopens as `preopens`
    /// plans them (a procfs root as its filtered view), the granted
    /// environment, argv the plugin's name, no network, no stdin, stdout
    /// discarded and stderr captured (bounded) for the host's log.
    pub fn new(
        plugin: Arc<str>,
        grants: Arc<Grants>,
        ctx: CallContext,
        preopens: Preopens,
        memory_limit: usize,
        timeout: Duration,
        output: GuestOutputLimits,
    ) -> wasmtime::Result<Self> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let mut b = WasiCtx::builder();
        // File operations run on the call's own thread, as system calls; a
        // call that can reach a file whose read may never return runs on a
        // thread of its own, under a deadline its caller keeps (see
        // `call_thread`).
        // argv is the plugin's name alone, as a process's is its program's:
        // Go's klog, which k8s.io/api pulls in, reads os.Args[0] at init,
        // and trapped on an empty argv.
        b.allow_ip_name_lookup(false)
            .stderr(stderr.clone())
            .allow_blocking_current_thread(true)
            .arg(&*plugin);
        for (k, v) in &grants.env {
            b.env(k, v);
        }
        for d in &preopens.dirs {
            b.preopened_dir(&d.host, &d.guest, wasmtime_wasi::FsPerms::ReadOnly)?;
        }
        Ok(Self {
            plugin,
            wasi: b.build(),
            table: ResourceTable::new(),
            limits: CallLimits::new(memory_limit),
            timeout,
            grants,
            ctx,
            output,
            events: Vec::new(),
            denied: Vec::new(),
            stderr,
            stderr_logged: 0,
            preopens,
            proc_opened: [false; proc_view::PROC_FILES.len()],
            trace: Trace::default(),
        })
    }

    /// Whether a store whose last call succeeded can serve a call whose
    /// sandbox is `preopens`: it holds those very directories open, at the
    /// same guest paths (the filtered `/proc`'s directory is reused from
    /// pass to pass).
    pub fn serves(&self, preopens: &Preopens) -> bool {
        preopens.dirs == self.preopens.dirs
    }

    /// Readies the store for a call in the pass of `ctx` (see
    /// [`Self::serves`]). The files of a filtered `/proc` that the guest
    /// opened in an earlier call are copied for this pass now: it may hold
    /// one of them open, and read it again without opening it.
    pub fn renew(&mut self, ctx: CallContext, preopens: Preopens) {
        self.ctx = ctx;
        self.preopens = preopens;
        self.events.clear();
        self.denied.clear();
        self.trace = Trace::default();
        for (i, _) in self.proc_opened.iter().enumerate().filter(|(_, o)| **o) {
            for (from, snap) in &self.preopens.snapshots {
                // One that fails is tried again at its next open.
                let _ = self.copy_for_pass(snap, i);
                // The guest may read it again without opening it: an input
                // of this call.
                let copy = snap.path().join(proc_view::PROC_FILES[i]);
                self.trace.proc_file(from, i, &copy);
            }
        }
    }

    /// Before the guest opens `path` in its directory `fd`: when `fd` is
    /// one of this call's filtered `/proc` views and `path` names one of
    /// its files, copies that file for the pass (once per pass:
    /// [`proc_view::Snapshot::copy`]). A copy that fails fails the open
    /// with `io`, so that the guest never reads a stale or partial copy.
    /// The copy is recorded in the call's trace.
    fn copy_proc_file(
        &mut self,
        fd: &Resource<fs::Descriptor>,
        path: &str,
    ) -> Result<bool, fs::ErrorCode> {
        use std::os::unix::fs::MetadataExt;
        if self.preopens.snapshots.is_empty() {
            return Ok(false);
        }
        let Some(i) = proc_view::file_index(path) else {
            return Ok(false);
        };
        // Which directory `fd` is, by device and inode: the preopen itself,
        // or the same directory opened again through it (`.`).
        let Ok(fs::Descriptor::Dir(dir)) = self.table.get(fd) else {
            return Ok(false);
        };
        let Ok(meta) = dir.dir.metadata() else {
            return Ok(false);
        };
        let id = (meta.dev(), meta.ino());
        let Some((from, snap)) = self.preopens.snapshots.iter().find(|(_, s)| s.is_dir(id)) else {
            return Ok(false);
        };
        self.copy_for_pass(snap, i).map_err(|_| fs::ErrorCode::Io)?;
        self.proc_opened[i] = true;
        let copy = snap.path().join(proc_view::PROC_FILES[i]);
        self.trace.proc_file(from, i, &copy);
        Ok(true)
    }

    /// The host path of the file or directory `fd`, as the kernel names
    /// it (`None`: it cannot).
    fn fd_path(&self, fd: &Resource<fs::Descriptor>) -> Option<PathBuf> {
        use std::os::fd::AsRawFd;
        let raw = match self.table.get(fd).ok()? {
            fs::Descriptor::Dir(d) => d.dir.as_raw_fd(),
            fs::Descriptor::File(f) => f.file.as_raw_fd(),
        };
        std::fs::read_link(format!("/proc/self/fd/{raw}")).ok()
    }

    /// Records, in the call's trace, the file `path` reached through the
    /// directory `fd` (`None`: `fd` itself) by `access`. One the kernel
    /// cannot name makes the call [`Unrepeatable::Untraced`].
    fn trace_file(&mut self, fd: &Resource<fs::Descriptor>, path: Option<&str>, access: Access) {
        match self.fd_path(fd) {
            Some(dir) => self.trace.file(
                match path {
                    Some(p) => dir.join(p.trim_start_matches('/')),
                    None => dir,
                },
                access,
            ),
            None => self.trace.mark(Unrepeatable::Untraced),
        }
    }

    /// The host functions' answers in this call's sandbox.
    fn answers(&self) -> Answers<'_> {
        Answers {
            plugin: &self.plugin,
            grants: &self.grants,
            ctx: &self.ctx,
        }
    }

    /// [`proc_view::Snapshot::copy`], logged when it fails.
    fn copy_for_pass(&self, snap: &proc_view::Snapshot, i: usize) -> std::io::Result<()> {
        snap.copy(i).inspect_err(|e| {
            tracing::warn!(
                plugin = &*self.plugin,
                file = proc_view::PROC_FILES[i],
                "cannot copy the /proc file for the pass: {e}"
            );
        })
    }

    /// Lets go of the pass (its facts and `/proc` view) between calls.
    pub fn release(&mut self) {
        self.ctx = CallContext::default();
        self.preopens.snapshots.clear();
    }

    /// Whether the guest can reach a file whose read may never return (see
    /// [`ProcGrant::may_block`]).
    pub fn may_block(&self) -> bool {
        self.preopens.may_block
    }

    /// Logs one line of guest text at `level`, within the plugin's budget.
    pub fn guest_line(&self, level: tracing::Level, text: &str, stderr: bool) {
        let plugin = &*self.plugin;
        match self.output.admit(&self.plugin, false) {
            Admit::Yes => {}
            Admit::FirstNo => {
                tracing::warn!(
                    plugin,
                    "plugin logs more than {LOG_LINES_PER_WINDOW} lines per {}s; dropping its lines until the window ends",
                    GUEST_OUTPUT_WINDOW.as_secs()
                );
                return;
            }
            Admit::No => return,
        }
        let mut cut = text.len().min(MAX_LOG_LINE);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let message = quote(&text[..cut]);
        macro_rules! line {
            ($lvl:ident) => {
                tracing::$lvl!(target: "nodestatus::plugin", plugin, stderr, "{message}")
            };
        }
        match level {
            tracing::Level::TRACE => line!(trace),
            tracing::Level::DEBUG => line!(debug),
            tracing::Level::INFO => line!(info),
            tracing::Level::WARN => line!(warn),
            _ => line!(error),
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Adds the host interface, and the host's own WASI functions in place of
/// wasmtime-wasi's where a call's trace records what they reach (see
/// [`serve_traced`]): called after `wasmtime_wasi::p2::add_to_linker_async`.
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    host::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    linker.allow_shadowing(true);
    let served = serve_traced(linker);
    linker.allow_shadowing(false);
    served
}

/// The WASI interface whose file functions the host serves, at the version
/// wasmtime-wasi defines (a guest's import of any `0.2.x` resolves to it).
const WASI_FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// wasmtime-wasi's answer to a file function, as the guest gets it.
fn fs_answer<T>(
    view: &mut wasmtime_wasi::filesystem::WasiFilesystemCtxView<'_>,
    r: wasmtime_wasi::p2::FsResult<T>,
) -> wasmtime::Result<(Result<T, fs::ErrorCode>,)> {
    match r {
        Ok(v) => Ok((Ok(v),)),
        Err(e) => Ok((Err(fs::Host::convert_error_code(view, e)?),)),
    }
}

/// Puts the host's own functions in place of wasmtime-wasi's, each by its
/// name, on a linker that allows shadowing (wasmtime-wasi's bindings are
/// added first: were they added after, the linker would refuse theirs as a
/// second definition):
///
/// - `descriptor.open-at` copies the file of a filtered `/proc` that the
///   path names, if any, for the pass ([`CallState::copy_proc_file`]);
/// - `open-at`, `stat`, `stat-at`, `metadata-hash`, `metadata-hash-at`
///   (wasi-libc's `stat` asks it for `st_ino`), `readlink-at` and
///   `read-directory` record what they reach in the call's trace, by the
///   host path the kernel names;
/// - WASI's clocks and random numbers mark the call unrepeatable (not
///   `insecure-seed`: see [`crate::trace`]).
///
/// What each does, and how (beneath the directory, read-only), is
/// wasmtime-wasi's as before. A wasmtime-wasi whose `wasi:filesystem` is
/// not [`WASI_FILESYSTEM_TYPES`] would leave these definitions in an
/// instance of their own, and every guest that reads a filtered `/proc`
/// would read the empty copies: the runtime's tests fail on it.
fn serve_traced(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime::StoreContextMut;
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::filesystem::WasiFilesystemView;
    use wasmtime_wasi::p2::bindings::{clocks, random};
    use wasmtime_wasi::random::WasiRandom;
    type Store<'a> = StoreContextMut<'a, CallState>;
    type Fd = Resource<fs::Descriptor>;

    let mut types = linker.instance(WASI_FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: Store<'_>,
         (fd, path_flags, path, oflags, flags): (
            Fd,
            fs::PathFlags,
            String,
            fs::OpenFlags,
            fs::DescriptorFlags,
        )| {
            Box::new(async move {
                open_at(store.data_mut(), fd, path_flags, path, oflags, flags)
                    .await
                    .map(|r| (r,))
            })
        },
    )?;
    // Each of these records what it reaches (`$record`, with the call's
    // state as `$state`), then answers as wasmtime-wasi's `$method`.
    macro_rules! traced {
        ($name:literal, |$state:ident, $($arg:ident: $ty:ty),*| $record:block => $method:ident) => {
            types.func_wrap_async(
                $name,
                |mut store: Store<'_>, ($($arg,)*): ($($ty,)*)| {
                    Box::new(async move {
                        let $state = store.data_mut();
                        $record
                        let mut view = $state.filesystem();
                        let r = fs::HostDescriptor::$method(&mut view, $($arg),*).await;
                        fs_answer(&mut view, r)
                    })
                },
            )?;
        };
    }
    traced!("[method]descriptor.stat-at", |state, fd: Fd, path_flags: fs::PathFlags, path: String| {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        state.trace_file(&fd, Some(&path), Access::Stat { follow });
    } => stat_at);
    traced!("[method]descriptor.stat", |state, fd: Fd| {
        state.trace_file(&fd, None, Access::Stat { follow: true });
    } => stat);
    traced!("[method]descriptor.read-directory", |state, fd: Fd| {
        state.trace_file(&fd, None, Access::List);
    } => read_directory);
    traced!("[method]descriptor.readlink-at", |state, fd: Fd, path: String| {
        state.trace_file(&fd, Some(&path), Access::Link);
    } => readlink_at);
    traced!("[method]descriptor.metadata-hash", |state, fd: Fd| {
        state.trace_file(&fd, None, Access::Stat { follow: true });
    } => metadata_hash);
    traced!("[method]descriptor.metadata-hash-at", |state, fd: Fd, path_flags: fs::PathFlags, path: String| {
        let follow = path_flags.contains(fs::PathFlags::SYMLINK_FOLLOW);
        state.trace_file(&fd, Some(&path), Access::Stat { follow });
    } => metadata_hash_at);

    // The clocks and randomness, each interface again with a getter that
    // marks the call before wasmtime-wasi answers.
    fn clock(s: &mut CallState) -> wasmtime_wasi::clocks::WasiClocksCtxView<'_> {
        s.trace.mark(Unrepeatable::Clock);
        s.clocks()
    }
    fn rng(s: &mut CallState) -> &mut wasmtime_wasi::random::WasiRandomCtx {
        s.trace.mark(Unrepeatable::Random);
        s.wasi.random()
    }
    clocks::wall_clock::add_to_linker::<CallState, WasiClocks>(linker, clock)?;
    clocks::monotonic_clock::add_to_linker::<CallState, WasiClocks>(linker, clock)?;
    random::random::add_to_linker::<CallState, WasiRandom>(linker, rng)?;
    random::insecure::add_to_linker::<CallState, WasiRandom>(linker, rng)?;
    Ok(())
}

/// WASI's `open-at`: wasmtime-wasi's, after the file of a filtered `/proc`
/// that `path` names, if any, is copied for the pass
/// ([`CallState::copy_proc_file`]), and what it reaches is recorded in the
/// call's trace.
async fn open_at(
    state: &mut CallState,
    fd: Resource<fs::Descriptor>,
    path_flags: fs::PathFlags,
    path: String,
    oflags: fs::OpenFlags,
    flags: fs::DescriptorFlags,
) -> wasmtime::Result<Result<Resource<fs::Descriptor>, fs::ErrorCode>> {
    use wasmtime_wasi::filesystem::WasiFilesystemView;
    match state.copy_proc_file(&fd, &path) {
        Err(e) => return Ok(Err(e)),
        Ok(true) => {}
        Ok(false) => state.trace_file(&fd, Some(&path), Access::Open),
    }
    let mut view = state.filesystem();
    let r = fs::HostDescriptor::open_at(&mut view, fd, path_flags, path, oflags, flags).await;
    fs_answer(&mut view, r).map(|(r,)| r)
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// An event reason as Kubernetes wants it: ASCII letters and digits only.
fn clean_reason(reason: &str) -> String {
    let r: String = reason
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(128)
        .collect();
    if r.is_empty() {
        "PluginEvent".into()
    } else {
        r
    }
}

/// An event message with every control character turned into a space.
fn clean_message(message: String) -> String {
    truncate(message, 1024)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The host functions' answers, from a plugin's grants and a pass's
/// context: what a call sees, and what the next call would see (a trace's
/// check asks them again: [`Answers::print`]).
pub(crate) struct Answers<'a> {
    pub plugin: &'a str,
    pub grants: &'a Grants,
    pub ctx: &'a CallContext,
}

impl Answers<'_> {
    fn system(&self) -> host::SystemInfo {
        let s = self.ctx.facts.system();
        host::SystemInfo {
            hostname: s.hostname.clone(),
            kernel_release: s.kernel_release.clone(),
            kernel_version: s.kernel_version.clone(),
            machine: s.machine.clone(),
            os_release: s.os_release.clone(),
            machine_id: s.machine_id.clone(),
            system_uuid: s.system_uuid.clone(),
            boot_id: s.boot_id.clone(),
            cpus: s.cpus,
        }
    }

    fn network_interfaces(&self) -> Vec<host::NetworkInterface> {
        self.ctx
            .facts
            .interfaces()
            .iter()
            .map(|i| host::NetworkInterface {
                name: i.name.clone(),
                up: i.up,
                loopback: i.loopback,
                addresses: i
                    .addresses
                    .iter()
                    .map(|a| host::IpAddress {
                        address: a.address.to_string(),
                        prefix_len: a.prefix_len,
                    })
                    .collect(),
            })
            .collect()
    }

    /// `statvfs(path)`; `Err((message, true))` when the path is outside
    /// every grant.
    fn statvfs(&self, path: &str) -> Result<host::FsStats, (String, bool)> {
        let Some(norm) = facts::normalize_abs(path) else {
            return Err((format!("statvfs: {path:?} is not an absolute path"), false));
        };
        // The innermost grant that holds the path says where it is on the
        // host; the rest is resolved beneath it, never following a symlink
        // out (which would tell the plugin whether any host path exists).
        let Some(grant) = self
            .grants
            .paths
            .iter()
            .filter(|g| norm.starts_with(&g.path))
            .max_by_key(|g| g.path.components().count())
        else {
            return Err((
                format!("statvfs: {path:?} is not inside a path granted to this plugin"),
                true,
            ));
        };
        let rest = norm.strip_prefix(&grant.path).unwrap_or(Path::new(""));
        let st = facts::statvfs_beneath(&self.ctx.facts.host_path(&grant.from), rest)
            .map_err(|e| (format!("statvfs: {path:?}: {e}"), false))?;
        Ok(host::FsStats {
            total_bytes: st.total_bytes,
            free_bytes: st.free_bytes,
            available_bytes: st.available_bytes,
            total_inodes: st.total_inodes,
            free_inodes: st.free_inodes,
            read_only: st.read_only,
        })
    }

    fn container_runtime(&self) -> Result<host::ContainerRuntimeInfo, host::RuntimeError> {
        if !self.grants.container_runtime {
            return Err(host::RuntimeError::NotGranted(format!(
                "the container runtime is not granted to this plugin: set `containerRuntime: true` under plugins.{} in the config",
                self.plugin
            )));
        }
        let Some(answer) = &self.ctx.container_runtime else {
            return Err(host::RuntimeError::NotConfigured(
                "no container runtime is configured: set containerRuntimeEndpoint in the config (for example unix:///run/containerd/containerd.sock)"
                    .to_owned(),
            ));
        };
        let facts = answer
            .as_ref()
            .as_ref()
            .map_err(|e| host::RuntimeError::Unavailable(e.clone()))?;
        Ok(host::ContainerRuntimeInfo {
            name: facts.name.clone(),
            version: facts.version.clone(),
            api_version: facts.api_version.clone(),
            conditions: facts
                .conditions
                .iter()
                .map(|c| host::RuntimeCondition {
                    type_: c.type_.clone(),
                    status: c.status,
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                })
                .collect(),
            images: facts
                .images
                .iter()
                .map(|i| host::RuntimeImage {
                    id: i.id.clone(),
                    repo_tags: i.repo_tags.clone(),
                    repo_digests: i.repo_digests.clone(),
                    size: i.size,
                })
                .collect(),
            handlers: facts.handlers.iter().map(|h| h.name.clone()).collect(),
        })
    }

    /// The fingerprint of the answer to `read`, as a call would get it now.
    pub fn print(&self, read: &HostRead) -> u64 {
        match read {
            HostRead::Config => print_debug(&self.grants.config),
            HostRead::System => print_debug(&self.system()),
            HostRead::Interfaces => print_debug(&self.network_interfaces()),
            HostRead::Statvfs(path) => print_debug(&self.statvfs(path)),
            HostRead::NodeProblems => print_debug(&self.ctx.node_problems),
            HostRead::ContainerRuntime => print_debug(&self.container_runtime()),
        }
    }
}

impl host::Host for CallState {
    fn log(&mut self, level: host::Level, message: String) {
        let level = match level {
            host::Level::Trace => tracing::Level::TRACE,
            host::Level::Debug => tracing::Level::DEBUG,
            host::Level::Info => tracing::Level::INFO,
            host::Level::Warn => tracing::Level::WARN,
            host::Level::Error => tracing::Level::ERROR,
        };
        self.guest_line(level, &message, false);
    }

    fn config(&mut self) -> String {
        self.trace.host(HostRead::Config, &self.grants.config);
        self.grants.config.to_string()
    }

    fn record_event(&mut self, event_type: host::EventType, reason: String, message: String) {
        let cap = self.grants.events_per_window;
        match self.output.admit_up_to(&self.plugin, true, cap) {
            Admit::Yes => {}
            Admit::FirstNo => {
                tracing::warn!(
                    plugin = &*self.plugin,
                    "plugin records more than {cap} events per {}s (its eventsPerMinute); dropping its events until the window ends",
                    GUEST_OUTPUT_WINDOW.as_secs()
                );
                return;
            }
            Admit::No => return,
        }
        self.events.push(EmittedEvent {
            event_type: match event_type {
                host::EventType::Normal => EventType::Normal,
                host::EventType::Warning => EventType::Warning,
            },
            reason: clean_reason(&reason),
            message: clean_message(message),
        });
    }

    fn system(&mut self) -> host::SystemInfo {
        let answer = self.answers().system();
        self.trace.host(HostRead::System, &answer);
        answer
    }

    fn network_interfaces(&mut self) -> Vec<host::NetworkInterface> {
        let answer = self.answers().network_interfaces();
        self.trace.host(HostRead::Interfaces, &answer);
        answer
    }

    fn statvfs(&mut self, path: String) -> Result<host::FsStats, String> {
        let answer = self.answers().statvfs(&path);
        self.trace.host(HostRead::Statvfs(path.clone()), &answer);
        answer.map_err(|(message, denied)| {
            if denied {
                self.denied.push(Denied::Statvfs(path));
            }
            message
        })
    }

    fn node_problems(&mut self) -> Vec<String> {
        self.trace
            .host(HostRead::NodeProblems, &self.ctx.node_problems);
        self.ctx.node_problems.to_vec()
    }

    fn container_runtime(&mut self) -> Result<host::ContainerRuntimeInfo, host::RuntimeError> {
        let answer = self.answers().container_runtime();
        self.trace.host(HostRead::ContainerRuntime, &answer);
        if !self.grants.container_runtime {
            self.denied.push(Denied::ContainerRuntime);
        }
        answer
    }
}

#[cfg(test)]
mod tests;
