//! The plugin runtime: one wasmtime [`Engine`] shared by every plugin and every
//! node, a precompile cache, and a fresh sandboxed [`Store`](wasmtime::Store)
//! for each call.
//!
//! The shared parts ([`Runtime`], [`Plugin`]) hold no per-node state. What a
//! call needs about the node and the pass it belongs to travels in a
//! [`CallContext`], so one process could drive many nodes.
//!
//! # What bounds a call
//!
//! - **Time.** Every call (`metadata` at load, `set` in a pass) has one
//!   deadline, the plugin's `timeout`, enforced two ways at once:
//!   - guest code is stopped by wasmtime's epoch interruption (a ticker
//!     thread advances the epoch every [`EPOCH_TICK`]);
//!   - epochs cannot interrupt host code, so a guest that blocks *in* a host
//!     call (a `monotonic-clock` subscription plus `pollable.block`, a
//!     `poll` on a long timer, a read that never completes) would run past
//!     it. The linker therefore holds WASI's async bindings and exports are
//!     called with `call_async`: every WASI wait (a sleep, a poll) is a
//!     future, and the whole call runs under a tokio timeout of the same
//!     deadline (plus two ticks, so that the epoch reports a guest spinning
//!     in its own code). When it fires, the future (and with it the guest's
//!     fiber and store) is dropped, and the call fails with
//!     [`CallErrorKind::Timeout`]. The host's own functions
//!     (`nodestatus:plugin/host`) never block.
//!   - file operations run on the call's thread, as plain system calls
//!     (a trip through tokio's blocking pool for each one made a `/proc`
//!     reader 10 to 25 times slower). A thread blocked in the kernel (a FIFO
//!     with no writer inside a granted directory, a hung network mount) is
//!     beyond both limits above, so a call whose sandbox preopens a
//!     directory where that can happen (any but a filtered `/proc`, the
//!     kernel's tables below it and sysfs's `kernel/mm`: see
//!     [`proc_view::ProcGrant::may_block`])
//!     runs on a call thread of its own (`runtime/call_thread.rs`), and its
//!     caller waits at most the deadline (plus four ticks). Past it the call
//!     fails with [`CallErrorKind::Timeout`], its thread is left to the
//!     kernel, and the plugin is not called again until that call returns:
//!     at most one blocked thread per plugin. The other calls run on the
//!     caller's thread (a hand-off to a call thread costs 0.1 to 0.2 ms on
//!     the benchmark machine).
//! - **Memory.** One budget per call, the plugin's `memory_limit`, counts
//!   every linear memory *and* every table element (at
//!   [`TABLE_ELEMENT_BYTES`] each) of every core instance together, so extra
//!   memories, extra instances or huge tables cannot add up past it; the
//!   number of instances, memories and tables per call is capped as well
//!   ([`MAX_INSTANCES`], [`MAX_MEMORIES`], [`MAX_TABLES`]). The output is
//!   refused above [`MAX_OUTPUT_BYTES`] before it is parsed; its copy out of
//!   the guest is bounded by the guest's own memory cap. (Wasmtime runs the
//!   guest's post-return, which may free the string, before a call returns,
//!   so the string cannot be measured in place and copied later.)
//! - **Files.** A plugin file is opened without blocking, must be a regular
//!   file, and is read with a limit of [`MAX_PLUGIN_BYTES`]; compilation only
//!   starts on a file within that limit.
//! - **Compilation.** Cranelift cannot be interrupted, and 1 MB of
//!   WebAssembly can keep it busy for minutes, so the engine's binary
//!   compiles each plugin in a child process under a deadline and a memory
//!   limit (`compileTimeout`, `compileMemoryLimit`; see [`compile`]), at
//!   most [`COMPILE_SLOTS`] at once. Before any compile, a component is
//!   checked without one (`precheck`: valid, the `setter` world at `0.1.x`,
//!   only imports the host offers), and a file the compile refused before is
//!   refused again from the memo of refusals (`refused`), by its sha256. A
//!   rescan compiles without holding the lock that status readers take, and
//!   passes keep running the set they hold. With [`Tiers::Tiered`], Winch
//!   compiles a plugin first and Cranelift behind it (see `tier`); both
//!   compile under these bounds.
//! - **Identity.** A plugin is the name of its file: `gpu.wasm` must declare
//!   itself `gpu` (`gpu_x.wasm`, as cargo names it, may declare `gpu-x`), so
//!   the operator's file name, not the plugin, decides which grants and
//!   settings apply ([`LoadError::NameMismatch`] otherwise).
//! - **Between calls.** Each call gets a fresh store and instance, unless
//!   the operator set the plugin's `reuseInstance`: then the store and
//!   instance of a call that returned serve the next call in the same
//!   sandbox (the same preopened directories), with the next pass's facts
//!   and a fresh deadline, and the memory cap counting what the instance
//!   kept. Any failed call drops them.
//! - **Grants.** Nothing is granted by default. A granted `/proc` is served as
//!   a filtered view (see [`proc_view`]), and host facts such as `statvfs`
//!   resolve paths beneath the grant, never following a symlink out of it.
//! - **Logs and events.** Guest text is quoted before it reaches the host's
//!   log, and each plugin has a budget of log lines and events per time
//!   window (see [`GuestOutputLimits`]), not per call.

pub mod bridge;
mod cache;
mod call_thread;
pub mod compile;
pub mod facts;
pub mod files;
mod host_api;
mod limits;
mod plugin;
mod precheck;
pub mod proc_view;
pub mod reactor;
mod refused;
mod tier;
pub mod trace;

pub use bridge::{block_on, blocking};
pub use cache::{CacheStats, DEFAULT_MAX_BYTES as DEFAULT_CACHE_MAX_BYTES, PrecompileCache};
pub use compile::{CompileLimits, Compiler};
pub use host_api::{
    CallContext, EVENTS_PER_WINDOW, EmittedEvent, EventType, GUEST_OUTPUT_WINDOW,
    GuestOutputCounts, GuestOutputLimits, LOG_LINES_PER_WINDOW,
};
pub use limits::{MAX_INSTANCES, MAX_MEMORIES, MAX_TABLES, TABLE_ELEMENT_BYTES};
pub use plugin::{
    CallError, CallErrorKind, DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT, Interface, LoadError,
    MAX_OUTPUT_BYTES, MAX_PLUGIN_BYTES, Metadata, MetadataError, PathGrant, Plugin, PluginSettings,
    SETTER_EXPORT_0_1, SETTER_EXPORT_0_2, SetOutput, SetResult, TierUp, Ungranted, Withheld,
    name_of_file, read_plugin_file, sha256_hex,
};
pub use tier::{Tier, Tiers};
pub use trace::{Trace, Unrepeatable};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::Linker;
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use host_api::CallState;
use tier::TierEngine;

/// How often the epoch ticker advances the engine's epoch. A plugin's CPU
/// deadline is counted in these ticks, so it is also the deadline's precision.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How long past its deadline a call's caller waits for the epoch to stop
/// the guest before it calls the call blocked (in a host call, or in the
/// kernel on a call thread). A guest that its epoch interrupted returns
/// within a tick or two on an idle machine; on a loaded one (ten runnable
/// threads on two cores), its thread waited for a core longer than the two
/// to four ticks this once was, and a plain loop was reported as blocked in
/// the kernel (tests/all/hostile.rs, one run in three). A call truly
/// blocked is reported this much later, and nothing else waits for it.
pub const DEADLINE_GRACE: Duration = Duration::from_millis(500);

/// Errors from building the runtime itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The wasmtime engine could not be configured.
    #[error("cannot configure the wasmtime engine")]
    Engine(#[source] wasmtime::Error),
    /// The host functions could not be added to the linker.
    #[error("cannot link the host interface")]
    Linker(#[source] wasmtime::Error),
    /// The precompile cache directory could be written by someone other than
    /// the engine's user, so its entries cannot be trusted.
    #[error("precompile cache directory {} is not safe: {reason}", .path.display())]
    CacheUnsafe {
        /// The cache directory.
        path: PathBuf,
        /// What is wrong with it, and how to fix it.
        reason: String,
    },
    /// The precompile cache directory could not be prepared.
    #[error("cannot use precompile cache directory {}", .path.display())]
    Cache {
        /// The cache directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Convenience alias for this module's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and all its causes on one line (`a: b: c`), each cause once:
/// how every load and call error reaches the log, `/status` and the CLI.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

/// How to build a [`Runtime`].
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// The precompile cache's directory; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// The cache's size cap in bytes (`cacheMaxSize`).
    pub cache_max_bytes: u64,
    /// How plugins are compiled.
    pub compiler: Compiler,
    /// Which compilers ([`Tiers`]; Cranelift only by default).
    pub tiers: Tiers,
    /// With [`Tiers::Tiered`], whether Cranelift replaces Winch's code in
    /// the background (true by default). False for a process that ends
    /// after one pass (`once`, `plugin check`): it would only abandon that
    /// compile, after taking a core from the loads it waits for.
    pub tier_up: bool,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            cache_dir: None,
            cache_max_bytes: DEFAULT_CACHE_MAX_BYTES,
            compiler: Compiler::InProcess,
            tiers: Tiers::default(),
            tier_up: true,
        }
    }
}

/// The shared, node-independent half of the plugin host: the engine, the
/// linker with the host interface and WASI, the precompile cache, and the
/// epoch ticker that enforces CPU deadlines.
///
/// Cloning is cheap; every clone shares the same engine.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    /// Cranelift's engine: its code is what the cache holds, unless the
    /// tiers are Winch's alone.
    optimized: TierEngine,
    /// Winch's: built at start with [`Tiers::Winch`]; with
    /// [`Tiers::Tiered`], at the first compile (a start that finds every
    /// plugin in the cache never builds it: no memory for it). `None`
    /// inside when it could not be built (then Cranelift compiles).
    baseline: std::sync::OnceLock<Option<TierEngine>>,
    /// The engines the epoch ticker advances (Winch's joins when built).
    ticked: Arc<Mutex<Vec<wasmtime::EngineWeak>>>,
    tiers: Tiers,
    /// [`RuntimeOptions::tier_up`].
    tier_up: bool,
    cache: Option<PrecompileCache>,
    refused: refused::RefusedMemo,
    compile_slots: CompileSlots,
    /// Cranelift's compiles behind Winch's code: one at a time, apart from
    /// the loads' slots, so that a load never waits for one.
    tier_up_slot: CompileSlots,
    load_stats: LoadStats,
    compiler: Compiler,
    guest_output: GuestOutputLimits,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Builds the engine. `cache_dir` is a directory the host owns and plugins
    /// cannot write; `None` disables the precompile cache, and so does a
    /// directory that fails the ownership and permission checks of
    /// [`PrecompileCache::open`] (with a warning that says why).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self> {
        Self::with_options(RuntimeOptions {
            cache_dir,
            ..RuntimeOptions::default()
        })
    }

    /// Builds the engine as `options` say: the precompile cache's directory
    /// and size cap, how plugins are compiled (in a child process with
    /// bounded time and memory, see [`compile`]) and by which compilers
    /// ([`Tiers`]).
    pub fn with_options(options: RuntimeOptions) -> Result<Self> {
        let RuntimeOptions {
            cache_dir,
            cache_max_bytes,
            compiler,
            tiers,
            tier_up,
        } = options;
        // The engine that runs plugins for good is pooled; Winch's, when
        // Cranelift replaces its code within seconds, allocates on demand
        // (no second pool of address space for code that runs a few calls).
        let optimized = TierEngine::new(tier_engine(Tier::Optimized, tiers != Tiers::Winch)?)?;
        let baseline = match tiers {
            Tiers::Winch => std::sync::OnceLock::from(Some(TierEngine::new(tier_engine(
                Tier::Baseline,
                true,
            )?)?)),
            Tiers::Tiered | Tiers::Cranelift => std::sync::OnceLock::new(),
        };
        let kept = match (baseline.get(), tiers.last()) {
            (Some(Some(b)), Tier::Baseline) => &b.engine,
            _ => &optimized.engine,
        };

        let cache = match cache_dir.map(|path| PrecompileCache::open(path, kept, cache_max_bytes)) {
            None => None,
            Some(Ok(cache)) => Some(cache),
            Some(Err(err)) => {
                tracing::warn!(
                    "precompile cache disabled, every plugin is compiled at load: {}",
                    error_chain(&err)
                );
                None
            }
        };

        let stop_ticker = Arc::new(AtomicBool::new(false));
        let ticked = Arc::new(Mutex::new(
            std::iter::once(&optimized)
                .chain(baseline.get().into_iter().flatten())
                .map(|t| t.engine.weak())
                .collect(),
        ));
        spawn_epoch_ticker(ticked.clone(), stop_ticker.clone());

        Ok(Self {
            inner: Arc::new(Inner {
                optimized,
                baseline,
                ticked,
                tiers,
                tier_up,
                refused: refused::RefusedMemo::open(cache.as_ref()),
                cache,
                compile_slots: CompileSlots::new(COMPILE_SLOTS),
                tier_up_slot: CompileSlots::new(1),
                load_stats: LoadStats::default(),
                compiler,
                guest_output: GuestOutputLimits::default(),
                stop_ticker,
            }),
        })
    }

    /// The engine whose code the precompile cache holds: Cranelift's,
    /// unless the tiers are Winch's alone.
    pub fn engine(&self) -> &Engine {
        &self.tier(self.inner.tiers.last()).engine
    }

    /// The compilers in use.
    pub fn tiers(&self) -> Tiers {
        self.inner.tiers
    }

    /// Whether Cranelift replaces Winch's code in the background
    /// ([`RuntimeOptions::tier_up`]).
    pub fn tiers_up(&self) -> bool {
        self.inner.tier_up
    }

    /// `tier`'s engine and linker (Cranelift's when the runtime has no
    /// Winch).
    pub(crate) fn tier(&self, tier: Tier) -> &TierEngine {
        match tier {
            Tier::Baseline => self.baseline().unwrap_or(&self.inner.optimized),
            Tier::Optimized => &self.inner.optimized,
        }
    }

    /// Winch's engine, built now if this is its first use; `None` with
    /// [`Tiers::Cranelift`], or when it cannot be built.
    pub(crate) fn baseline(&self) -> Option<&TierEngine> {
        if self.inner.tiers == Tiers::Cranelift {
            return None;
        }
        self.inner
            .baseline
            .get_or_init(
                || match tier_engine(Tier::Baseline, false).and_then(TierEngine::new) {
                    Ok(t) => {
                        self.inner
                            .ticked
                            .lock()
                            .expect("ticked engines lock")
                            .push(t.engine.weak());
                        Some(t)
                    }
                    Err(e) => {
                        tracing::warn!(
                            "Winch is unavailable, plugins are compiled by Cranelift: {}",
                            error_chain(&e)
                        );
                        None
                    }
                },
            )
            .as_ref()
    }

    pub(crate) fn linker(&self, tier: Tier) -> &Linker<CallState> {
        &self.tier(tier).linker
    }

    /// The precompile cache, when enabled.
    pub fn cache(&self) -> Option<&PrecompileCache> {
        self.inner.cache.as_ref()
    }

    /// How plugins are compiled.
    pub fn compiler(&self) -> &Compiler {
        &self.inner.compiler
    }

    /// What loads did since the runtime was built: compiles, and refusals
    /// without one.
    pub fn load_stats(&self) -> &LoadStats {
        &self.inner.load_stats
    }

    pub(crate) fn refused(&self) -> &refused::RefusedMemo {
        &self.inner.refused
    }

    /// One of the [`COMPILE_SLOTS`] of loads (or, for Cranelift's compile
    /// behind Winch's code, the one slot of those), held until the guard
    /// is dropped.
    pub(crate) fn compile_slot(&self, behind_winch: bool) -> CompileSlot<'_> {
        match behind_winch {
            false => self.inner.compile_slots.take(),
            true => self.inner.tier_up_slot.take(),
        }
    }

    /// The per-plugin budgets of log lines and events.
    pub fn guest_output(&self) -> &GuestOutputLimits {
        &self.inner.guest_output
    }
}

/// How many components compile at once (loads run side by side; a
/// compile takes a core and, for a Python or JavaScript plugin, about
/// 360 MB). Two, so that one slow compile never holds back all the others.
pub const COMPILE_SLOTS: usize = 2;

/// What loads did since the runtime was built.
#[derive(Debug, Default)]
pub struct LoadStats {
    /// Compiles started (precompile cache misses that passed the check;
    /// with [`Tiers::Tiered`], one by each compiler).
    pub compiles: std::sync::atomic::AtomicU64,
    /// Files refused by the check before the compile (never compiled).
    pub prechecked: std::sync::atomic::AtomicU64,
    /// Plugins whose Winch code Cranelift's replaced ([`Tiers::Tiered`]).
    pub tiered_up: std::sync::atomic::AtomicU64,
    /// Loads answered by the memo of refused files (not compiled again).
    pub remembered: std::sync::atomic::AtomicU64,
}

/// A counting semaphore of compile slots.
struct CompileSlots {
    free: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

/// A compile slot, given back on drop.
pub(crate) struct CompileSlot<'a>(&'a CompileSlots);

impl CompileSlots {
    fn new(n: usize) -> Self {
        Self {
            free: std::sync::Mutex::new(n),
            freed: std::sync::Condvar::new(),
        }
    }

    fn take(&self) -> CompileSlot<'_> {
        let mut free = self.free.lock().expect("compile slots lock");
        while *free == 0 {
            free = self.freed.wait(free).expect("compile slots lock");
        }
        *free -= 1;
        CompileSlot(self)
    }
}

impl Drop for CompileSlot<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().expect("compile slots lock") += 1;
        self.0.freed.notify_one();
    }
}

/// `tier`'s engine for the runtime. The pooling allocator (`pooled`)
/// reuses linear memories and instance slots between calls instead of
/// mapping and unmapping fresh memory for every call, which is most of a
/// call's fixed cost. It needs address space up front; where that cannot be
/// had, fall back to on-demand.
fn tier_engine(tier: Tier, pooled: bool) -> Result<Engine> {
    let config = tier::engine_config(tier);
    if pooled {
        let mut pool = config.clone();
        pool.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling_config()));
        match Engine::new(&pool) {
            Ok(e) => return Ok(e),
            Err(e) => {
                tracing::warn!("pooling allocator unavailable, using on-demand allocation: {e:#}")
            }
        }
    }
    Engine::new(&config).map_err(Error::Engine)
}

/// Slots for concurrent calls: a pass runs its setters one at a time, and
/// loads run beside it, so a few dozen are plenty even for many nodes.
const POOL_SLOTS: u32 = 64;

/// The pool only reserves address space and slots; what one call may
/// actually commit is the per-call budget's to say ([`MAX_MEMORIES`],
/// [`MAX_TABLES`] and the memory limit, which counts table elements too).
/// Per module the pool allows fewer memories and tables than a call may
/// hold in all, and a table of at most 2^20 elements (8 MiB).
fn pooling_config() -> PoolingAllocationConfig {
    let mut p = PoolingAllocationConfig::default();
    p.total_component_instances(POOL_SLOTS)
        .total_core_instances(POOL_SLOTS * 4)
        .total_memories(POOL_SLOTS * 2)
        .total_tables(POOL_SLOTS * 4)
        .total_stacks(POOL_SLOTS)
        .max_memories_per_module(4)
        .max_tables_per_module(8)
        // Large guests (CPython, SpiderMonkey) have big tables and vmctx.
        .table_elements(1 << 20)
        .max_core_instance_size(32 << 20)
        .max_component_instance_size(32 << 20)
        // The per-plugin cap (StoreLimits) is enforced below this.
        .max_memory_size(4 << 30)
        // Nothing of a memory stays resident once its instance is gone: a
        // slot keeps its pages after its module is dropped, and each new
        // build takes a slot no module used, so 1 MiB kept per slot grew the
        // RSS by 29 MB over 100 hot reloads (bounded only by the pool's 128
        // memories), with no time to show for it (docs/benchmarks.md).
        .linear_memory_keep_resident(0)
        .table_keep_resident(64 << 10);
    p
}

/// Advances the engines' epochs every [`EPOCH_TICK`] on a plain thread (so
/// it runs with or without a tokio runtime) until the runtime is dropped.
fn spawn_epoch_ticker(engines: Arc<Mutex<Vec<wasmtime::EngineWeak>>>, stop: Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("nodestatus-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                for engine in engines.lock().expect("ticked engines lock").iter() {
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => return,
                    }
                }
            }
        })
        .expect("spawning the epoch ticker thread");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticked(rt: &Runtime) -> usize {
        rt.inner.ticked.lock().unwrap().len()
    }

    #[test]
    fn tiered_builds_winch_only_for_a_compile() {
        let rt = Runtime::with_options(RuntimeOptions {
            tiers: Tiers::Tiered,
            ..RuntimeOptions::default()
        })
        .unwrap();
        // A start whose plugins are all in the cache never needs it.
        assert!(rt.inner.baseline.get().is_none());
        assert_eq!(ticked(&rt), 1);
        let winch = rt.baseline().expect("Winch is built in");
        assert!(!Engine::same(&winch.engine, rt.engine()));
        assert_eq!(ticked(&rt), 2, "its epoch is advanced too");
        // Built once.
        rt.baseline();
        assert_eq!(ticked(&rt), 2);
    }

    #[test]
    fn cranelift_alone_never_builds_winch_and_winch_alone_at_once() {
        let cranelift = Runtime::new(None).unwrap();
        assert!(cranelift.baseline().is_none());
        assert_eq!(cranelift.tiers(), Tiers::Cranelift);
        let winch = Runtime::with_options(RuntimeOptions {
            tiers: Tiers::Winch,
            ..RuntimeOptions::default()
        })
        .unwrap();
        assert_eq!(ticked(&winch), 2);
        // Its cached code is Winch's.
        assert!(Engine::same(
            winch.engine(),
            &winch.baseline().unwrap().engine
        ));
    }
}
