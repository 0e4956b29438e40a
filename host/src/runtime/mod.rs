//! The plugin runtime: one wasmtime [`Engine`] shared by every plugin and every
//! node, a precompile cache, and a fresh sandboxed [`Store`] for each call.
//!
//! The shared parts ([`Runtime`], [`Plugin`]) hold no per-node state. What a
//! call needs about the node and the pass it belongs to travels in a
//! [`CallContext`], so one process could drive many nodes.

mod cache;
pub mod facts;
mod host_api;
mod plugin;

pub use cache::PrecompileCache;
pub use host_api::{CallContext, EmittedEvent, EventType};
pub use plugin::{
    CallError, CallErrorKind, DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT, LoadError, Metadata,
    PathGrant, Plugin, PluginSettings, SetOutput, Ungranted, sha256_hex,
};

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use host_api::CallState;

/// How often the epoch ticker advances the engine's epoch. A plugin's CPU
/// deadline is counted in these ticks, so it is also the deadline's precision.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Errors from building the runtime itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The wasmtime engine could not be configured.
    #[error("cannot configure the wasmtime engine")]
    Engine(#[source] wasmtime::Error),
    /// The host functions could not be added to the linker.
    #[error("cannot link the host interface")]
    Linker(#[source] wasmtime::Error),
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
    engine: Engine,
    linker: Linker<CallState>,
    cache: Option<PrecompileCache>,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Builds the engine. `cache_dir` is a directory the host owns and plugins
    /// cannot write; `None` disables the precompile cache.
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self> {
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .cranelift_opt_level(OptLevel::Speed)
            .wasm_component_model(true)
            // A deep recursion must trap in the guest, not overflow the host.
            .max_wasm_stack(1 << 20);
        // The pooling allocator reuses linear memories and instance slots
        // between calls instead of mapping and unmapping fresh memory for
        // every call, which is most of a call's fixed cost. It needs address
        // space up front; where that cannot be had, fall back to on-demand.
        let mut pooled = config.clone();
        pooled.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling_config()));
        let engine = match Engine::new(&pooled) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("pooling allocator unavailable, using on-demand allocation: {e:#}");
                Engine::new(&config).map_err(Error::Engine)?
            }
        };

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(Error::Linker)?;
        host_api::add_to_linker(&mut linker).map_err(Error::Linker)?;

        let cache = cache_dir
            .map(|path| PrecompileCache::open(path, &engine))
            .transpose()?;

        let stop_ticker = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(engine.weak(), stop_ticker.clone());

        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                linker,
                cache,
                stop_ticker,
            }),
        })
    }

    /// The shared engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub(crate) fn linker(&self) -> &Linker<CallState> {
        &self.inner.linker
    }

    /// The precompile cache, when enabled.
    pub fn cache(&self) -> Option<&PrecompileCache> {
        self.inner.cache.as_ref()
    }
}

/// Slots for concurrent calls: a pass runs its setters one at a time, and
/// loads run beside it, so a few dozen are plenty even for many nodes.
const POOL_SLOTS: u32 = 64;

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
        // Keep the first MiB of each memory resident between calls.
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(64 << 10);
    p
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a plain thread (so it
/// runs with or without a tokio runtime) until the runtime is dropped.
fn spawn_epoch_ticker(engine: wasmtime::EngineWeak, stop: Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("nodestatus-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .expect("spawning the epoch ticker thread");
}
