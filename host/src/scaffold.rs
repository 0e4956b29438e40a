//! `nodestatus new`: a new setter's directory, in Rust, Python, JavaScript,
//! C or Go, that builds, tests and passes `plugin check` and `once --strict` with
//! one command (`./build.sh`). The templates are in `host/templates/`.
//!
//! The directory is whole: the SDK of its language, the WIT and the build
//! scripts that this binary carries (the *kit*, [`KIT_FILES`]) are written
//! into its `nodestatus-kit/` ([`write_kit`]), and every file names them by a
//! path relative to the setter. Nothing in it names the machine that made
//! it (no cache, no home, no checkout), so the directory is committed as it
//! is and builds in a vendor's CI, under any path and any `HOME`, with the
//! language's toolchain and a `nodestatus` on `PATH` (or `$NODESTATUS`).
//! `nodestatus kit --lang L DIR` writes a newer binary's kit.
//!
//! The example setter reads a file, as most setters do, and asks for its
//! directory; `config.yaml` beside it holds the engine's section that grants
//! it, which `build.sh` runs the setter with and the README shows.

use std::path::{Path, PathBuf};

/// A language of `nodestatus new`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, with `sdk/` (cargo, wasm32-wasip2).
    Rust,
    /// Python, with `sdk/python` (componentize-py).
    Python,
    /// JavaScript, with `sdk/js` (componentize-js).
    Js,
    /// C, with `sdk/c` (clang and wasi-libc).
    C,
    /// Go, with `sdk/go` (Go for WASI, wasm-tools).
    Go,
}

/// Why no setter was made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The name is not a plugin name.
    #[error(
        "{0:?} is not a plugin name: use lowercase letters, digits and '-', starting with a letter, at most 63 characters"
    )]
    BadName(String),
    /// The directory exists.
    #[error("{} already exists: choose another name or --dir, nothing was written", .0.display())]
    Exists(PathBuf),
    /// The kit's directory is not empty.
    #[error("{} is not empty: `nodestatus kit` writes into a new directory (remove the old kit first)", .0.display())]
    KitExists(PathBuf),
    /// Writing failed.
    #[error("cannot write {}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The files of each language: path in the new directory, template text.
fn files(lang: Lang) -> &'static [(&'static str, &'static str)] {
    macro_rules! t {
        ($($path:literal => $file:literal),* $(,)?) => {
            &[$(($path, include_str!(concat!("../templates/", $file)))),*]
        };
    }
    match lang {
        Lang::Rust => t!(
            "Cargo.toml" => "rust/Cargo.toml",
            "src/lib.rs" => "rust/src/lib.rs",
            "build.sh" => "build.sh",
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
            ".gitignore" => "gitignore",
        ),
        Lang::Python => t!(
            "app.py" => "python/app.py",
            "test_app.py" => "python/test_app.py",
            "build.sh" => "build.sh",
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
            ".gitignore" => "gitignore",
        ),
        Lang::Js => t!(
            "setter.js" => "js/setter.js",
            "setter.test.js" => "js/setter.test.js",
            "build.sh" => "build.sh",
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
            ".gitignore" => "gitignore",
        ),
        Lang::C => t!(
            "setter.c" => "c/setter.c",
            "test_setter.c" => "c/test_setter.c",
            "build.sh" => "build.sh",
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
            ".gitignore" => "gitignore",
        ),
        Lang::Go => t!(
            "go.mod" => "go/go.mod",
            "main.go" => "go/main.go",
            "main_test.go" => "go/main_test.go",
            "build.sh" => "build.sh",
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
            ".gitignore" => "gitignore",
        ),
    }
}

mod kit {
    include!(concat!(env!("OUT_DIR"), "/kit.rs"));
}
pub use kit::{KIT_FILES, KIT_ID};

/// The directory of a new setter that holds its kit.
pub const KIT_DIR: &str = "nodestatus-kit";

/// The directory the example setter reads, and its file.
pub const EXAMPLE_GRANT: &str = "/proc/sys/kernel";

impl Lang {
    /// The name `new-setter.sh` and `--lang` know it by.
    pub fn id(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::C => "c",
            Lang::Go => "go",
        }
    }

    /// How its build.sh builds, for the script's header.
    fn how(self) -> &'static str {
        match self {
            Lang::Rust => "with cargo (after its native tests)",
            Lang::Python => "with componentize-py (after its unit tests)",
            Lang::Js => "with componentize-js (after its unit tests)",
            Lang::C => "with clang and wasi-libc (after its native tests)",
            Lang::Go => "with Go for WASI and wasm-tools (after its tests)",
        }
    }

    fn display(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
            Lang::C => "C",
            Lang::Go => "Go",
        }
    }

    /// Whether the kit's file `rel` is part of this language's kit: the
    /// WIT, the build scripts and the shared test vectors for all, and the
    /// language's own SDK (for Rust, the SDK crate and the crate it depends
    /// on).
    fn needs(self, rel: &str) -> bool {
        const SHARED: &[&str] = &["wit/", "scripts/guests/", "sdk/conformance/"];
        const OTHERS: &[&str] = &["sdk/c/", "sdk/go/", "sdk/js/", "sdk/python/"];
        let own: &[&str] = match self {
            Lang::Rust => &["sdk/", "crates/apimachinery/"],
            Lang::Python => &["sdk/python/"],
            Lang::Js => &["sdk/js/"],
            Lang::C => &["sdk/c/"],
            Lang::Go => &["sdk/go/"],
        };
        SHARED.iter().any(|p| rel.starts_with(p))
            || (own.iter().any(|p| rel.starts_with(p))
                && (self != Lang::Rust || !OTHERS.iter().any(|p| rel.starts_with(p))))
    }
}

/// Writes the kit that this binary carries into `dir`, which must not
/// exist or be empty: every language's (`None`), or one language's. A
/// `VERSION` file says which binary's kit it is.
pub fn write_kit(dir: &Path, lang: Option<Lang>) -> Result<PathBuf, Error> {
    let non_empty = std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some());
    if non_empty {
        return Err(Error::KitExists(dir.to_owned()));
    }
    let version = format!(
        "nodestatus {} kit {KIT_ID} ({})\n",
        env!("CARGO_PKG_VERSION"),
        lang.map_or("every language", Lang::id),
    );
    let files = KIT_FILES
        .iter()
        .filter(|(rel, _, _)| lang.is_none_or(|l| l.needs(rel)))
        .map(|(rel, bytes, executable)| (*rel, *bytes, *executable))
        .chain([("VERSION", version.as_bytes(), false)]);
    for (rel, bytes, executable) in files {
        write_file(&dir.join(rel), bytes, executable)?;
    }
    Ok(dir.to_owned())
}

/// Writes `bytes` to `path`, with its directories; `executable`: mode 755.
fn write_file(path: &Path, bytes: &[u8], executable: bool) -> Result<(), Error> {
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
        std::fs::write(path, bytes)?;
        if executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(())
    };
    write().map_err(|source| Error::Write {
        path: path.to_owned(),
        source,
    })
}

/// Writes a new setter `name` in `lang` into `parent/name`, with its kit in
/// [`KIT_DIR`]. The directory is written whole beside its place and renamed
/// into it, so that a failure leaves nothing behind. Returns the new
/// directory.
pub fn create(lang: Lang, name: &str, parent: &Path) -> Result<PathBuf, Error> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(Error::BadName(name.to_owned()));
    }
    let dir = parent.join(name);
    if dir.exists() {
        return Err(Error::Exists(dir));
    }
    let io = |source| Error::Write {
        path: dir.clone(),
        source,
    };
    let stage = tempfile::Builder::new()
        .prefix(&format!(".{name}-"))
        .tempdir_in(parent)
        .map_err(io)?;
    for (path, text) in files(lang) {
        let text = text
            .replace("{{name}}", name)
            .replace("{{lang}}", lang.display())
            .replace("{{lang_id}}", lang.id())
            .replace("{{how}}", lang.how())
            .replace("{{kit}}", KIT_DIR)
            .replace("{{grant}}", EXAMPLE_GRANT);
        write_file(
            &stage.path().join(path),
            text.as_bytes(),
            path.ends_with(".sh"),
        )?;
    }
    write_kit(&stage.path().join(KIT_DIR), Some(lang))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(stage.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(io)?;
    }
    // Not `persist`: a directory that appeared meanwhile is not replaced.
    if dir.exists() {
        return Err(Error::Exists(dir));
    }
    std::fs::rename(stage.path(), &dir).map_err(io)?;
    // The staging directory is renamed: nothing is left to remove.
    let _ = stage.keep();
    Ok(dir)
}
