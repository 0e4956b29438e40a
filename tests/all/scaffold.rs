//! `nodestatus new`: for each language, a scaffolded setter builds, passes its
//! unit tests, `plugin check` and `once --strict` with its one command, from
//! the real toolchains (what the first-setter guides start from).

use std::path::Path;
use std::process::Command;

fn new(lang: &str, name: &str, dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["new", "--lang", lang, name, "--dir"])
        .arg(dir)
        .output()
        .unwrap()
}

/// Scaffolds `lang`, runs its build.sh, and checks that the setter's label
/// is in the diff that `once --strict` printed.
fn scaffold_builds_and_passes(lang: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("hello-{lang}");
    let out = new(lang, &name, tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tmp.path().join(&name);
    let build = Command::new(dir.join("build.sh"))
        .env("NODESTATUS", env!("CARGO_BIN_EXE_nodestatus"))
        // The Rust template's dependencies, compiled once for every run.
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("scaffold-target"),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&build.stdout);
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(build.status.success(), "{lang}: {stdout}\n{stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with('+') && l.contains(&format!("\"{name}.nodestatus.io/kernel\""))),
        "{lang}: no label in the diff:\n{stdout}"
    );
    assert!(dir.join("dist").join(format!("{name}.wasm")).is_file());
}

#[test]
fn a_new_rust_setter_builds_and_passes() {
    scaffold_builds_and_passes("rust");
}

#[test]
fn a_new_python_setter_builds_and_passes() {
    scaffold_builds_and_passes("python");
}

#[test]
fn a_new_js_setter_builds_and_passes() {
    scaffold_builds_and_passes("js");
}

#[test]
fn a_new_c_setter_builds_and_passes() {
    scaffold_builds_and_passes("c");
}

#[test]
fn new_refuses_a_bad_name_an_existing_directory_and_a_missing_sdk() {
    let tmp = tempfile::tempdir().unwrap();
    let out = new("rust", "Bad_Name", tmp.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a plugin name"));
    std::fs::create_dir(tmp.path().join("taken")).unwrap();
    let out = new("js", "taken", tmp.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["new", "--lang", "c", "x", "--sdk", "/nonexistent", "--dir"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --sdk"));
    assert!(!tmp.path().join("x").exists());
}
