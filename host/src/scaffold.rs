//! `nodestatus new`: a new setter's directory, in Rust, Python, JavaScript or
//! C, that builds, tests and passes `plugin check` and `once --strict` with
//! one command (`./build.sh`). The templates are in `host/templates/`; the
//! SDKs and build scripts are this repository's (or `--sdk`'s).

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
    /// No SDK checkout was found.
    #[error(
        "no nodestatus checkout at {}: give --sdk <the path of a nodestatus repository> (it holds sdk/, wit/ and scripts/)",
        .0.display()
    )]
    NoSdk(PathBuf),
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
            "build.sh" => "rust/build.sh",
            "README.md" => "README.md",
        ),
        Lang::Python => t!(
            "app.py" => "python/app.py",
            "test_app.py" => "python/test_app.py",
            "build.sh" => "python/build.sh",
            "README.md" => "README.md",
        ),
        Lang::Js => t!(
            "setter.js" => "js/setter.js",
            "setter.test.js" => "js/setter.test.js",
            "build.sh" => "js/build.sh",
            "README.md" => "README.md",
        ),
        Lang::C => t!(
            "setter.c" => "c/setter.c",
            "test_setter.c" => "c/test_setter.c",
            "build.sh" => "c/build.sh",
            "README.md" => "README.md",
        ),
    }
}

/// The repository this binary was built from, if it is still there.
pub fn default_sdk() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Writes a new setter `name` in `lang` into `parent/name`, using the SDK
/// checkout `sdk`, with `nodestatus` as the binary its build script runs.
/// Returns the new directory.
pub fn create(
    lang: Lang,
    name: &str,
    parent: &Path,
    sdk: &Path,
    nodestatus: &Path,
) -> Result<PathBuf, Error> {
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
    let sdk = sdk
        .canonicalize()
        .ok()
        .filter(|p| p.join("sdk").is_dir() && p.join("wit").is_dir())
        .ok_or_else(|| Error::NoSdk(sdk.to_owned()))?;
    let dir = parent.join(name);
    if dir.exists() {
        return Err(Error::Exists(dir));
    }
    let lang_name = match lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
        Lang::C => "C",
    };
    for (path, text) in files(lang) {
        let out = dir.join(path);
        let text = text
            .replace("{{name}}", name)
            .replace("{{lang}}", lang_name)
            .replace("{{repo}}", &sdk.to_string_lossy())
            .replace("{{nodestatus}}", &nodestatus.to_string_lossy());
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(out.parent().expect("a file in the new directory"))?;
            std::fs::write(&out, text)?;
            if path.ends_with(".sh") {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755))?;
            }
            Ok(())
        };
        write().map_err(|source| Error::Write {
            path: out.clone(),
            source,
        })?;
    }
    Ok(dir)
}
