//! Two compilers behind one plugin: Winch first, Cranelift behind it.
//!
//! Cranelift makes fast code slowly: CPython or SpiderMonkey take seconds
//! to compile, a minute on a loaded node. Winch, wasmtime's baseline
//! compiler, makes slower code in one pass, in a fraction of that time. With
//! [`Tiers::Tiered`] (the engine's default), a component with no cached
//! compile is compiled by Winch and runs at once; Cranelift compiles it in
//! the background (a [`TierUp`](crate::TierUp): on a thread of its own, or
//! when the caller chooses, in one of the runtime's compile slots, under
//! the same bounds) and its code replaces Winch's between two calls, and goes to the
//! precompile cache, so the next start loads Cranelift code from the cache
//! and Winch is not used. A component Winch cannot compile (a wasm feature
//! it lacks) is compiled by Cranelift at once, as with
//! [`Tiers::Cranelift`]. A failed Cranelift compile behind a plugin that
//! runs on Winch leaves it on Winch, with a warning, and is remembered with
//! the compile refusals (`refused`), so the next start does not try again.
//!
//! Each tier has an engine of its own (a compile strategy is an engine's
//! setting): code of one cannot run in the other's stores. Winch's is built
//! at the first compile that needs it, so a start that finds every plugin
//! in the cache holds none of it. A plugin's calls
//! take the code in force at the call's start, so a call never sees the
//! switch; an instance kept for the next call (`reuseInstance`) belongs to
//! one engine and is dropped when the code changes.

use wasmtime::component::Linker;
use wasmtime::{Config, Engine, OptLevel, Strategy};

use crate::host_api::{self, CallState};

/// Which compilers load plugins (the `compiler` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tiers {
    /// Winch first, Cranelift in the background; Cranelift's code cached.
    Tiered,
    /// Cranelift only: a load waits for it (the library's default).
    #[default]
    Cranelift,
    /// Winch only, cached: the least compile time and memory, slower calls.
    Winch,
}

impl Tiers {
    /// Every choice, as the config writes it.
    pub const NAMES: [&str; 3] = ["tiered", "cranelift", "winch"];

    /// The choice named `name` (one of [`Tiers::NAMES`]).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "tiered" => Some(Self::Tiered),
            "cranelift" => Some(Self::Cranelift),
            "winch" => Some(Self::Winch),
            _ => None,
        }
    }

    /// The name the config writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tiered => "tiered",
            Self::Cranelift => "cranelift",
            Self::Winch => "winch",
        }
    }

    /// The tier whose code is kept: in the precompile cache, and for good.
    pub fn last(self) -> Tier {
        match self {
            Self::Tiered | Self::Cranelift => Tier::Optimized,
            Self::Winch => Tier::Baseline,
        }
    }
}

impl std::fmt::Display for Tiers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The compiler of a plugin's code in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Winch.
    Baseline,
    /// Cranelift, optimizing for speed.
    Optimized,
}

impl Tier {
    /// The compiler's name (`winch`, `cranelift`), as `/status` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Baseline => "winch",
            Self::Optimized => "cranelift",
        }
    }

    /// Its argument to the compiler child (`compile-component <arg>`).
    pub(crate) fn from_arg(arg: Option<&str>) -> Option<Self> {
        match arg {
            None | Some("cranelift") => Some(Self::Optimized),
            Some("winch") => Some(Self::Baseline),
            Some(_) => None,
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The code-generation settings of `tier`, shared by the runtime's engine
/// and the compiler child's (code compiled by one is loaded by the other,
/// so they must agree).
pub(crate) fn engine_config(tier: Tier) -> Config {
    let mut config = Config::new();
    config
        .epoch_interruption(true)
        .wasm_component_model(true)
        // A deep recursion must trap in the guest, not overflow the host.
        .max_wasm_stack(1 << 20);
    // For profiles: `NODESTATUS_PERFMAP=1` has wasmtime write the plugins'
    // function names to /tmp/perf-<pid>.map, which `perf report` reads.
    if std::env::var_os("NODESTATUS_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    match tier {
        Tier::Optimized => {
            config
                .strategy(Strategy::Cranelift)
                .cranelift_opt_level(OptLevel::Speed);
        }
        Tier::Baseline => {
            config.strategy(Strategy::Winch);
        }
    }
    config
}

/// An engine that only compiles `tier`'s code (in the compiler child): the
/// runtime's settings with on-demand allocation, which reserves no address
/// space.
pub(crate) fn compile_engine(tier: Tier) -> wasmtime::Result<Engine> {
    Engine::new(&engine_config(tier))
}

/// One tier's engine, and its linker with the host interface and WASI.
pub(crate) struct TierEngine {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
}

impl TierEngine {
    /// `engine`, with a linker of its own.
    pub(crate) fn new(engine: Engine) -> crate::Result<Self> {
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(crate::Error::Linker)?;
        host_api::add_to_linker(&mut linker).map_err(crate::Error::Linker)?;
        Ok(Self { engine, linker })
    }
}
