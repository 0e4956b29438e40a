//! Embeds the setter kit: what a setter made by `nodestatus new` builds
//! with (the SDKs of every language, the WIT, and the guest build scripts),
//! so that a binary without the source checkout can write it out
//! (`nodestatus kit`, [`nodestatus::scaffold`]).
//!
//! Writes `$OUT_DIR/kit.rs`: `KIT_FILES` (path in the kit, bytes, whether
//! it is executable) and `KIT_ID` (the package version and a hash of the
//! files, the name of the kit's directory in the cache).

use std::fmt::Write as _;
use std::hash::Hasher;
use std::path::{Path, PathBuf};

/// What is never part of the kit: build outputs and installed modules.
fn skipped(name: &str) -> bool {
    matches!(name, "node_modules" | "__pycache__" | "target") || name.ends_with(".pyc")
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.join(rel).display()))
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if skipped(&name) {
            continue;
        }
        let path = rel.join(&name);
        if e.file_type().unwrap().is_dir() {
            walk(root, &path, out);
        } else {
            out.push(path);
        }
    }
}

/// The crates of this workspace that the kit carries, so that a Rust
/// setter builds outside it: the SDK and what it depends on.
const KIT_CRATES: &[&str] = &["sdk", "crates/apimachinery"];

/// `<member>/Cargo.toml` with each `x.workspace = true` replaced by the
/// workspace's value (a `path` made relative to the member), so that the
/// crate builds outside this workspace.
fn standalone_manifest(repo: &Path, member: &str) -> String {
    let sdk = std::fs::read_to_string(repo.join(member).join("Cargo.toml")).unwrap();
    let up = "../".repeat(Path::new(member).components().count());
    let workspace = std::fs::read_to_string(repo.join("Cargo.toml")).unwrap();
    let value_of = |key: &str| -> String {
        workspace
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no `{key} = ...` in the workspace's Cargo.toml"))
    };
    let mut out = String::new();
    // The workspace's lints are this repository's business, not a
    // vendor's build: `[lints] workspace = true` is left out.
    let sdk = sdk.replace("[lints]\nworkspace = true\n", "");
    for line in sdk.lines() {
        match line.trim().strip_suffix(".workspace = true") {
            Some(key) => writeln!(
                out,
                "{key} = {}",
                value_of(key).replace("path = \"", &format!("path = \"{up}"))
            )
            .unwrap(),
            None => writeln!(out, "{line}").unwrap(),
        }
    }
    out
}

fn main() {
    let host = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let repo = host.parent().unwrap().to_owned();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let mut files = Vec::new();
    for dir in ["wit", "scripts/guests"].iter().chain(KIT_CRATES) {
        println!("cargo:rerun-if-changed={}", repo.join(dir).display());
        walk(&repo, Path::new(dir), &mut files);
    }
    println!(
        "cargo:rerun-if-changed={}",
        repo.join("Cargo.toml").display()
    );
    let mut manifests = std::collections::HashMap::new();
    for member in KIT_CRATES {
        let manifest = out_dir.join(format!("{}-Cargo.toml", member.replace('/', "-")));
        std::fs::write(&manifest, standalone_manifest(&repo, member)).unwrap();
        manifests.insert(Path::new(member).join("Cargo.toml"), manifest);
    }

    let mut hash = std::collections::hash_map::DefaultHasher::new();
    let mut rs = String::from("/// The kit's files: path, bytes, executable.\n");
    rs.push_str("pub const KIT_FILES: &[(&str, &[u8], bool)] = &[\n");
    for rel in &files {
        let source = manifests
            .get(rel)
            .cloned()
            .unwrap_or_else(|| repo.join(rel));
        let bytes = std::fs::read(&source).unwrap();
        let rel = rel.to_str().expect("a UTF-8 path");
        hash.write(rel.as_bytes());
        hash.write(&bytes);
        let executable = rel.ends_with(".sh");
        writeln!(
            rs,
            "    ({rel:?}, include_bytes!({:?}), {executable}),",
            source.display().to_string()
        )
        .unwrap();
    }
    rs.push_str("];\n");
    writeln!(
        rs,
        "/// The kit's name: the version and a hash of its files.\npub const KIT_ID: &str = \"{}-{:016x}\";",
        std::env::var("CARGO_PKG_VERSION").unwrap(),
        hash.finish()
    )
    .unwrap();
    std::fs::write(out_dir.join("kit.rs"), rs).unwrap();
}
