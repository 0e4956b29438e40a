//! Not a benchmark: `kernel-check` as an exec plugin, node-problem-detector's
//! model, for the `exec/kernel-check` benchmark in `setter.rs`.
//!
//! Run as `exec_plugin-<hash> --exec-plugin`, it reads a Node's JSON on
//! stdin, runs the kernel-check setter compiled natively from the same source
//! as its WebAssembly build (`nodestatus_sdk::run::<KernelCheck>`), writes
//! its part of the Node as JSON on stdout and exits 0 (1 with the error on
//! stderr). The
//! facts it needs (`uname`) it reads itself, as an exec plugin does.
//!
//! It is a bench target so that `cargo bench -p nodestatus` builds it beside
//! the benchmark that runs it, as a small program that links only the SDK
//! and the setter. Run by cargo (with `--bench`, or no argument), it says
//! so and exits.

use std::io::{Read, Write};
use std::process::ExitCode;

use kernel_check::KernelCheck;

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() != Some("--exec-plugin") {
        println!(
            "exec_plugin: kernel-check as an exec plugin for the setter benchmark; nothing to run here"
        );
        return ExitCode::SUCCESS;
    }
    let mut node_json = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut node_json) {
        eprintln!("cannot read the node from stdin: {e}");
        return ExitCode::FAILURE;
    }
    match nodestatus_sdk::run::<KernelCheck>(&node_json) {
        Ok(part) => match std::io::stdout()
            .lock()
            .write_all(part.unwrap_or_default().as_bytes())
        {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("cannot write the part: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
