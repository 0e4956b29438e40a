//! Builds the guest workspaces for `wasm32-wasip2` (release): the setters in
//! `plugins/` and the test-only components in `tests/components/`, and
//! writes `plugins.rs` with the path of every built component.
//!
//! The guest build has its own target directory (`target/wasm-plugins`), so
//! it neither fights the outer build's lock nor rebuilds when this crate's
//! hash changes. Both workspaces build into it, and share the SDK's build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_owned();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out.
    let target_root = out_dir.ancestors().nth(4).unwrap().to_owned();
    let guest_target = target_root.join("wasm-plugins");

    for dir in ["plugins", "sdk", "wit", "tests/components"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    require_wasm_target();
    for workspace in ["plugins", "tests/components"] {
        build(&cargo, &root.join(workspace), &guest_target);
    }

    let built = guest_target.join("wasm32-wasip2/release");
    let mut consts = String::new();
    let mut entries: Vec<_> = std::fs::read_dir(&built)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    entries.sort();
    for path in entries {
        let stem = path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .to_uppercase()
            .replace('-', "_");
        consts.push_str(&format!(
            "/// `{}`\npub const {stem}: &str = {:?};\n",
            path.display(),
            path.display().to_string()
        ));
    }
    consts.push_str(&format!(
        "/// A precompile cache shared by every test run, kept warm between runs.\npub const TEST_CACHE_DIR: &str = {:?};\n",
        target_root.join("nodestatus-test-cache").display().to_string()
    ));
    std::fs::write(out_dir.join("plugins.rs"), consts).unwrap();
}

/// Fails with the command that installs the `wasm32-wasip2` target when the
/// toolchain lacks its standard library (the directory, not a message).
fn require_wasm_target() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .expect("running rustc --print sysroot");
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if !sysroot.join("lib/rustlib/wasm32-wasip2/lib").is_dir() {
        panic!(
            "the wasm32-wasip2 target is missing. Install it with:\n\n    rustup target add wasm32-wasip2\n"
        );
    }
}

/// Builds the guest workspace in `dir` into `target`.
fn build(cargo: &str, dir: &Path, target: &Path) {
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
        "--manifest-path",
    ])
    .arg(dir.join("Cargo.toml"))
    .env("CARGO_TARGET_DIR", target);
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    // Nothing of this build's own input reaches the guest build.
    cmd.stdin(std::process::Stdio::null());
    let output = cmd.output().expect("running cargo for a guest workspace");
    if !output.status.success() {
        // The whole of cargo's output in a file, and its first error again
        // at the message's end (a log's tail shows only the end).
        let stderr = String::from_utf8_lossy(&output.stderr);
        let name = dir.file_name().unwrap().to_string_lossy();
        let log = target.join(format!("{name}-build-failed.log"));
        let _ = std::fs::create_dir_all(target);
        let _ = std::fs::write(&log, stderr.as_bytes());
        let first: Vec<&str> = stderr
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("error"))
            .take(30)
            .collect();
        panic!(
            "building {} for wasm32-wasip2 failed:\n{stderr}\nits first error (the whole of cargo's output: {}):\n{}",
            dir.display(),
            log.display(),
            first.join("\n")
        );
    }
}
