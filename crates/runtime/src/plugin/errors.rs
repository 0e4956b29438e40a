//! Why a plugin did not load, or a call did not give a node.

#[allow(unused_imports)]
use std::path::PathBuf;

use super::MAX_PLUGIN_BYTES;

/// Why a file could not become a running plugin. Every message names the
/// problem precisely enough to fix it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The path is not a regular file (a FIFO, a device, a directory...).
    #[error("{} is not a regular file but a {kind}; only regular files are loaded", .path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// The file is empty.
    #[error(
        "the file is empty (0 bytes): was it written completely? Write a temp file and rename it into place"
    )]
    Empty,
    /// The file is larger than [`MAX_PLUGIN_BYTES`].
    #[error("file is {size} bytes, larger than the {MAX_PLUGIN_BYTES}-byte limit")]
    TooLarge {
        /// Its size.
        size: u64,
    },
    /// The plugin declares a name other than its file's.
    #[error(
        "the file {} declares the plugin name {declared:?}: a plugin is named by its file, so rename the file to {declared}.wasm (or fix the name it declares)",
        .file.display()
    )]
    NameMismatch {
        /// The file.
        file: PathBuf,
        /// The name it declares.
        declared: String,
    },
    /// A granted path is refused by the sandbox itself.
    #[error("the grant of {} is refused: {reason}", .path.display())]
    GrantRefused {
        /// The host path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file does not start with the WebAssembly magic number.
    #[error("not a WebAssembly file: it does not start with the `\\0asm` magic number")]
    NotWasm,
    /// The file is a core module, not a component.
    #[error(
        "a core WebAssembly module, not a component: build for `wasm32-wasip2`, or wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    /// Compilation failed.
    #[error("invalid component")]
    Compile(#[source] wasmtime::Error),
    /// The component is not valid WebAssembly (found by the check before
    /// any compile).
    #[error("invalid component")]
    Invalid(#[source] wasmparser::BinaryReaderError),
    /// The component imports interfaces the host does not offer (found by
    /// the check before any compile).
    #[error(
        "the component imports {} that this host does not offer (it offers nodestatus:plugin/host@0.1.x and WASI 0.2)",
        .0.join(", ")
    )]
    Unoffered(Vec<String>),
    /// This very file (by its sha256) was refused before, by this engine
    /// build and under limits no larger than today's: not compiled again
    /// until it changes.
    #[error(
        "refused before, not compiled again until the file changes (sha256 {}): {error}",
        &.sha256[..12]
    )]
    RefusedBefore {
        /// The file's sha256.
        sha256: String,
        /// Why it was refused then.
        error: String,
    },
    /// Compiling it ran past `compileTimeout` or `compileMemoryLimit`, or the
    /// compiler process failed.
    #[error("cannot compile the component")]
    CompileBound(#[source] crate::compile::Error),
    /// The component imports something the host does not provide.
    #[error(
        "the component's imports cannot be satisfied by this host (nodestatus:plugin/host@0.1.x and WASI 0.2)"
    )]
    Link(#[source] wasmtime::Error),
    /// The component does not export the `nodestatus:plugin/setter` interface.
    #[error(
        "the component does not implement the world `nodestatus:plugin/plugin` of a version this host serves (0.2.x or 0.1.x: export `nodestatus:plugin/setter`)"
    )]
    WrongWorld(#[source] wasmtime::Error),
    /// `metadata()` trapped, timed out, ran out of memory, or returned a
    /// record the host could not read (its [`CallError::kind`] says which).
    #[error("calling `metadata` failed")]
    Metadata(#[source] CallError),
    /// `metadata()` returned a record that breaks the rules of its fields.
    #[error("invalid metadata: {0}")]
    BadMetadata(#[source] MetadataError),
    /// A reacting plugin's `subscribe()` trapped, timed out, ran out of
    /// memory, or returned a record the host could not read.
    #[error("calling `subscribe` failed")]
    Subscribe(#[source] CallError),
    /// What `subscribe()` asked for breaks its rules (a pattern that is not
    /// a regular expression, a span or lookback out of range, ...).
    #[error("invalid subscriptions: {0}")]
    Subscriptions(#[source] crate::reactor::SubscriptionError),
    /// The sha256 pin does not match.
    #[error(
        "sha256 mismatch for plugin {name:?}: the config pins {expected}, the file is {actual}"
    )]
    Sha256Mismatch {
        /// The plugin.
        name: String,
        /// The pinned hash.
        expected: String,
        /// The file's hash.
        actual: String,
    },
    /// The plugin asks for capabilities the operator did not grant, and the
    /// config says to refuse it.
    #[error(
        "plugin {name:?} asks for {} that the config does not grant (onUngranted: refuse)",
        list(.withheld)
    )]
    Ungranted {
        /// The plugin.
        name: String,
        /// What was not granted.
        withheld: Vec<Withheld>,
    },
    /// A granted path cannot be opened.
    #[error("granted path {} cannot be opened", .path.display())]
    Grant {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: wasmtime::Error,
    },
}

impl LoadError {
    /// Whether the machine's state, not the file, decided the failure, so
    /// that loading the same file again later may succeed: an I/O error
    /// reading it, a granted path that could not be opened, a compiler
    /// process that could not start or died (killed by the kernel for
    /// memory, say: a compile limit it ran past is not transient), or a
    /// `metadata` call that ran past its deadline (a starved CPU) or could
    /// not be instantiated (a full instance pool). A plugin directory loads
    /// such a file again after a backoff; every other refusal stands until
    /// the file or the operator's settings change.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Read { .. } | Self::Grant { .. } => true,
            Self::CompileBound(e) => matches!(
                e,
                crate::compile::Error::Spawn { .. } | crate::compile::Error::Crashed { .. }
            ),
            Self::Metadata(e) | Self::Subscribe(e) => {
                matches!(e.kind, CallErrorKind::Timeout | CallErrorKind::Instantiate)
            }
            _ => false,
        }
    }
}

/// What is wrong with the record a plugin's `metadata()` returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// The name is not a DNS label.
    #[error(
        "name {0:?} must be 1 to 63 lowercase letters, digits or '-', not starting or ending with '-'"
    )]
    Name(String),
    /// The version or the description is too long.
    #[error("version must be at most 64 bytes and description at most 1024")]
    TooLong,
    /// A path it asks for is not absolute and normalized.
    #[error("path {0:?} must be absolute and normalized (no '.', '..' or trailing '/')")]
    Path(String),
    /// An environment variable it asks for has an invalid name.
    #[error("environment variable name {0:?} is not valid")]
    Env(String),
}

/// A capability a plugin asked for in its metadata and does not get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Withheld {
    /// A path that no grant covers.
    Path(String),
    /// A path of which the operator granted only directories inside it.
    PartOfPath(String),
    /// An environment variable the operator did not grant.
    Env(String),
    /// The files under a granted directory that holds the host's `/proc`
    /// (see [`crate::proc_view`]): the directory serves `statvfs` only.
    FilesUnderProc(PathBuf),
    /// A stream, or a watched path, of a reacting plugin, with what would
    /// grant it.
    Stream(String),
}

impl Withheld {
    /// Whether the operator can grant it in the plugin's `paths` or `env`
    /// (the files under a directory holding `/proc` never are).
    pub fn grantable(&self) -> bool {
        !matches!(self, Self::FilesUnderProc(_))
    }
}

impl std::fmt::Display for Withheld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Path(p) => write!(f, "path {p}"),
            Self::PartOfPath(p) => write!(f, "path {p} (only the granted parts inside it)"),
            Self::Env(v) => write!(f, "env {v}"),
            Self::Stream(s) => f.write_str(s),
            Self::FilesUnderProc(p) => write!(
                f,
                "reading files under {} (it holds the host's /proc; it serves statvfs only, so grant the directories to read instead)",
                p.display()
            ),
        }
    }
}

/// `a, b, c`.
pub(super) fn list(withheld: &[Withheld]) -> String {
    withheld
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl serde::Serialize for Withheld {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The kind of a failed call, a bounded set fit for metric labels. Each
/// failure at the guest boundary has its own: the guest trapped
/// ([`Trap`](Self::Trap)), ran past its deadline ([`Timeout`](Self::Timeout))
/// or its memory cap ([`Memory`](Self::Memory)), returned what the host
/// cannot take ([`InvalidResult`](Self::InvalidResult),
/// [`OutputTooLarge`](Self::OutputTooLarge)), or failed without a
/// capability it was not granted ([`Ungranted`](Self::Ungranted)). (Bad
/// metadata fails the load: [`LoadError::BadMetadata`]. What the engine
/// finds wrong in an output the sandbox returned, such as a field outside
/// the plugin's allowance, is the engine's own kind.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallErrorKind {
    /// The deadline passed, in guest code or blocked in a host call.
    Timeout,
    /// The memory cap was reached (memories and tables together).
    Memory,
    /// What the guest handed across the component boundary breaks the
    /// canonical ABI: its result string is not UTF-8 or lies outside its
    /// memory, a discriminant is out of range, its `realloc` answered an
    /// invalid pointer, or it passed a host call an invalid value or handle.
    /// Wasmtime reports each of these as an error that is not a trap, so this
    /// is every such error of a call past instantiation (an `exit` is a
    /// [`Trap`](Self::Trap)).
    InvalidResult,
    /// The output is larger than [`MAX_OUTPUT_BYTES`](super::MAX_OUTPUT_BYTES).
    OutputTooLarge,
    /// The guest trapped.
    Trap,
    /// The setter returned an error of its own.
    Plugin,
    /// The setter returned an error while it lacked a capability it was not
    /// granted: the host refused it a host function during the call
    /// (`statvfs` outside its paths, `container-runtime` without
    /// `containerRuntime`), or a path or variable its metadata asks for is
    /// withheld by the config ([`Withheld::grantable`]).
    Ungranted,
    /// The sandbox could not be set up or the component instantiated.
    Instantiate,
}

impl CallErrorKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::InvalidResult => "invalid-result",
            Self::OutputTooLarge => "output-too-large",
            Self::Trap => "trap",
            Self::Plugin => "plugin",
            Self::Ungranted => "ungranted",
            Self::Instantiate => "instantiate",
        }
    }
}

/// A failed call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    /// What kind of failure.
    pub kind: CallErrorKind,
    /// What happened, for people.
    pub message: String,
}

impl CallError {
    /// A failure of `kind`.
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}
