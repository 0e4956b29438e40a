//! The `nodestatus` commands, one file each; `main.rs` only defines them
//! and dispatches.
//!
//! | command | file |
//! |---|---|
//! | `run` | [`run`]: the engine: register, status sync, lease |
//! | `simulate` | [`simulate`]: N simulated nodes in one process |
//! | `once` | [`once`]: every setter once over a node, printed |
//! | `config check`, `config default` | [`config`] |
//! | `plugin check`, `plugin list`, `plugin push`, `plugin sign`, `plugin pull` | [`plugin`] |
//! | `new`, `kit` | [`new`]: a new setter from a template, and the SDKs it builds with |
//! | `version` | [`version`] |
//!
//! Every command that reads settings takes the same [`Layers`]: `--config`
//! (else the embedded default) with each setting's flag over it.
//!
//! [`Layers`]: nodestatus_engine::config::Layers

use std::path::PathBuf;
use std::process::ExitCode;

pub mod config;
pub mod new;
pub mod once;
pub mod plugin;
pub mod run;
pub mod simulate;
pub mod version;

/// The log format (`--log-format`).
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, coloured on a terminal.
    Text,
    /// One JSON object per line.
    Json,
}

/// Sets up logging to stderr; a one-shot command (not `run`) also gets the
/// default SIGPIPE action, so that piped into `head` it stops quietly, as
/// other CLI tools do, instead of panicking on EPIPE.
pub fn init(format: LogFormat, one_shot: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(
            "warn,nodestatus=info,cranelift=warn,wasmtime=warn,kube_client::client::builder=off,kube_client::client::tls=error",
        )
    });
    // Colour only on a terminal, and never when NO_COLOR is set
    // (no-color.org): log files and pipes get plain text.
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => b.init(),
        LogFormat::Json => b.json().init(),
    }
    if one_shot {
        // SAFETY: restores the default action before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
}

/// The binary that compiles plugins in a bounded child process
/// ([`nodestatus_runtime::compile`]): this one.
pub fn compiler_exe() -> Option<PathBuf> {
    std::env::current_exe().ok()
}

/// Logs what a long-lived command's config has that is probably not meant
/// (WARN) or that the engine handles by itself (INFO), at start.
pub fn log_config_warnings(config: &nodestatus_engine::config::Config) {
    use nodestatus_engine::config::Severity;
    for w in config.warnings() {
        match w.severity {
            Severity::Warning => tracing::warn!("config: {w}"),
            Severity::Notice => tracing::info!("config: {w}"),
        }
    }
}

/// Tunes glibc's malloc for the long-lived engine (`run`), before it starts
/// a thread: at most two arenas, and a fixed mmap threshold.
///
/// glibc gives each thread that allocates an arena of its own, up to eight
/// per core, and an arena keeps what is allocated in it scattered over its
/// pages. A start that compiles its plugins runs a load and a Cranelift
/// compile per plugin on threads of their own, and the engine then held
/// about 12 MB more, for as long as it ran, than after a start from the
/// precompile cache (`tiers::after_a_cold_start_on_winch_the_engine_holds_what_a_warm_start_holds`).
/// The engine's threads allocate little and seldom at once: the default
/// pass's benchmark with `MALLOC_ARENA_MAX=2` took 1.63 and 1.83 ms against
/// 1.84 and 1.67 ms with glibc's default (interleaved, docs/benchmarks.md).
///
/// glibc also raises its mmap threshold to the size of each large block
/// freed (up to 32 MiB): once a load had freed a Python plugin's 18 MB of
/// WebAssembly, the next blocks of that size came from an arena, whose free
/// top `malloc_trim` does not give back, and a start that compiled a Python
/// and a JavaScript setter held 18 MB more than one from the cache for as
/// long as it ran (docs/deployment.md, "Memory"). A fixed threshold
/// ([`MMAP_THRESHOLD`]) keeps every block above it a mapping of its own,
/// unmapped when freed. An operator's `MALLOC_ARENA_MAX` and
/// `MALLOC_MMAP_THRESHOLD_` are left to decide.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            // SAFETY: mallopt sets a parameter of the allocator under its
            // own lock; arenas made before it are kept.
            unsafe {
                libc::mallopt(libc::M_ARENA_MAX, 2);
            }
        }
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
            // SAFETY: as above; setting it turns glibc's dynamic threshold
            // off.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            }
        }
    }
}

/// The engine's malloc mmap threshold: a block of this size or more is a
/// mapping of its own (glibc's starting value is 128 KiB).
pub const MMAP_THRESHOLD: libc::c_int = 256 << 10;

/// Runs a long-lived command (`run`, `simulate`) on a multi-threaded tokio
/// runtime until it returns.
pub fn on_tokio(
    command: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(command)?;
    Ok(ExitCode::SUCCESS)
}

/// A command's outcome as the process's exit status; an error is printed
/// with its causes.
pub fn exit(result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}
