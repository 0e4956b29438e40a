//! Builds the guest workspace in `plugins/` for `wasm32-wasip2` (release) and
//! writes `plugins.rs` with the path of every built component.
//!
//! The guest build has its own target directory (`target/wasm-plugins`), so
//! it neither fights the outer build's lock nor rebuilds when this crate's
//! hash changes.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_owned();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out.
    let target_root = out_dir.ancestors().nth(4).unwrap().to_owned();
    let guest_target = target_root.join("wasm-plugins");

    for dir in ["plugins", "sdk", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args([
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
        "--manifest-path",
    ])
    .arg(root.join("plugins/Cargo.toml"))
    .env("CARGO_TARGET_DIR", &guest_target);
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
    let output = cmd
        .output()
        .expect("running cargo for the plugins workspace");
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("wasm32-wasip2")
            && (stderr.contains("target may not be installed")
                || stderr.contains("can't find crate for `core`")
                || stderr.contains("can't find crate for `std`"))
        {
            panic!(
                "the wasm32-wasip2 target is missing. Install it with:\n\n    rustup target add wasm32-wasip2\n\n{stderr}"
            );
        }
        panic!("building plugins/ for wasm32-wasip2 failed:\n{stderr}");
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
