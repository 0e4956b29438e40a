//! `nodestatus new`: a new setter from a template ([`crate::scaffold`]).

use std::path::PathBuf;
use std::process::ExitCode;

/// Start a new setter: a directory that builds, tests and checks it with
/// one command (`./build.sh`).
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
    /// A nodestatus checkout whose SDK and build scripts it uses (default:
    /// the ones this binary carries, written into the cache; see `nodestatus
    /// kit`).
    #[arg(long)]
    sdk: Option<PathBuf>,
}

impl Args {
    /// Writes the new setter's directory.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        let exe = std::env::current_exe()?;
        let made =
            crate::scaffold::create(self.lang, &self.name, &self.dir, self.sdk.as_deref(), &exe)?;
        println!(
            "created {}: build, test and check it with {}/build.sh",
            made.display(),
            made.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}

/// Write the SDKs, the WIT and the build scripts that the setters of
/// `nodestatus new` build with, and print where (their `build.sh` runs it).
#[derive(clap::Args)]
pub struct KitArgs {
    /// Where (default: the cache). Nothing is written where a kit or a
    /// nodestatus checkout already is.
    dir: Option<PathBuf>,
}

impl KitArgs {
    /// Writes the kit.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        let dir = self.dir.unwrap_or_else(crate::scaffold::default_kit_dir);
        println!("{}", crate::scaffold::write_kit(&dir)?.display());
        Ok(ExitCode::SUCCESS)
    }
}
