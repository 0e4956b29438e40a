//! `nodestatus new`: a new setter from a template ([`crate::scaffold`]).

use std::path::PathBuf;
use std::process::ExitCode;

/// Start a new setter: a directory that builds, tests and checks it with
/// one command (`./build.sh`), with the SDK of its language in
/// `nodestatus-kit/`, so that it builds wherever it is copied or committed.
#[derive(clap::Args)]
pub struct Args {
    /// The language.
    #[arg(long, value_enum)]
    lang: crate::scaffold::Lang,
    /// The plugin's name (lowercase letters, digits and '-'); also the new
    /// directory's.
    name: String,
    /// Where to create it (default: the current directory).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
}

impl Args {
    /// Writes the new setter's directory.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        let made = crate::scaffold::create(self.lang, &self.name, &self.dir)?;
        println!(
            "created {}: build, test and check it with {}/build.sh (nodestatus on PATH, or NODESTATUS=...)",
            made.display(),
            made.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}

/// Write the SDK, the WIT and the build scripts that this binary carries
/// (what `nodestatus new` puts in a setter's `nodestatus-kit/`) into a new
/// directory, and print it: to move a setter to this binary's SDK, remove
/// its `nodestatus-kit/` and write it again.
#[derive(clap::Args)]
pub struct KitArgs {
    /// The directory (it must not exist, or be empty).
    dir: PathBuf,
    /// Only this language's SDK (default: every language's).
    #[arg(long, value_enum)]
    lang: Option<crate::scaffold::Lang>,
}

impl KitArgs {
    /// Writes the kit.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        let dir = crate::scaffold::write_kit(&self.dir, self.lang)?;
        println!("{}", dir.display());
        Ok(ExitCode::SUCCESS)
    }
}
