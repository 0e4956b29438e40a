//! `nodestatus version`.

use std::process::ExitCode;

/// Prints the version of nodestatus, of its WIT package and of wasmtime.
pub fn execute() -> anyhow::Result<ExitCode> {
    println!(
        "nodestatus {}\nwit nodestatus:plugin@0.2.1 (serves 0.2.0, 0.1.0 and 0.1.1 too)\nwasmtime 48.0.8",
        env!("CARGO_PKG_VERSION")
    );
    Ok(ExitCode::SUCCESS)
}
