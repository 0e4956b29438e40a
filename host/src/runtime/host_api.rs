//! The host side of the `nodestatus:plugin/host` interface, and the state one
//! call's [`wasmtime::Store`] carries.

use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::facts::{self, Facts};

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "plugin",
    });
}

use bindings::nodestatus::plugin::host;

/// Longest log line kept from a plugin, in bytes.
const MAX_LOG_LINE: usize = 4096;
/// Log lines kept from one call.
const MAX_LOG_LINES: u32 = 100;
/// Events kept from one call.
const MAX_EVENTS: usize = 10;
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
}

impl Default for CallContext {
    fn default() -> Self {
        Self {
            facts: Arc::new(Facts::default()),
            node_problems: Arc::from(Vec::new()),
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
#[derive(Debug, Clone, Default)]
pub(crate) struct Grants {
    /// Read-only directories, normalized and absolute.
    pub paths: Vec<super::PathGrant>,
    /// Environment variables, with their values taken from the host at load.
    pub env: Vec<(String, String)>,
    /// The plugin's own config, as JSON.
    pub config: Arc<str>,
}

/// The data inside one call's store.
pub(crate) struct CallState {
    pub plugin: Arc<str>,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limits: CallLimits,
    pub grants: Arc<Grants>,
    pub ctx: CallContext,
    pub log_lines: u32,
    pub events: Vec<EmittedEvent>,
    pub stderr: MemoryOutputPipe,
}

impl CallState {
    /// A sandbox with exactly `grants`: read-only preopens at the same path,
    /// the granted environment, no network, no stdin, stdout discarded and
    /// stderr captured (bounded) for the host's log.
    pub fn new(
        plugin: Arc<str>,
        grants: Arc<Grants>,
        ctx: CallContext,
        memory_limit: usize,
    ) -> wasmtime::Result<Self> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let mut b = WasiCtx::builder();
        b.allow_blocking_current_thread(true)
            .allow_ip_name_lookup(false)
            .stderr(stderr.clone());
        for (k, v) in &grants.env {
            b.env(k, v);
        }
        for g in &grants.paths {
            // Absent now, perhaps present at the next call: see Plugin::load_bytes.
            if !path_exists(&g.from) {
                continue;
            }
            let guest = g.path.to_string_lossy();
            b.preopened_dir(&g.from, guest.as_ref(), wasmtime_wasi::FsPerms::ReadOnly)?;
        }
        let limits = CallLimits {
            memory: memory_limit,
            exceeded: None,
        };
        Ok(Self {
            plugin,
            wasi: b.build(),
            table: ResourceTable::new(),
            limits,
            grants,
            ctx,
            log_lines: 0,
            events: Vec::new(),
            stderr,
        })
    }
}

/// Whether `p` exists. Only "not found" counts as absent: a path that
/// exists but cannot be read is left to the preopen, whose error names it.
pub(crate) fn path_exists(p: &std::path::Path) -> bool {
    !matches!(std::fs::metadata(p), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// The memory cap of one call. Growing past it traps at once (rather than
/// letting `memory.grow` return -1), so the error names the cap and the size
/// asked for, and `exceeded` tells the caller it was the memory cap.
pub(crate) struct CallLimits {
    pub memory: usize,
    pub exceeded: Option<usize>,
}

impl ResourceLimiter for CallLimits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory {
            self.exceeded = Some(desired);
            return Err(wasmtime::Error::msg(format!(
                "memory limit exceeded: the plugin asked for {desired} bytes, its cap is {} bytes",
                self.memory
            )));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }

    fn instances(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        16
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

pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    host::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)
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

impl host::Host for CallState {
    fn log(&mut self, level: host::Level, message: String) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            return;
        }
        let message = truncate(message, MAX_LOG_LINE);
        let plugin = &*self.plugin;
        match level {
            host::Level::Trace => {
                tracing::trace!(target: "nodestatus::plugin", plugin, "{message}")
            }
            host::Level::Debug => {
                tracing::debug!(target: "nodestatus::plugin", plugin, "{message}")
            }
            host::Level::Info => tracing::info!(target: "nodestatus::plugin", plugin, "{message}"),
            host::Level::Warn => tracing::warn!(target: "nodestatus::plugin", plugin, "{message}"),
            host::Level::Error => {
                tracing::error!(target: "nodestatus::plugin", plugin, "{message}")
            }
        }
    }

    fn config(&mut self) -> String {
        self.grants.config.to_string()
    }

    fn record_event(&mut self, event_type: host::EventType, reason: String, message: String) {
        if self.events.len() >= MAX_EVENTS {
            return;
        }
        self.events.push(EmittedEvent {
            event_type: match event_type {
                host::EventType::Normal => EventType::Normal,
                host::EventType::Warning => EventType::Warning,
            },
            reason: truncate(reason, 128),
            message: truncate(message, 1024),
        });
    }

    fn system(&mut self) -> host::SystemInfo {
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

    fn network_interfaces(&mut self) -> Vec<host::NetworkInterface> {
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

    fn statvfs(&mut self, path: String) -> Result<host::FsStats, String> {
        let Some(norm) = facts::normalize_abs(&path) else {
            return Err(format!("statvfs: {path:?} is not an absolute path"));
        };
        // The innermost grant that holds the path says where it is on the host.
        let Some(host_path) = self
            .grants
            .paths
            .iter()
            .filter(|g| norm.starts_with(&g.path))
            .max_by_key(|g| g.path.components().count())
            .and_then(|g| g.host_path(&norm))
        else {
            return Err(format!(
                "statvfs: {path:?} is not inside a path granted to this plugin"
            ));
        };
        let st = facts::statvfs(&host_path).map_err(|e| format!("statvfs: {path:?}: {e}"))?;
        Ok(host::FsStats {
            total_bytes: st.total_bytes,
            free_bytes: st.free_bytes,
            available_bytes: st.available_bytes,
            total_inodes: st.total_inodes,
            free_inodes: st.free_inodes,
            read_only: st.read_only,
        })
    }

    fn node_problems(&mut self) -> Vec<String> {
        self.ctx.node_problems.to_vec()
    }
}
