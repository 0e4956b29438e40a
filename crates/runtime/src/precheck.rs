//! The check of a component before it is compiled: it is valid, it exports
//! the `setter` interface in a version this host speaks, and it imports
//! nothing the host does not offer. It reads the binary with `wasmparser`
//! (the validator wasmtime itself uses) and compiles nothing, so a file that
//! could never run is refused in milliseconds, where Cranelift could spend
//! minutes on it first.
//!
//! What it checks is the component's outer shape: the names of its imports
//! and exports, and that the setter export is an instance with the functions
//! `metadata` and `set`. The types of those functions, and of each imported
//! function, are checked after the compile, when the component is linked
//! ([`LoadError::Link`], [`LoadError::WrongWorld`]).

use wasmparser::component_types::ComponentEntityType;
use wasmparser::{Parser, Payload, Validator, WasmFeatures};

use crate::LoadError;

/// The package and interface a plugin exports, without its version.
const SETTER: &str = "nodestatus:plugin/setter";
/// The versions of the `setter` interface this host speaks (`0.1.x` and
/// `0.2.x`: within each, a new version only adds).
const SETTER_VERSIONS: &[&str] = &["0.1.", "0.2."];
/// The versions of the `nodestatus:plugin/host` interface this host offers
/// (the 0.2 world imports `host@0.1.1`).
const HOST_VERSIONS: &str = "0.1.";
/// The versions of WASI this host offers (wasmtime-wasi's preview 2:
/// the linker answers any `0.2.x` import with its own).
const WASI_VERSIONS: &str = "0.2.";

/// The interfaces the host's linker offers: `nodestatus:plugin/host` and
/// WASI 0.2 as `wasmtime_wasi::p2::add_to_linker_async` adds it.
const OFFERED: &[&str] = &[
    "nodestatus:plugin/host",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/exit",
    "wasi:cli/environment",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:sockets/tcp",
    "wasi:sockets/udp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/instance-network",
    "wasi:sockets/network",
    "wasi:sockets/ip-name-lookup",
];

/// Splits `ns:pkg/iface@version` into the name and the version.
fn split_version(name: &str) -> (&str, Option<&str>) {
    match name.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (name, None),
    }
}

/// Whether the host offers the import `name`.
fn offered(name: &str) -> bool {
    let (iface, version) = split_version(name);
    let Some(version) = version else {
        return false;
    };
    let speaks = if iface.starts_with("nodestatus:plugin/") {
        version.starts_with(HOST_VERSIONS)
    } else {
        version.starts_with(WASI_VERSIONS)
    };
    speaks && OFFERED.contains(&iface)
}

/// The names of the component's own imports and exports (not those of the
/// modules and components nested in it).
fn outer_names(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), wasmparser::BinaryReaderError> {
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(s) if depth == 0 => {
                for i in s {
                    imports.push(i?.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(s) if depth == 0 => {
                for e in s {
                    exports.push(e?.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

/// Checks `bytes` (a component: [`check_header`](crate::plugin) passed)
/// without compiling it: [`LoadError::Invalid`], [`LoadError::WrongWorld`]
/// or [`LoadError::Unoffered`] when it could never run here.
pub(crate) fn check(bytes: &[u8]) -> Result<(), LoadError> {
    let types = Validator::new_with_features(WasmFeatures::default())
        .validate_all(bytes)
        .map_err(LoadError::Invalid)?;
    let (imports, exports) = outer_names(bytes).map_err(LoadError::Invalid)?;

    let setters: Vec<&String> = exports
        .iter()
        .filter(|e| split_version(e).0 == SETTER)
        .collect();
    let Some(setter) = setters.iter().find(|e| {
        split_version(e)
            .1
            .is_some_and(|v| SETTER_VERSIONS.iter().any(|s| v.starts_with(s)))
    }) else {
        let why = match setters.first() {
            Some(other) => format!("it exports {other}, a version this host does not speak"),
            None => format!("it has no export {SETTER}"),
        };
        return Err(LoadError::WrongWorld(wasmtime::Error::msg(why)));
    };
    let functions = match types.component_item_for_export(setter).map(|i| &i.ty) {
        Some(ComponentEntityType::Instance(id)) => {
            let instance = &types.as_ref()[*id];
            ["metadata", "set"]
                .into_iter()
                .filter(|f| {
                    !matches!(
                        instance.exports.get(*f).map(|i| &i.ty),
                        Some(ComponentEntityType::Func(_))
                    )
                })
                .collect::<Vec<_>>()
        }
        _ => {
            return Err(LoadError::WrongWorld(wasmtime::Error::msg(format!(
                "its export {setter} is not an instance"
            ))));
        }
    };
    if !functions.is_empty() {
        return Err(LoadError::WrongWorld(wasmtime::Error::msg(format!(
            "its export {setter} has no function {}",
            functions.join(" or ")
        ))));
    }

    let unoffered: Vec<String> = imports.into_iter().filter(|i| !offered(i)).collect();
    if !unoffered.is_empty() {
        return Err(LoadError::Unoffered(unoffered));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasi_0_2_and_the_plugin_host_0_1_are_offered() {
        assert!(offered("wasi:io/streams@0.2.0"));
        assert!(offered("wasi:cli/environment@0.2.6"));
        assert!(offered("nodestatus:plugin/host@0.1.0"));
        assert!(offered("nodestatus:plugin/host@0.1.1"));
        assert!(!offered("nodestatus:plugin/host@0.2.0"));
        assert!(!offered("wasi:io/streams@0.3.0"));
        assert!(!offered("wasi:http/outgoing-handler@0.2.0"));
        assert!(!offered("wasi:io/streams"));
        assert!(!offered("env"));
    }
}
