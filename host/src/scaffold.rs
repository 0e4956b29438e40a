//! `nodestatus new`: a new setter's directory, in Rust, Python, JavaScript or
//! C, that builds, tests and passes `plugin check` and `once --strict` with
//! one command (`./build.sh`). The templates are in `host/templates/`.
//!
//! The SDKs, the WIT and the build scripts come with the binary: the *kit*
//! ([`write_kit`]), written into the cache on `new` and again by `build.sh`
//! (`nodestatus kit`) if the cache was cleared, so that the binary alone,
//! without the source checkout, makes setters that build. `--sdk CHECKOUT`
//! uses a checkout's instead.
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
        "no nodestatus checkout or kit at {}: give --sdk <a nodestatus repository, or a directory written by `nodestatus kit`> (it holds sdk/, wit/ and scripts/guests/), or leave --sdk out to use the kit this binary carries",
        .0.display()
    )]
    NoSdk(PathBuf),
    /// The kit could not be written.
    #[error("cannot write the setter kit into {}", .path.display())]
    Kit {
        /// The kit's directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
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
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
        ),
        Lang::Python => t!(
            "app.py" => "python/app.py",
            "test_app.py" => "python/test_app.py",
            "build.sh" => "python/build.sh",
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
        ),
        Lang::Js => t!(
            "setter.js" => "js/setter.js",
            "setter.test.js" => "js/setter.test.js",
            "build.sh" => "js/build.sh",
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
        ),
        Lang::C => t!(
            "setter.c" => "c/setter.c",
            "test_setter.c" => "c/test_setter.c",
            "build.sh" => "c/build.sh",
            "config.yaml" => "config.yaml",
            "README.md" => "README.md",
        ),
    }
}

mod kit {
    include!(concat!(env!("OUT_DIR"), "/kit.rs"));
}
pub use kit::KIT_ID;

/// The directory the example setter reads, and its file.
pub const EXAMPLE_GRANT: &str = "/proc/sys/kernel";

/// Where [`write_kit`] puts this binary's kit by default:
/// `$NODESTATUS_CACHE/kit/<id>`, else `$XDG_CACHE_HOME/nodestatus/kit/<id>`,
/// else `~/.cache/nodestatus/kit/<id>`.
pub fn default_kit_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("NODESTATUS_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("nodestatus")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/nodestatus")))
        .unwrap_or_else(|| PathBuf::from("/var/cache/nodestatus"))
        .join("kit")
        .join(KIT_ID)
}

/// Whether `dir` holds the SDKs, the WIT and the build scripts: a kit, or a
/// nodestatus checkout.
fn is_kit(dir: &Path) -> bool {
    dir.join("sdk").is_dir()
        && dir.join("wit").is_dir()
        && dir.join("scripts/guests/new-setter.sh").is_file()
}

/// Writes the kit that this binary carries (the SDKs of every language, the
/// WIT, the guest build scripts) into `dir`, unless `dir` already holds a
/// kit or a checkout. A new directory is written whole beside it and renamed
/// into place, so that two writers never leave half a kit. Returns `dir`.
pub fn write_kit(dir: &Path) -> Result<PathBuf, Error> {
    if is_kit(dir) {
        return Ok(dir.to_owned());
    }
    let err = |source| Error::Kit {
        path: dir.to_owned(),
        source,
    };
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(err)?;
    let fresh = !dir.exists();
    let stage = if fresh {
        tempfile::Builder::new()
            .prefix(".kit-")
            .tempdir_in(parent)
            .map_err(err)?
            .keep()
    } else {
        dir.to_owned()
    };
    for (rel, bytes, executable) in kit::KIT_FILES {
        let out = stage.join(rel);
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(out.parent().expect("a file in the kit"))?;
            std::fs::write(&out, bytes)?;
            if *executable {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755))?;
            }
            Ok(())
        };
        write().map_err(err)?;
    }
    if fresh && let Err(e) = std::fs::rename(&stage, dir) {
        let _ = std::fs::remove_dir_all(&stage);
        // Another writer got there first.
        if !is_kit(dir) {
            return Err(err(e));
        }
    }
    Ok(dir.to_owned())
}

/// Writes a new setter `name` in `lang` into `parent/name`, using the SDK
/// checkout `sdk` (else this binary's kit, written into the cache), with
/// `nodestatus` as the binary its build script runs. Returns the new
/// directory.
pub fn create(
    lang: Lang,
    name: &str,
    parent: &Path,
    sdk: Option<&Path>,
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
    let dir = parent.join(name);
    if dir.exists() {
        return Err(Error::Exists(dir));
    }
    let sdk = match sdk {
        Some(sdk) => sdk
            .canonicalize()
            .ok()
            .filter(|p| is_kit(p))
            .ok_or_else(|| Error::NoSdk(sdk.to_owned()))?,
        None => write_kit(&default_kit_dir())?,
    };
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
            .replace("{{nodestatus}}", &nodestatus.to_string_lossy())
            .replace("{{grant}}", EXAMPLE_GRANT);
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
