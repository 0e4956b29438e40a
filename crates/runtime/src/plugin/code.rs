//! A plugin's code: taken from the precompile cache or compiled by the
//! runtime's tiers ([`crate::tier`]), linked, and replaced by Cranelift's
//! when a plugin started on Winch's.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use wasmtime::Engine;
use wasmtime::component::{Component, ComponentExportIndex, InstancePre};

use super::{Interface, LoadError};
use crate::host_api::CallState;
use crate::{Compiler, Runtime, Tier, Tiers, error_chain};

/// Linked code of one tier: what a call instantiates.
pub(super) struct Code {
    pub(super) tier: Tier,
    /// The engine of its stores.
    pub(super) engine: Engine,
    pub(super) pre: InstancePre<CallState>,
    /// The version of `setter` the component exports.
    pub(super) interface: Interface,
    pub(super) metadata_index: ComponentExportIndex,
    pub(super) set_index: ComponentExportIndex,
    /// `subscribe` and `on-lines` of its `reactor` export (0.2.1), when it
    /// has one.
    pub(super) reactor: Option<ReactorIndex>,
}

/// The functions of a `reactor` export.
#[derive(Clone, Copy)]
pub(super) struct ReactorIndex {
    pub(super) subscribe: ComponentExportIndex,
    pub(super) on_lines: ComponentExportIndex,
}

/// A plugin's code in force: a call takes it at its start.
pub(super) type CodeCell = Mutex<Arc<Code>>;

impl Code {
    /// Links `component`, compiled by `tier`, against the host and checks
    /// its world.
    pub(super) fn link(
        runtime: &Runtime,
        tier: Tier,
        component: &Component,
    ) -> Result<Self, LoadError> {
        let pre = runtime
            .linker(tier)
            .instantiate_pre(component)
            .map_err(LoadError::Link)?;
        let (interface, setter) = Interface::ALL
            .iter()
            .find_map(|i| Some((*i, component.get_export_index(None, i.export())?)))
            .ok_or_else(|| {
                LoadError::WrongWorld(wasmtime::Error::msg(
                    "it exports no `nodestatus:plugin/setter` of a version this host serves",
                ))
            })?;
        let function = |export: &ComponentExportIndex, name: &str, of: &str| {
            component
                .get_export_index(Some(export), name)
                .ok_or_else(|| {
                    LoadError::WrongWorld(wasmtime::Error::msg(format!(
                        "no `{name}` in its export {of}"
                    )))
                })
        };
        let reactor = match component.get_export_index(None, super::REACTOR_EXPORT) {
            Some(r) if interface == Interface::V0_2 => Some(ReactorIndex {
                subscribe: function(&r, "subscribe", super::REACTOR_EXPORT)?,
                on_lines: function(&r, "on-lines", super::REACTOR_EXPORT)?,
            }),
            Some(_) => {
                return Err(LoadError::WrongWorld(wasmtime::Error::msg(format!(
                    "it exports {} beside a 0.1 setter: a reacting plugin exports setter@0.2.1",
                    super::REACTOR_EXPORT
                ))));
            }
            None => None,
        };
        Ok(Self {
            tier,
            engine: runtime.tier(tier).engine.clone(),
            pre,
            interface,
            metadata_index: function(&setter, "metadata", interface.export())?,
            set_index: function(&setter, "set", interface.export())?,
            reactor,
        })
    }
}

/// A component ready to link.
pub(super) struct Compiled {
    pub(super) component: Component,
    pub(super) tier: Tier,
    /// Whether it was compiled now (else taken from the cache).
    pub(super) compiled: bool,
    /// Whether Cranelift is to replace it ([`TierUp`]): Winch's code of a
    /// file whose Cranelift compile was not refused before.
    pub(super) tier_up: bool,
}

/// The compile limits now (`None`: in-process).
fn limits(runtime: &Runtime) -> Option<crate::CompileLimits> {
    match runtime.compiler() {
        Compiler::Process { limits, .. } => Some(*limits),
        Compiler::InProcess => None,
    }
}

/// The memo's key of a Cranelift compile refused behind Winch's code: the
/// file runs on Winch, and the next start does not try Cranelift again.
fn tier_up_key(sha256: &str) -> String {
    format!("{sha256}+tier-up")
}

/// The component of `bytes`: from the precompile cache when it holds it;
/// else refused at once when this file was refused before
/// ([`LoadError::RefusedBefore`]) or fails the check before the compile
/// ([`precheck`](crate::precheck)); else compiled (one of the runtime's
/// compile slots at a time), and a refusal remembered. With
/// [`Tiers::Tiered`], Winch compiles it (Cranelift when Winch cannot), and
/// the caller starts a [`TierUp`] (unless the runtime does not tier up:
/// [`RuntimeOptions::tier_up`](crate::RuntimeOptions::tier_up)).
pub(super) fn compile(
    runtime: &Runtime,
    sha256: &str,
    bytes: &[u8],
) -> Result<Compiled, LoadError> {
    let last = runtime.tiers().last();
    if let Some(component) = runtime
        .cache()
        .and_then(|c| c.load(&runtime.tier(last).engine, sha256))
    {
        return Ok(Compiled {
            component,
            tier: last,
            compiled: false,
            tier_up: false,
        });
    }
    let limits = limits(runtime);
    let stats = runtime.load_stats();
    if let Some(error) = runtime.refused().get(sha256, limits) {
        stats.remembered.fetch_add(1, Ordering::Relaxed);
        return Err(LoadError::RefusedBefore {
            sha256: sha256.to_owned(),
            error,
        });
    }
    if let Err(e) = crate::precheck::check(bytes) {
        stats.prechecked.fetch_add(1, Ordering::Relaxed);
        return Err(e);
    }
    if runtime.tiers() == Tiers::Tiered && runtime.baseline().is_some() {
        match compile_tier(runtime, Tier::Baseline, bytes, None, false) {
            Ok(component) => {
                let tier_up = runtime.tiers_up()
                    && {
                        let refused = runtime.refused().get(&tier_up_key(sha256), limits);
                        if let Some(why) = &refused {
                            tracing::info!(
                                sha256,
                                "runs on Winch's code: Cranelift refused it before ({why}); not compiled by Cranelift again until the file changes or the compile limits grow"
                            );
                        }
                        refused.is_none()
                    };
                return Ok(Compiled {
                    component,
                    tier: Tier::Baseline,
                    compiled: true,
                    tier_up,
                });
            }
            Err(e) => tracing::info!(
                sha256,
                "Winch cannot compile it ({}); compiling it with Cranelift",
                error_chain(&e)
            ),
        }
    }
    let component = compile_tier(runtime, last, bytes, Some(sha256), false)
        .inspect_err(|e| runtime.refused().remember(sha256, e, limits))?;
    Ok(Compiled {
        component,
        tier: last,
        compiled: true,
        tier_up: false,
    })
}

/// Compiles `bytes` with `tier`'s compiler, in one of the runtime's compile
/// slots (the one of compiles `behind_winch`, else a load's), in this
/// thread or in the compiler child ([`Compiler`]); the code goes to the
/// precompile cache under `cache_as` (the component's sha256) when that is
/// given.
fn compile_tier(
    runtime: &Runtime,
    tier: Tier,
    bytes: &[u8],
    cache_as: Option<&str>,
    behind_winch: bool,
) -> Result<Component, LoadError> {
    let engine = &runtime.tier(tier).engine;
    let cache = cache_as.and_then(|sha| Some((runtime.cache()?, sha)));
    let _slot = runtime.compile_slot(behind_winch);
    runtime
        .load_stats()
        .compiles
        .fetch_add(1, Ordering::Relaxed);
    match runtime.compiler() {
        Compiler::InProcess => {
            let component = Component::new(engine, bytes).map_err(LoadError::Compile)?;
            if let Some((cache, sha)) = cache {
                match component.serialize() {
                    Ok(code) => {
                        cache.store(sha, &code);
                        drop(code);
                        // Run the cached code, mapped, and drop this copy.
                        if let Some(mapped) = cache.load_stored(engine, sha) {
                            return Ok(mapped);
                        }
                    }
                    Err(e) => tracing::warn!("cannot serialize compiled code for the cache: {e:#}"),
                }
            }
            Ok(component)
        }
        Compiler::Process { exe, limits } => {
            let code = crate::compile::compile_in_child(exe, *limits, tier, bytes).map_err(
                |err| match err {
                    crate::compile::Error::Invalid(message) => {
                        LoadError::Compile(wasmtime::Error::msg(message))
                    }
                    other => LoadError::CompileBound(other),
                },
            )?;
            if let Some((cache, sha)) = cache {
                cache.store(sha, &code);
                // The code runs mapped from the entry just written, as it
                // does after a restart, not from a copy of `code`
                // (`cache`'s docs, "Mapped, not copied").
                if let Some(mapped) = cache.load_stored(engine, sha) {
                    return Ok(mapped);
                }
            }
            // SAFETY: `code` was produced just now by this tier's engine
            // configuration, by the engine's own binary in a child process
            // (see `compile`), which is trusted as the precompile cache is.
            unsafe { Component::deserialize(engine, &code) }.map_err(LoadError::Compile)
        }
    }
}

/// Gives the pages that the allocator holds free back to the system. A
/// start that compiled its plugins frees what it loaded them with (the
/// compiled artifacts, Winch's code and its kept instances) on many threads
/// at once; without this, about 4 MB of it stayed resident
/// (`tiers::after_a_cold_start_on_winch_the_engine_holds_what_a_warm_start_holds`).
/// Called after each tier-up, and when a kept instance on Winch's code is
/// dropped at the first call after it.
pub(super) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system, under the
    // allocator's locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Cranelift's compile of a plugin that runs on Winch's code, to replace
/// it: what [`Plugin::load_bytes`](super::Plugin::load_bytes) starts on a
/// thread of its own, and what
/// [`Plugin::load_deferring_tier_up`](super::Plugin::load_deferring_tier_up)
/// hands its caller to run when it chooses (the plugin directory runs them
/// one at a time, once no load is under way). A plugin dropped meanwhile
/// (its file changed or went away) gets nothing; a compile that fails
/// leaves Winch's code in force, with a warning, and is remembered as the
/// compile's refusals are, so that the next start runs Winch's code
/// without trying again.
pub struct TierUp {
    runtime: Runtime,
    name: Arc<str>,
    sha256: String,
    bytes: Vec<u8>,
    cell: Weak<CodeCell>,
}

impl std::fmt::Debug for TierUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TierUp")
            .field("name", &self.name)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

impl TierUp {
    pub(super) fn new(
        runtime: &Runtime,
        name: Arc<str>,
        sha256: String,
        bytes: Vec<u8>,
        cell: Weak<CodeCell>,
    ) -> Self {
        Self {
            runtime: runtime.clone(),
            name,
            sha256,
            bytes,
            cell,
        }
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compiles the component with Cranelift (in the runtime's tier-up
    /// compile slot, under its compile bounds) and puts the code in force
    /// in place of Winch's, from the plugin's next call. Blocks for as
    /// long as the compile takes. `Ok(false)`: the plugin was dropped
    /// before the code was ready, and nothing changed.
    pub fn run(self) -> Result<bool, LoadError> {
        let Self {
            runtime,
            name,
            sha256,
            bytes,
            cell,
        } = self;
        if cell.strong_count() == 0 {
            return Ok(false);
        }
        let started = Instant::now();
        let result = compile_tier(&runtime, Tier::Optimized, &bytes, Some(&sha256), true)
            .and_then(|c| Code::link(&runtime, Tier::Optimized, &c));
        match result {
            Ok(code) => {
                let Some(cell) = cell.upgrade() else {
                    return Ok(false);
                };
                let winchs = {
                    let mut current = cell.lock().expect("code lock");
                    // Counted under the lock: whoever sees Cranelift's
                    // code (`Plugin::tier`) sees the count.
                    runtime
                        .load_stats()
                        .tiered_up
                        .fetch_add(1, Ordering::Relaxed);
                    std::mem::replace(&mut *current, Arc::new(code))
                };
                drop(winchs);
                release_freed_memory();
                tracing::info!(
                    plugin = %name,
                    took = ?started.elapsed(),
                    "runs Cranelift's code from its next call (Winch's until now)"
                );
                Ok(true)
            }
            Err(e) => {
                runtime
                    .refused()
                    .remember(&tier_up_key(&sha256), &e, limits(&runtime));
                tracing::warn!(
                    plugin = %name,
                    "keeps running Winch's code: Cranelift could not compile it: {}",
                    error_chain(&e)
                );
                Err(e)
            }
        }
    }

    /// [`TierUp::run`] on a thread of its own.
    pub fn spawn(self) {
        let spawned = std::thread::Builder::new()
            .name("nodestatus-tier-up".into())
            .spawn(move || {
                let _ = self.run();
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start a Cranelift compile; the plugin keeps Winch's code: {e}");
        }
    }
}
