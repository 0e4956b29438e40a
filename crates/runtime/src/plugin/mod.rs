//! One loaded plugin: a compiled, type-checked component with its metadata and
//! the grants the operator gave it, ready to be instantiated for each call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{ComponentExportIndex, Instance, InstancePre};
use wasmtime::{Engine, Store};

use super::call_thread::{self, Stuck};
/// What `metadata` returns, in every version of `setter`.
use super::host_api::bindings::exports::nodestatus::plugin0_2_1::setter::PluginInfo;
use super::host_api::{CallState, Denied, Grants, Preopens, STDERR_CAPACITY};
use super::limits::Exceeded;
use super::reactor::{Batch, Subscriptions};
use super::{CallContext, DEADLINE_GRACE, EPOCH_TICK, EmittedEvent, Runtime, Tier};

/// Default CPU deadline of one call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// Default memory cap of one call.
pub const DEFAULT_MEMORY_LIMIT: usize = 64 << 20;
/// Largest plugin file accepted (the biggest real guest, CPython by
/// componentize-py, is about 18 MB). The file is never read past it, and
/// nothing is compiled above it. (A file within it can still be a compile
/// bomb: see [`super::compile`] for what bounds compilation.)
pub const MAX_PLUGIN_BYTES: usize = 64 << 20;
/// Largest `set` output accepted, checked before it is parsed (its copy out
/// of the guest is bounded by the guest's memory cap): the bound of a node
/// ([`nodestatus_apimachinery::MAX_NODE_BYTES`]), since the output is one.
pub const MAX_OUTPUT_BYTES: usize = nodestatus_apimachinery::MAX_NODE_BYTES;
/// Longest setter error message kept, in bytes.
const MAX_ERROR_MESSAGE: usize = 4096;
/// The interface a plugin of the current WIT exports: its `set` returns
/// the plugin's part of the node.
pub const SETTER_EXPORT_0_2: &str = "nodestatus:plugin/setter@0.2.0";
/// The interface of the first WIT, still served: its `set` returns the whole
/// node (a `0.1.0` export links too).
pub const SETTER_EXPORT_0_1: &str = "nodestatus:plugin/setter@0.1.1";
/// The export of a reacting plugin (0.2.1), beside its 0.2 `setter`.
pub const REACTOR_EXPORT: &str = "nodestatus:plugin/reactor@0.2.1";

/// A version of the `setter` interface that this host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Interface {
    /// `nodestatus:plugin@0.1.x`: `set` returns the whole node.
    #[serde(rename = "0.1")]
    V0_1,
    /// `nodestatus:plugin@0.2.x`: `set` returns the plugin's part.
    #[serde(rename = "0.2")]
    V0_2,
}

impl Interface {
    /// Every version served, newest first.
    pub const ALL: &[Interface] = &[Interface::V0_2, Interface::V0_1];

    /// The name of its `setter` export.
    pub fn export(self) -> &'static str {
        match self {
            Self::V0_1 => SETTER_EXPORT_0_1,
            Self::V0_2 => SETTER_EXPORT_0_2,
        }
    }

    /// Its world, as a published plugin's manifest names it.
    pub fn world(self) -> &'static str {
        match self {
            Self::V0_1 => "nodestatus:plugin/plugin@0.1.1",
            Self::V0_2 => "nodestatus:plugin/plugin@0.2.1",
        }
    }
}

impl std::fmt::Display for Interface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::V0_1 => "0.1",
            Self::V0_2 => "0.2",
        })
    }
}

mod code;
mod errors;
mod grants;
mod settings;
#[cfg(test)]
mod tests;

pub use code::TierUp;
use code::{Code, CodeCell};
pub use errors::*;
use grants::*;
pub use settings::*;

/// What a successful `set` returned, not yet checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetResult {
    /// A 0.1 plugin's whole node, as JSON.
    Node(String),
    /// A 0.2 plugin's part of the node, as JSON; `None`: the node already
    /// holds its part.
    Part(Option<String>),
}

/// The result of a successful `set`.
#[derive(Debug)]
pub struct SetOutput {
    /// What the plugin returned (not yet checked).
    pub result: SetResult,
    /// Events it recorded.
    pub events: Vec<EmittedEvent>,
    /// What it read ([`crate::trace`]): a caller may stand this result for
    /// the next call whose inputs [`Plugin::inputs_changed`] finds the same.
    pub trace: crate::Trace,
}

/// A loaded plugin. Immutable; a new version is a new `Plugin`.
pub struct Plugin {
    metadata: Metadata,
    sha256: String,
    source: PathBuf,
    settings: PluginSettings,
    grants: Arc<Grants>,
    name: Arc<str>,
    /// The code in force: Winch's, until Cranelift's replaces it
    /// ([`crate::Tiers::Tiered`]).
    code: Arc<CodeCell>,
    withheld: Vec<Withheld>,
    /// Set while a call abandoned at its deadline is still blocked.
    stuck: Stuck,
    /// The instance kept for the next call, when the plugin reuses it.
    warm: Mutex<Option<Warm>>,
    /// Whether this load compiled the component (no precompile cache
    /// entry).
    compiled: bool,
    /// What it follows, when it reacts (WIT 0.2.1's `reactor`).
    subscriptions: Option<Arc<Subscriptions>>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.metadata.name)
            .field("version", &self.metadata.version)
            .field("sha256", &self.sha256)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// The sha256 of `bytes`, in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The name a plugin file gives its plugin: the file's stem, with `_` read
/// as `-` (cargo writes crate `gpu-reporter` as `gpu_reporter.wasm`).
pub fn name_of_file(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    Some(stem.replace('_', "-"))
}

/// Reads a plugin file safely: opened without blocking (a FIFO swapped in
/// cannot hang the reader), required to be a regular file, and never read
/// past [`MAX_PLUGIN_BYTES`], whatever its size says.
pub fn read_plugin_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    use crate::files::Error as F;
    crate::files::read_regular(path, MAX_PLUGIN_BYTES as u64).map_err(|e| match e {
        F::Io(source) => LoadError::Read {
            path: path.to_owned(),
            source,
        },
        F::NotRegular { kind } => LoadError::NotRegular {
            path: path.to_owned(),
            kind,
        },
        F::TooLarge { size, .. } => LoadError::TooLarge { size },
    })
}

fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.is_empty() {
        return Err(LoadError::Empty);
    }
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm);
    }
    // Core modules have layer 0 (version 1); components have layer 1.
    if bytes[6..8] == [0, 0] {
        return Err(LoadError::CoreModule);
    }
    Ok(())
}

impl Plugin {
    /// Reads ([`read_plugin_file`]), compiles (or takes from the cache),
    /// type-checks and describes the plugin at `path`, then applies the
    /// settings `settings_for` returns for its name, which is the file's
    /// ([`name_of_file`]).
    pub fn load_file(
        runtime: &Runtime,
        path: &Path,
        settings_for: &dyn Fn(&str) -> PluginSettings,
    ) -> Result<Self, LoadError> {
        let bytes = read_plugin_file(path)?;
        Self::load_bytes(runtime, path, &bytes, settings_for)
    }

    /// Like [`Plugin::load_file`], from bytes already read from `source`,
    /// whose file name is the plugin's identity: the plugin must declare
    /// that name ([`LoadError::NameMismatch`] otherwise). A plugin that
    /// starts on Winch's code gets Cranelift's from a thread of its own
    /// ([`TierUp::spawn`]).
    pub fn load_bytes(
        runtime: &Runtime,
        source: &Path,
        bytes: &[u8],
        settings_for: &dyn Fn(&str) -> PluginSettings,
    ) -> Result<Self, LoadError> {
        let (plugin, tier_up) = Self::load_deferring_tier_up(runtime, source, bytes, settings_for)?;
        if let Some(t) = tier_up {
            t.spawn();
        }
        Ok(plugin)
    }

    /// Like [`Plugin::load_bytes`], with the Cranelift compile that is to
    /// replace Winch's code, if any, handed back to run when the caller
    /// chooses ([`TierUp::run`]) instead of started at once.
    pub fn load_deferring_tier_up(
        runtime: &Runtime,
        source: &Path,
        bytes: &[u8],
        settings_for: &dyn Fn(&str) -> PluginSettings,
    ) -> Result<(Self, Option<TierUp>), LoadError> {
        check_header(bytes)?;
        if bytes.len() > MAX_PLUGIN_BYTES {
            return Err(LoadError::TooLarge {
                size: bytes.len() as u64,
            });
        }
        let sha256 = sha256_hex(bytes);
        let compiled = code::compile(runtime, &sha256, bytes)?;
        let code = Code::link(runtime, compiled.tier, &compiled.component)?;

        // The file names the plugin, so the operator's settings for that name
        // (its deadline and memory cap included) already apply to `metadata`.
        let file_name = name_of_file(source).unwrap_or_default();
        let settings = settings_for(&file_name);
        let name: Arc<str> = Arc::from(file_name.as_str());
        let raw = call_metadata(runtime, &code, name, &settings)?;
        let metadata = validate_metadata(raw)?;
        if metadata.name != file_name {
            return Err(LoadError::NameMismatch {
                file: source.to_owned(),
                declared: metadata.name,
            });
        }
        if let Some(expected) = &settings.sha256
            && !expected.eq_ignore_ascii_case(&sha256)
        {
            return Err(LoadError::Sha256Mismatch {
                name: metadata.name,
                expected: expected.clone(),
                actual: sha256,
            });
        }
        let (grants, mut withheld) = resolve_grants(&metadata, &settings)?;
        withheld.extend(check_process_grants(&grants)?);
        let subscriptions = match code.reactor {
            Some(index) => {
                let name = Arc::from(metadata.name.as_str());
                let raw = call_subscribe(runtime, &code, index, name, &grants, &settings)?;
                let (subs, refused) = crate::reactor::check(raw, &settings.streams, &grants.paths)
                    .map_err(LoadError::Subscriptions)?;
                if !refused.is_empty() && settings.on_ungranted == Ungranted::Refuse {
                    return Err(LoadError::Ungranted {
                        name: metadata.name,
                        withheld: refused.into_iter().map(Withheld::Stream).collect(),
                    });
                }
                withheld.extend(refused.into_iter().map(Withheld::Stream));
                // A setter whose `reactor` follows nothing (every Rust
                // setter exports one) is a plain setter.
                (!subs.streams.is_empty() || !subs.watch.is_empty()).then(|| Arc::new(subs))
            }
            None => None,
        };
        // Check now that every granted path can be preopened, so a bad grant
        // fails the load with a clear error instead of every call. A granted
        // path that does not exist yet (a driver's /proc directory before the
        // driver loads) is not an error: each call preopens what exists then,
        // so the plugin sees it as soon as it appears, with no reload.
        for g in &grants.paths {
            if !crate::facts::path_exists(&g.from) {
                // Not a mistake: a directory that an exporter or a driver
                // creates later (the default config grants images
                // /var/lib/nodestatus before anything writes there).
                tracing::info!(
                    plugin = %metadata.name,
                    path = %g.from.display(),
                    "granted path does not exist (yet); the plugin sees it once it does"
                );
                continue;
            }
            wasmtime_wasi::WasiCtx::builder()
                .preopened_dir(&g.from, "/", wasmtime_wasi::FsPerms::ReadOnly)
                .map_err(|source| LoadError::Grant {
                    path: g.from.clone(),
                    source,
                })?;
        }
        let code = Arc::new(Mutex::new(Arc::new(code)));
        let tier_up = compiled.tier_up.then(|| {
            TierUp::new(
                runtime,
                Arc::from(metadata.name.as_str()),
                sha256.clone(),
                bytes.to_vec(),
                Arc::downgrade(&code),
            )
        });
        let plugin = Self {
            name: Arc::from(metadata.name.as_str()),
            metadata,
            sha256,
            source: source.to_owned(),
            settings,
            grants: Arc::new(grants),
            code,
            withheld,
            stuck: Stuck::default(),
            warm: Mutex::new(None),
            compiled: compiled.compiled,
            subscriptions,
        };
        Ok((plugin, tier_up))
    }

    /// The version of the `setter` interface it exports.
    pub fn interface(&self) -> Interface {
        self.code().interface
    }

    /// The compiler of the code in force (Winch's is replaced by
    /// Cranelift's once that is ready, with [`crate::Tiers::Tiered`]).
    pub fn tier(&self) -> Tier {
        self.code().tier
    }

    fn code(&self) -> Arc<Code> {
        self.code.lock().expect("code lock").clone()
    }

    /// Whether loading it compiled the component (it was not in the
    /// precompile cache): what a load waited for.
    pub fn compiled(&self) -> bool {
        self.compiled
    }

    /// The plugin's validated metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The sha256 of the component file.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The file it was loaded from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The operator's settings for it.
    pub fn settings(&self) -> &PluginSettings {
        &self.settings
    }

    /// What it asked for and was not granted, for the log and `/status`.
    pub fn withheld(&self) -> &[Withheld] {
        &self.withheld
    }

    /// Directories it can read.
    pub fn granted_paths(&self) -> &[PathGrant] {
        &self.grants.paths
    }

    /// What it follows, when it is a reacting plugin (WIT 0.2.1): its
    /// granted streams and watched paths.
    pub fn subscriptions(&self) -> Option<&Arc<Subscriptions>> {
        self.subscriptions.as_ref()
    }

    /// Calls `on-lines` with `batch`, in a sandbox as [`Plugin::call_set`]'s
    /// (the same deadline, memory cap, grants and kept instance): its
    /// result is the plugin's part, as `set`'s. A plugin that does not
    /// react is called through `set` instead.
    pub fn call_lines(
        &self,
        runtime: &Runtime,
        node_json: &str,
        batch: &Batch,
        ctx: CallContext,
    ) -> Result<SetOutput, CallError> {
        match self.code().reactor {
            Some(_) => self.call(runtime, node_json, ctx, Export::Lines(batch.to_wit())),
            None => self.call_set(runtime, node_json, ctx),
        }
    }

    /// Calls `set` in a fresh sandbox. Never panics on guest misbehaviour; a
    /// trap, timeout or memory overflow comes back as a [`CallError`].
    ///
    /// The whole call, instantiation included, runs under the plugin's
    /// deadline, also while the guest is blocked in a host call or in the
    /// kernel (see the [crate docs](crate)). An output above
    /// [`MAX_OUTPUT_BYTES`] is refused before it is parsed.
    ///
    /// With [`PluginSettings::reuse_instance`], the store and instance of a
    /// call that returned (`Ok` or the setter's own `Err`) are kept and serve
    /// the next call whose sandbox holds the same directories, with that
    /// call's facts and a fresh deadline; any other outcome drops them.
    pub fn call_set(
        &self,
        runtime: &Runtime,
        node_json: &str,
        ctx: CallContext,
    ) -> Result<SetOutput, CallError> {
        self.call(runtime, node_json, ctx, Export::Set)
    }

    /// Calls `what` (`set`, or `on-lines`) over `node_json`: see
    /// [`Plugin::call_set`].
    fn call(
        &self,
        runtime: &Runtime,
        node_json: &str,
        ctx: CallContext,
        what: Export,
    ) -> Result<SetOutput, CallError> {
        let started = Instant::now();
        let timeout = self.settings.timeout;
        if let Some(since) = self.stuck.since() {
            return Err(CallError::new(
                CallErrorKind::Timeout,
                format!(
                    "not called: its call abandoned {:?} ago is still blocked in the kernel; it is called again once that call returns",
                    since.elapsed()
                ),
            ));
        }
        let code = self.code();
        let (store, instance) = self.store_for(runtime, &code, ctx)?;
        let call = SetCall {
            pre: code.pre.clone(),
            interface: code.interface,
            index: match &what {
                Export::Set => code.set_index,
                Export::Lines(_) => code.reactor.expect("a reacting plugin").on_lines,
            },
            what,
            name: self.name.clone(),
            timeout,
        };
        let Ran {
            mut store,
            instance,
            result,
        } = if store.data().may_block() {
            let json = node_json.to_owned();
            // A guest that the epoch stopped at its deadline (or whose WASI
            // wait met with_deadline's limit) returns within the grace, even
            // on a loaded machine; one still out after it is blocked in the
            // kernel.
            call_thread::run(timeout + DEADLINE_GRACE, &self.stuck, move || {
                call.run(store, instance, &json)
            })
            .ok_or_else(|| {
                CallError::new(
                    CallErrorKind::Timeout,
                    format!(
                        "stopped at its deadline of {timeout:?}: `set` was blocked in the kernel (a file that never answers inside a granted directory, such as a FIFO with no writer or a hung mount) when the deadline passed; its thread is left to the kernel and the plugin is not called again until it returns; {}",
                        timeout_advice(&self.name, timeout)
                    ),
                )
            })?
        } else {
            call.run(store, instance, node_json)
        };
        log_stderr(&mut store, result.is_err());
        tracing::trace!(plugin = %self.name, elapsed = ?started.elapsed(), "set");
        let events = std::mem::take(&mut store.data_mut().events);
        let mut trace = std::mem::take(&mut store.data_mut().trace);
        if self.settings.reuse_instance && !self.settings.stateless {
            trace.mark(crate::Unrepeatable::KeptInstance);
        }
        let outcome = match result? {
            Ok(result) => Ok(SetOutput {
                result,
                events,
                trace,
            }),
            Err(message) => Err(self.setter_failed(&store.data().denied, message)),
        };
        // A store goes back only after a call that returned: a trap, a
        // timeout or a refused result (the `?` above) drops it, and so does
        // a guest that fills its stderr buffer.
        if self.settings.reuse_instance
            && let Some(instance) = instance
            && store.data().stderr_logged < STDERR_CAPACITY / 2
        {
            store.data_mut().release();
            *self.warm.lock().expect("warm instance lock") = Some(Warm { store, instance });
        }
        outcome
    }

    /// What of `trace` (a call's of this plugin) would read otherwise in
    /// the pass of `ctx`: the first host answer, file or `/proc` copy that
    /// changed, for people; `None` when every one is the same, so that a
    /// call over the same node would return the same result. A trace that
    /// is [`crate::Unrepeatable`] is said changed.
    pub fn inputs_changed(&self, trace: &crate::Trace, ctx: &CallContext) -> Option<String> {
        if let Some(why) = trace.unrepeatable() {
            return Some(format!("unrepeatable: {}", why.as_str()));
        }
        let answers = super::host_api::Answers {
            plugin: &self.name,
            grants: &self.grants,
            ctx,
        };
        trace.first_change(
            |read| answers.print(read),
            |from, i| {
                ctx.facts
                    .proc_file(from, super::proc_view::PROC_FILES[i])
                    .ok()
                    .flatten()
            },
        )
    }

    /// The error of a setter that returned `Err(message)`: of kind
    /// [`CallErrorKind::Ungranted`], with what to grant, when the host refused
    /// it a capability in this call or a grantable capability it asks for is
    /// withheld; else [`CallErrorKind::Plugin`].
    fn setter_failed(&self, denied: &[Denied], message: String) -> CallError {
        let plugin = &self.name;
        let withheld: Vec<Withheld> = self
            .withheld
            .iter()
            .filter(|w| w.grantable())
            .cloned()
            .collect();
        // A refusal inside a path it asks for is said once, by that path.
        let asked = |p: &str| {
            withheld.iter().any(|w| match w {
                Withheld::Path(a) | Withheld::PartOfPath(a) => Path::new(p).starts_with(a),
                _ => false,
            })
        };
        let mut missing: Vec<String> = denied
            .iter()
            .filter(|d| !matches!(d, Denied::Statvfs(p) if asked(p)))
            .map(|d| d.advice(plugin))
            .collect();
        missing.dedup();
        if !withheld.is_empty() {
            missing.push(format!(
                "not granted: {}; see plugins.{plugin}.paths and .env, or the default config",
                list(&withheld)
            ));
        }
        if missing.is_empty() {
            return CallError::new(
                CallErrorKind::Plugin,
                format!("the setter failed: {message}"),
            );
        }
        CallError::new(
            CallErrorKind::Ungranted,
            format!(
                "the setter failed without a capability it was not granted: {message} ({})",
                missing.join("; ")
            ),
        )
    }

    /// A store for one call in the pass of `ctx`, running `code`: the
    /// plugin's warm store (and its instance) when it reuses its instance
    /// and the store can serve this pass with this code, else a fresh one.
    fn store_for(
        &self,
        runtime: &Runtime,
        code: &Code,
        ctx: CallContext,
    ) -> Result<(Store<CallState>, Option<Instance>), CallError> {
        let preopens = Preopens::plan(&self.grants, &ctx).map_err(sandbox_error)?;
        let warm = match self.settings.reuse_instance {
            true => self.warm.lock().expect("warm instance lock").take(),
            false => None,
        };
        if let Some(mut w) = warm {
            let same_code = Engine::same(w.store.engine(), &code.engine);
            if same_code && w.store.data().serves(&preopens) {
                w.store.data_mut().renew(ctx, preopens);
                arm_deadline(&mut w.store, self.settings.timeout);
                return Ok((w.store, Some(w.instance)));
            }
            drop(w);
            if !same_code {
                // Winch's instance, dropped once Cranelift's code is in force.
                code::release_freed_memory();
            }
        }
        let store = new_store(
            runtime,
            &code.engine,
            self.name.clone(),
            self.grants.clone(),
            ctx,
            preopens,
            &self.settings,
        )?;
        Ok((store, None))
    }
}

/// Which function of the plugin a call runs.
enum Export {
    /// `set`.
    Set,
    /// `on-lines`, with this batch.
    Lines(crate::host_api::bindings::exports::nodestatus::plugin0_2_1::reactor::Batch),
}

/// What one `set` (or `on-lines`) call needs of its plugin, owned, so that
/// it can run on a call thread.
struct SetCall {
    pre: InstancePre<CallState>,
    interface: Interface,
    /// The function's index.
    index: ComponentExportIndex,
    what: Export,
    name: Arc<str>,
    timeout: Duration,
}

impl SetCall {
    /// Instantiates (unless `instance` is the store's warm one) and calls
    /// `set` under the deadline; gives the store and the instance back, for
    /// the store's stderr and events and for the next call.
    fn run(self, mut store: Store<CallState>, instance: Option<Instance>, node_json: &str) -> Ran {
        let mut used = instance;
        let what = match self.what {
            Export::Set => "set",
            Export::Lines(_) => "on-lines",
        };
        let result = guest_call(&self.name, self.timeout, what, async {
            let instance = match instance {
                Some(i) => i,
                None => self
                    .pre
                    .instantiate_async(&mut store)
                    .await
                    .map_err(|e| classify(&store, e, "instantiate"))?,
            };
            used = Some(instance);
            let index = self.index;
            let result = match (self.interface, &self.what) {
                (Interface::V0_1, _) => {
                    call_set::<String, _>(&mut store, instance, &index, (node_json,), what)
                        .await?
                        .map(SetResult::Node)
                }
                (Interface::V0_2, Export::Set) => {
                    call_set::<Option<String>, _>(&mut store, instance, &index, (node_json,), what)
                        .await?
                        .map(SetResult::Part)
                }
                (Interface::V0_2, Export::Lines(batch)) => call_set::<Option<String>, _>(
                    &mut store,
                    instance,
                    &index,
                    (node_json, batch),
                    what,
                )
                .await?
                .map(SetResult::Part),
            };
            check_set_result(result)
        });
        Ran {
            store,
            instance: used,
            result,
        }
    }
}

/// Calls `set` or `on-lines` (`what`, at `index` of `instance`) with
/// `args`, whose `ok` is an `R`: each version of `setter` has its own.
async fn call_set<R, A>(
    store: &mut Store<CallState>,
    instance: Instance,
    index: &ComponentExportIndex,
    args: A,
    what: &str,
) -> Result<Result<R, String>, CallError>
where
    R: wasmtime::component::ComponentType + wasmtime::component::Lift + Send + Sync + 'static,
    A: wasmtime::component::ComponentNamedList + wasmtime::component::Lower + Send + Sync,
{
    let set = instance
        .get_typed_func::<A, (Result<R, String>,)>(&mut *store, index)
        .map_err(|e| classify(store, e, "instantiate"))?;
    let (result,) = set
        .call_async(&mut *store, args)
        .await
        .map_err(|e| classify(store, e, what))?;
    Ok(result)
}

/// What a [`SetCall`] gives back.
struct Ran {
    store: Store<CallState>,
    /// The instance it called, if it got one.
    instance: Option<Instance>,
    /// `set`'s answer, or why there was none.
    result: Result<Result<SetResult, String>, CallError>,
}

/// A plugin's instance kept for its next call, with its store.
struct Warm {
    store: Store<CallState>,
    instance: Instance,
}

/// What to change when `plugin` runs past its `timeout`.
fn timeout_advice(plugin: &str, timeout: Duration) -> String {
    format!(
        "the limit is {timeout:?}; if the plugin needs longer, raise plugins.{plugin}.timeout in the config (10ms to 60s)"
    )
}

/// What to change when `plugin` asks for more than its `limit` bytes.
fn memory_advice(plugin: &str, limit: usize) -> String {
    format!(
        "the limit is {limit} bytes; if the plugin needs more, raise plugins.{plugin}.memoryLimit in the config (1Mi to 4Gi)"
    )
}

/// Runs a call into the guest (`call`, `what` for messages) to completion
/// from any caller ([`crate::blocking`], on WASI's tokio), under `timeout`:
/// past it, the call's future is dropped, with the guest's fiber and
/// whatever host call it was blocked in. Every call into a guest goes
/// through here.
fn guest_call<T: Send>(
    plugin: &str,
    timeout: Duration,
    what: &str,
    call: impl Future<Output = Result<T, CallError>> + Send,
) -> Result<T, CallError> {
    // With slack, so that a guest spinning in its own code is stopped by
    // the epoch (the usual case) and this only catches a guest blocked in a
    // host call.
    let bounded = crate::blocking(|| {
        wasmtime_wasi::runtime::in_tokio(async move {
            tokio::time::timeout(timeout + DEADLINE_GRACE, call).await
        })
    });
    match bounded {
        Ok(result) => result,
        Err(_) => Err(CallError::new(
            CallErrorKind::Timeout,
            format!(
                "stopped at its deadline of {timeout:?}: `{what}` was blocked in a host call (a sleep, poll or read) when the deadline passed; {}",
                timeout_advice(plugin, timeout)
            ),
        )),
    }
}

/// Checks `set`'s result before anything parses it: an output over
/// [`MAX_OUTPUT_BYTES`] is refused, an error message is cut. (The copy out of
/// the guest is bounded by the guest's memory cap. Wasmtime runs the guest's
/// post-return, which may free the string, before the call returns, so the
/// string cannot be measured in place and copied later.)
fn check_set_result(
    result: Result<SetResult, String>,
) -> Result<Result<SetResult, String>, CallError> {
    let text = |r: &SetResult| match r {
        SetResult::Node(t) | SetResult::Part(Some(t)) => t.len(),
        SetResult::Part(None) => 0,
    };
    match result {
        Ok(r) if text(&r) > MAX_OUTPUT_BYTES => Err(CallError::new(
            CallErrorKind::OutputTooLarge,
            format!(
                "`set` returned {} bytes, over the {MAX_OUTPUT_BYTES}-byte bound of a node (etcd refuses requests over 1.5 MiB)",
                text(&r)
            ),
        )),
        Ok(r) => Ok(Ok(r)),
        Err(mut message) => {
            let mut cut = message.len().min(MAX_ERROR_MESSAGE);
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            Ok(Err(message))
        }
    }
}

/// A store of `engine` for one call of plugin `name`, under the deadline
/// and memory cap of its `settings`.
fn new_store(
    runtime: &Runtime,
    engine: &Engine,
    name: Arc<str>,
    grants: Arc<Grants>,
    ctx: CallContext,
    preopens: Preopens,
    settings: &PluginSettings,
) -> Result<Store<CallState>, CallError> {
    let output = ctx
        .guest_output
        .clone()
        .unwrap_or_else(|| runtime.guest_output().clone());
    let timeout = settings.timeout;
    let state = CallState::new(
        name,
        grants,
        ctx,
        preopens,
        settings.memory_limit,
        timeout,
        output,
    )
    .map_err(sandbox_error)?;
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    store.epoch_deadline_trap();
    arm_deadline(&mut store, timeout);
    Ok(store)
}

/// The error of a sandbox that could not be built.
fn sandbox_error(e: impl std::fmt::Display) -> CallError {
    CallError::new(
        CallErrorKind::Instantiate,
        format!("cannot build the sandbox: {e:#}"),
    )
}

/// Sets the store's CPU deadline `timeout` from now.
fn arm_deadline(store: &mut Store<CallState>, timeout: Duration) {
    let ticks = timeout.as_millis().div_ceil(EPOCH_TICK.as_millis()).max(1) as u64;
    // One more tick: the current epoch period has already partly run.
    store.set_epoch_deadline(ticks + 1);
}

/// Guest stderr not logged yet, line by line, through the plugin's log
/// budget: at debug level, or at warn after a call that `failed` (a trap's
/// cause is often only there: a Go or Python panic prints its message and
/// stack to stderr before the trap).
fn log_stderr(store: &mut Store<CallState>, failed: bool) {
    let state = store.data_mut();
    let err = state.stderr.contents();
    if err.len() > state.stderr_logged {
        let text = String::from_utf8_lossy(&err[state.stderr_logged..]);
        let level = if failed {
            tracing::Level::WARN
        } else {
            tracing::Level::DEBUG
        };
        for line in text.lines() {
            state.guest_line(level, line, true);
        }
        state.stderr_logged = err.len();
    }
}

/// Classifies a failed call by the error's type and the store's state, never
/// by its text:
/// - the memory budget refused a growth ([`CallLimits::exceeded`]):
///   [`CallErrorKind::Memory`];
/// - a [`wasmtime::Trap`]: the epoch's interrupt is
///   [`CallErrorKind::Timeout`], any other [`CallErrorKind::Trap`]; so is a
///   guest that called WASI's `exit` ([`wasmtime_wasi::I32Exit`]);
/// - anything else while instantiating: [`CallErrorKind::Instantiate`];
/// - anything else once the call runs is the canonical ABI refusing what the
///   guest handed over (wasmtime has no type for these, and the host's own
///   functions never fail): [`CallErrorKind::InvalidResult`].
///
/// [`CallLimits::exceeded`]: super::limits::CallLimits
fn classify(store: &Store<CallState>, err: wasmtime::Error, what: &str) -> CallError {
    let limits = &store.data().limits;
    if let Some(exceeded) = limits.exceeded {
        let (grow, total) = match exceeded {
            Exceeded::Memory { total } => ("a memory", total),
            Exceeded::Table { total } => ("a table", total),
        };
        return CallError::new(
            CallErrorKind::Memory,
            format!(
                "stopped at its memory cap: `{what}` asked to grow {grow}, which would take its memories and tables to {total} bytes, over the {}-byte limit; {}",
                limits.limit,
                memory_advice(&store.data().plugin, limits.limit)
            ),
        );
    }
    if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
        if *trap == wasmtime::Trap::Interrupt {
            return CallError::new(
                CallErrorKind::Timeout,
                format!(
                    "stopped at its CPU deadline: `{what}` ran too long; {}",
                    timeout_advice(&store.data().plugin, store.data().timeout)
                ),
            );
        }
        return CallError::new(CallErrorKind::Trap, format!("`{what}` trapped: {trap}"));
    }
    if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return CallError::new(
            CallErrorKind::Trap,
            format!("`{what}` called exit({}) instead of returning", exit.0),
        );
    }
    let kind = if what == "instantiate" {
        CallErrorKind::Instantiate
    } else {
        CallErrorKind::InvalidResult
    };
    CallError::new(kind, format!("`{what}` failed: {err:#}"))
}

/// What `subscribe` returns, before it is checked.
type RawSubscriptions =
    crate::host_api::bindings::exports::nodestatus::plugin0_2_1::reactor::Subscriptions;

/// Calls a reacting plugin's `subscribe` in a fresh sandbox with its
/// config readable and nothing else granted.
fn call_subscribe(
    runtime: &Runtime,
    code: &Code,
    index: code::ReactorIndex,
    name: Arc<str>,
    grants: &Grants,
    settings: &PluginSettings,
) -> Result<RawSubscriptions, LoadError> {
    let config_only = Grants {
        config: grants.config.clone(),
        ..Grants::default()
    };
    let mut store = new_store(
        runtime,
        &code.engine,
        name.clone(),
        Arc::new(config_only),
        CallContext::default(),
        Preopens::default(),
        settings,
    )
    .map_err(LoadError::Subscribe)?;
    let result = guest_call(&name, settings.timeout, "subscribe", async {
        let instance = code
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| classify(&store, e, "instantiate"))?;
        let subscribe = instance
            .get_typed_func::<(), (RawSubscriptions,)>(&mut store, &index.subscribe)
            .map_err(|e| classify(&store, e, "instantiate"))?;
        let (subs,) = subscribe
            .call_async(&mut store, ())
            .await
            .map_err(|e| classify(&store, e, "subscribe"))?;
        Ok(subs)
    });
    log_stderr(&mut store, result.is_err());
    result.map_err(LoadError::Subscribe)
}

fn call_metadata(
    runtime: &Runtime,
    code: &Code,
    name: Arc<str>,
    settings: &PluginSettings,
) -> Result<PluginInfo, LoadError> {
    let pre = &code.pre;
    let mut store = new_store(
        runtime,
        &code.engine,
        name.clone(),
        Arc::new(Grants::default()),
        CallContext::default(),
        Preopens::default(),
        settings,
    )
    .map_err(LoadError::Metadata)?;
    let result = guest_call(&name, settings.timeout, "metadata", async {
        let instance = pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| classify(&store, e, "instantiate"))?;
        // `plugin-info` is the same record in every version of `setter`.
        let metadata = instance
            .get_typed_func::<(), (PluginInfo,)>(&mut store, &code.metadata_index)
            .map_err(|e| classify(&store, e, "instantiate"))?;
        let (info,) = metadata
            .call_async(&mut store, ())
            .await
            .map_err(|e| classify(&store, e, "metadata"))?;
        Ok(info)
    });
    log_stderr(&mut store, result.is_err());
    result.map_err(LoadError::Metadata)
}
