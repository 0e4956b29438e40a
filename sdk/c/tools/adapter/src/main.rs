//! Writes `wasi_snapshot_preview1.reactor.wasm` (the reactor adapter of
//! wasmtime 48) to the path given as the only argument.
use std::{env, fs, process};

fn main() {
    let Some(out) = env::args_os().nth(1) else {
        eprintln!("usage: nodestatus-c-adapter OUT.wasm");
        process::exit(2);
    };
    let bytes = wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
    if let Err(e) = fs::write(&out, bytes) {
        eprintln!("cannot write {}: {e}", out.to_string_lossy());
        process::exit(1);
    }
}
