//! # nodestatus-sdk: write node-status setters in Rust
//!
//! A setter is a WebAssembly component that the nodestatus host calls once
//! per status pass with the whole Node as JSON; it returns only its **part**
//! of the node, the fields it sets (WIT `nodestatus:plugin@0.2.1`). You
//! write the setter against the whole [`Node`], as before: set a label, a
//! condition, a capacity. The SDK records each field you write and returns
//! exactly those, and the host merges them into the node. A field you wrote
//! in an earlier pass and leave out now is one you no longer set: the host
//! removes it. This crate gives you:
//!
//! - [`Setter`] and [`export!`]: implement two functions, export them;
//! - [`Node`]: the node, parsed lazily, with helpers for labels, annotations,
//!   conditions (with the kubelet's heartbeat and transition rules),
//!   capacity and allocatable [`Quantity`]s, addresses and `nodeInfo`, and
//!   the part they make ([`Node::part`]);
//! - [`host`]: the host's log, your plugin's config, events, and machine
//!   facts (hostname, interfaces, filesystem statistics).
//!
//! ```no_run
//! use nodestatus_sdk::{ConditionStatus, Metadata, Node, Setter};
//!
//! struct Maintenance;
//!
//! impl Setter for Maintenance {
//!     fn metadata() -> Metadata {
//!         Metadata::new("maintenance", env!("CARGO_PKG_VERSION"))
//!             .description("marks the node when /run/maintenance exists")
//!             .path("/run")
//!     }
//!
//!     fn set(node: &mut Node) -> nodestatus_sdk::Result<()> {
//!         let on = std::path::Path::new("/run/maintenance").exists();
//!         node.set_label("example.com/maintenance", if on { "true" } else { "false" });
//!         node.set_condition(
//!             "Maintenance",
//!             ConditionStatus::from_bool(on),
//!             if on { "MaintenanceScheduled" } else { "NoMaintenance" },
//!             "",
//!         );
//!         Ok(())
//!     }
//! }
//!
//! nodestatus_sdk::export!(Maintenance);
//! ```
//!
//! Its part is the label and the condition, whatever else the node holds:
//! `{"metadata":{"labels":{"example.com/maintenance":"false"}},
//! "status":{"conditions":[{"type":"Maintenance","status":"False",...}]}}`.
//! Build it with `cargo build --release --target wasm32-wasip2` and drop
//! `target/wasm32-wasip2/release/<name>.wasm` into the plugin directory.

pub mod condition;
pub mod host;
pub mod node;
pub mod pressure;
pub mod reactor;
pub use nodestatus_apimachinery::{names, quantity, time};

pub use condition::{Condition, ConditionStatus, Transition};
pub use host::EventType;
pub use node::Node;
pub use quantity::Quantity;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        // Every Rust setter is of the world `reactor-plugin` (0.2.1): a
        // plain setter's `reactor` follows nothing ([`export!`]), and the
        // host treats it as the plain setter it is.
        world: "reactor-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "nodestatus_sdk::bindings",
        // The host interface is the 0.1 package's (wit/deps/plugin-0.1):
        // with two versions of `nodestatus:plugin` in the resolve, its
        // module is `nodestatus::plugin0_1_1::host`, and the exports'
        // `exports::nodestatus::plugin0_2_1::{setter, reactor}`.
        with: { "nodestatus:plugin/host@0.1.1": generate },
    });
}

/// An error a setter returns; the host reports its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Self(e.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Self(e.to_string())
    }
}

/// `Result<T, nodestatus_sdk::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a plugin is and what it asks for. Build it with [`Metadata::new`].
/// The host reads the same record back from a plugin (and validates it).
pub use nodestatus_apimachinery::Metadata;

/// A node-status setter. Implement it and call [`export!`].
pub trait Setter {
    /// Describes the plugin. Called once at load, with no grants.
    fn metadata() -> Metadata;
    /// Sets this plugin's part of the node: every field it writes on `node`
    /// (see [`Node`]) is in the part the host receives.
    fn set(node: &mut Node) -> Result<()>;
}

thread_local! {
    /// The metadata of the setter [`run`] is running, for messages that name
    /// the plugin and its grants ([`host::FileError`]).
    static RUNNING: std::cell::Cell<Option<fn() -> Metadata>> = const { std::cell::Cell::new(None) };
}

/// The metadata of the setter running on this thread, if any.
pub(crate) fn running_metadata() -> Option<Metadata> {
    RUNNING.with(|r| r.get()).map(|metadata| metadata())
}

/// Runs a setter over a Node's JSON: parse (lazily), set, and return the
/// setter's part as JSON text ([`Node::part`]), always `Some`: `{}` when it
/// wrote nothing (it sets no field). The export glue calls it for WIT
/// `set`; benchmarks and tests call it natively with the same JSON.
pub fn run<S: Setter>(node_json: &str) -> std::result::Result<Option<String>, String> {
    RUNNING.with(|r| r.set(Some(S::metadata)));
    let mut node = Node::parse(node_json)
        .map_err(|e| format!("the host sent a node that does not parse: {e}"))?;
    S::set(&mut node).map_err(|e| e.0)?;
    Ok(Some(node.part_json()))
}

#[doc(hidden)]
pub fn __metadata<S: Setter>() -> bindings::exports::nodestatus::plugin0_2_1::setter::PluginInfo {
    let m = S::metadata();
    bindings::exports::nodestatus::plugin0_2_1::setter::PluginInfo {
        name: m.name,
        version: m.version,
        description: m.description,
        paths: m.paths,
        env: m.env,
        affects_readiness: m.affects_readiness,
    }
}

/// Exports a [`Setter`] as the plugin's `nodestatus:plugin/setter@0.2.1`
/// (with a `reactor` that follows nothing). Compiled natively it expands to
/// nothing, so a plugin crate can also be a normal library for tests and
/// benchmarks.
#[macro_export]
macro_rules! export {
    ($setter:ty) => {
        $crate::__export_with_reactor!($setter, {
            fn subscribe()
            -> $crate::bindings::exports::nodestatus::plugin0_2_1::reactor::Subscriptions {
                $crate::reactor::__subscriptions($crate::reactor::Subscriptions::new())
            }
            fn on_lines(
                node: ::std::string::String,
                _lines: $crate::bindings::exports::nodestatus::plugin0_2_1::reactor::Batch,
            ) -> ::std::result::Result<
                ::std::option::Option<::std::string::String>,
                ::std::string::String,
            > {
                $crate::run::<$setter>(&node)
            }
        });
    };
}

/// Exports a [`Setter`] that is also a [`reactor::Reactor`]: its `setter`
/// and its `reactor` (`nodestatus:plugin/reactor@0.2.1`).
#[macro_export]
macro_rules! export_reactor {
    ($setter:ty) => {
        $crate::__export_with_reactor!($setter, {
            fn subscribe()
            -> $crate::bindings::exports::nodestatus::plugin0_2_1::reactor::Subscriptions {
                $crate::reactor::__subscriptions(<$setter as $crate::reactor::Reactor>::subscribe())
            }
            fn on_lines(
                node: ::std::string::String,
                lines: $crate::bindings::exports::nodestatus::plugin0_2_1::reactor::Batch,
            ) -> ::std::result::Result<
                ::std::option::Option<::std::string::String>,
                ::std::string::String,
            > {
                $crate::reactor::run_lines::<$setter>(&node, &$crate::reactor::__lines(lines))
            }
        });
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_with_reactor {
    ($setter:ty, { $($reactor:tt)* }) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __NodestatusExport;
            impl $crate::bindings::exports::nodestatus::plugin0_2_1::setter::Guest
                for __NodestatusExport
            {
                fn metadata()
                -> $crate::bindings::exports::nodestatus::plugin0_2_1::setter::PluginInfo {
                    $crate::__metadata::<$setter>()
                }
                fn set(
                    node: ::std::string::String,
                ) -> ::std::result::Result<
                    ::std::option::Option<::std::string::String>,
                    ::std::string::String,
                > {
                    $crate::run::<$setter>(&node)
                }
            }
            impl $crate::bindings::exports::nodestatus::plugin0_2_1::reactor::Guest
                for __NodestatusExport
            {
                $($reactor)*
            }
    $crate::bindings::__export_plugin!(__NodestatusExport with_types_in $crate::bindings);
        };
    };
}

/// The time a setter writes on the conditions it sets
/// ([`Node::set_condition`], [`pressure::PressureCondition::set`]). In a component,
/// the host stamps a part's condition times itself (the heartbeat now, the
/// transition on a flip) and ignores the part's, so none is read from a
/// clock: the Unix epoch stands in. A call that reads a clock is called in
/// every pass (the engine's `incrementalPasses`); a condition setter need
/// not be. Natively (a setter's own tests, the benches), the clock.
pub fn condition_time() -> String {
    #[cfg(target_arch = "wasm32")]
    {
        HOST_STAMPED.to_owned()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        time::now()
    }
}

/// What a component writes for a condition's times: the host stamps them.
pub const HOST_STAMPED: &str = "1970-01-01T00:00:00Z";
