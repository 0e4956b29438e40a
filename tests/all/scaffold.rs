//! `nodestatus new`: for each language, a scaffolded setter builds, passes its
//! unit tests, `plugin check` and `once --strict` with its one command, from
//! the real toolchains (what the first-setter guides start from). The
//! example reads a file under the grant that `config.yaml` holds and the
//! README shows, and nothing it writes points into the source checkout (the
//! SDKs and build scripts come with the binary: `nodestatus kit`).

use std::path::Path;
use std::process::Command;

fn new(lang: &str, name: &str, dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["new", "--lang", lang, name, "--dir"])
        .arg(dir)
        .output()
        .unwrap()
}

/// The source checkout this test runs from.
fn checkout() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// Scaffolds `lang`, runs its build.sh, and checks that the setter's label
/// is in the diff that `once --strict` printed. With `own_kit`, the kit is
/// written by `nodestatus kit` into a directory of this test, which is
/// removed before the build: build.sh writes it again.
fn scaffold_builds_and_passes(lang: &str, own_kit: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("hello-{lang}");
    let kit = tmp.path().join("kit");
    let out = if own_kit {
        let made = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .arg("kit")
            .arg(&kit)
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
        assert_eq!(
            String::from_utf8_lossy(&made.stdout).trim(),
            kit.to_str().unwrap()
        );
        Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args(["new", "--lang", lang, &name, "--sdk"])
            .arg(&kit)
            .arg("--dir")
            .arg(tmp.path())
            .output()
            .unwrap()
    } else {
        new(lang, &name, tmp.path())
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tmp.path().join(&name);
    // Nothing points into the source checkout.
    let checkout = checkout();
    for entry in std::fs::read_dir(&dir).unwrap().chain(
        std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_dir())
            .flat_map(|e| std::fs::read_dir(e.unwrap().path()).unwrap()),
    ) {
        let path = entry.unwrap().path();
        if path.is_file() {
            // The binary that made it may be built inside the checkout.
            let text = std::fs::read_to_string(&path)
                .unwrap()
                .replace(env!("CARGO_BIN_EXE_nodestatus"), "nodestatus");
            assert!(
                !text.contains(checkout.to_str().unwrap()),
                "{} names the source checkout {}:\n{text}",
                path.display(),
                checkout.display()
            );
        }
    }
    // The grant: in config.yaml, which the build runs with, and in the README.
    let grant = format!("plugins:\n  {name}:\n    paths: [/proc/sys/kernel]\n");
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(config.ends_with(&grant), "{config}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains(&grant), "{readme}");
    if own_kit {
        std::fs::remove_dir_all(&kit).unwrap();
    }
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
    if own_kit {
        assert!(kit.join("scripts/guests/new-setter.sh").is_file());
    }
    // Without the grant, the setter fails at its read and says what to grant.
    let ungranted = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["once", "--strict", "--plugin"])
        .arg(dir.join("dist").join(format!("{name}.wasm")))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ungranted.stderr);
    assert!(!ungranted.status.success(), "{lang}: {stderr}");
    assert!(stderr.contains("/proc/sys/kernel"), "{lang}: {stderr}");
}

#[test]
fn a_new_rust_setter_builds_and_passes() {
    scaffold_builds_and_passes("rust", false);
}

#[test]
fn a_new_python_setter_builds_and_passes() {
    scaffold_builds_and_passes("python", false);
}

#[test]
fn a_new_js_setter_builds_and_passes() {
    scaffold_builds_and_passes("js", false);
}

#[test]
fn a_new_c_setter_builds_and_passes() {
    scaffold_builds_and_passes("c", true);
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
