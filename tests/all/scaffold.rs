//! `nodestatus new`: for each language, a scaffolded setter builds, passes its
//! unit tests, `plugin check` and `once --strict` with its one command, from
//! the real toolchains (what the first-setter guides start from). The
//! example reads a file under the grant that `config.yaml` holds and the
//! README shows.
//!
//! The directory is whole: it is made under one `HOME` and directory, moved
//! to another, and built there under another `HOME`, with the maker's
//! directory gone and `nodestatus` found on `PATH`, as in a vendor's CI. No
//! file in it names the checkout, the binary, the maker's `HOME` or
//! directory.

use std::path::{Path, PathBuf};
use std::process::Command;

fn new(lang: &str, name: &str, dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["new", "--lang", lang, name, "--dir"])
        .arg(dir)
        .output()
        .unwrap()
}

/// The source checkout this test runs from.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// This user's `$HOME`-derived directory `var`, else `$HOME/default`: kept
/// for the build under another `HOME` (the toolchains, installed once).
fn home_dir_of(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(default))
}

/// Scaffolds `lang` under one `HOME` and directory, moves it, runs its
/// build.sh under another, and checks that the setter's label is in the
/// diff that `once --strict` printed. With `new_kit`, its `nodestatus-kit/`
/// is removed and written again by `nodestatus kit`, as its README says to
/// move to a newer SDK.
fn scaffold_builds_anywhere(lang: &str, new_kit: bool) {
    let maker = tempfile::tempdir().unwrap();
    let maker_home = maker.path().join("home-of-the-maker");
    std::fs::create_dir(&maker_home).unwrap();
    let name = format!("hello-{lang}");
    let out = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["new", "--lang", lang, &name, "--dir"])
        .arg(maker.path())
        .env("HOME", &maker_home)
        .env_remove("NODESTATUS_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The maker's HOME got nothing: the setter's directory is all there is.
    assert_eq!(std::fs::read_dir(&maker_home).unwrap().count(), 0);
    let made = maker.path().join(&name);
    let forbidden = [
        checkout(),
        maker.path().to_owned(),
        maker.path().canonicalize().unwrap(),
        PathBuf::from(env!("CARGO_BIN_EXE_nodestatus")),
        PathBuf::from(std::env::var_os("HOME").unwrap()),
    ];
    for path in files_under(&made) {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        for f in &forbidden {
            assert!(
                !text.contains(f.to_str().unwrap()),
                "{} names {}, a path of the machine that made it:\n{text}",
                path.display(),
                f.display()
            );
        }
    }
    let kit = std::fs::read_to_string(made.join("nodestatus-kit/VERSION")).unwrap();
    assert!(kit.contains(&format!("({lang})")), "{kit}");
    // The grant: in config.yaml, which the build runs with, and in the README.
    let grant = format!("plugins:\n  {name}:\n    paths: [/proc/sys/kernel]\n");
    let config = std::fs::read_to_string(made.join("config.yaml")).unwrap();
    assert!(config.ends_with(&grant), "{config}");
    let readme = std::fs::read_to_string(made.join("README.md")).unwrap();
    assert!(readme.contains(&grant), "{readme}");

    // Elsewhere: another directory, another HOME, the maker's directory gone.
    let elsewhere = tempfile::tempdir().unwrap();
    let dir = elsewhere.path().join("vendor-ci").join(&name);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    std::fs::rename(&made, &dir).unwrap();
    drop(maker);
    let home = elsewhere.path().join("home-of-the-ci");
    let bin = elsewhere.path().join("bin");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_nodestatus"), bin.join("nodestatus")).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    if new_kit {
        std::fs::remove_dir_all(dir.join("nodestatus-kit")).unwrap();
        let wrote = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args(["kit", "--lang", lang, "nodestatus-kit"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(wrote.status.success(), "{wrote:?}");
    }
    let build = Command::new(dir.join("build.sh"))
        .current_dir(elsewhere.path())
        .env_remove("NODESTATUS")
        .env("PATH", path)
        .env("HOME", &home)
        // The toolchains, installed once for every run (not what the
        // setter is built from).
        .env(
            "NODESTATUS_CACHE",
            home_dir_of("NODESTATUS_CACHE", ".cache/nodestatus"),
        )
        .env("CARGO_HOME", home_dir_of("CARGO_HOME", ".cargo"))
        .env("RUSTUP_HOME", home_dir_of("RUSTUP_HOME", ".rustup"))
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
    // `plugin check` ran under config.yaml: nothing the setter asks for is
    // withheld.
    assert!(!stdout.contains("withheld\": [\""), "{lang}: {stdout}");
    assert!(dir.join("dist").join(format!("{name}.wasm")).is_file());
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

/// Without a `nodestatus` on `PATH` or in `$NODESTATUS`, build.sh says what
/// to do.
#[test]
fn a_new_setters_build_says_where_nodestatus_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(new("c", "lonely", tmp.path()).status.success());
    let build = Command::new("bash")
        .arg(tmp.path().join("lonely/build.sh"))
        .env_remove("NODESTATUS")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(build.status.code(), Some(127), "{build:?}");
    assert!(String::from_utf8_lossy(&build.stderr).contains("install nodestatus"));
}

/// `nodestatus kit` writes one language's kit, or every language's, and
/// never into a directory that holds something.
#[test]
fn kit_writes_one_language_or_all_into_a_new_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let kit = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .arg("kit")
            .args(args)
            .current_dir(tmp.path())
            .output()
            .unwrap()
    };
    assert!(kit(&["--lang", "python", "py"]).status.success());
    let py = tmp.path().join("py");
    assert!(py.join("sdk/python").is_dir());
    assert!(py.join("wit").is_dir());
    assert!(py.join("scripts/guests/new-setter.sh").is_file());
    assert!(!py.join("sdk/js").exists() && !py.join("sdk/src").exists());
    assert!(kit(&["--lang", "rust", "rs"]).status.success());
    let rs = tmp.path().join("rs");
    assert!(rs.join("sdk/Cargo.toml").is_file() && rs.join("crates/apimachinery").is_dir());
    assert!(!rs.join("sdk/python").exists() && !rs.join("sdk/c").exists());
    assert!(kit(&["all"]).status.success());
    assert!(tmp.path().join("all/sdk/js").is_dir() && tmp.path().join("all/sdk/c").is_dir());
    let again = kit(&["all"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not empty"));
}

#[test]
fn a_new_rust_setter_builds_and_passes() {
    scaffold_builds_anywhere("rust", false);
}

#[test]
fn a_new_python_setter_builds_and_passes() {
    scaffold_builds_anywhere("python", false);
}

#[test]
fn a_new_js_setter_builds_and_passes() {
    scaffold_builds_anywhere("js", false);
}

#[test]
fn a_new_c_setter_builds_and_passes() {
    scaffold_builds_anywhere("c", true);
}

#[test]
fn a_new_go_setter_builds_and_passes() {
    scaffold_builds_anywhere("go", true);
}

#[test]
fn new_refuses_a_bad_name_and_an_existing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = new("rust", "Bad_Name", tmp.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a plugin name"));
    std::fs::create_dir(tmp.path().join("taken")).unwrap();
    let out = new("js", "taken", tmp.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    // Nothing half-made is left beside them.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["taken"]);
}
