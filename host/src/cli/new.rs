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
    /// The nodestatus checkout whose SDK and build scripts it uses
    /// (default: the one this binary was built from).
    #[arg(long)]
    sdk: Option<PathBuf>,
}

impl Args {
    /// Writes the new setter's directory.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        let sdk = self.sdk.unwrap_or_else(crate::scaffold::default_sdk);
        let exe = std::env::current_exe()?;
        let made = crate::scaffold::create(self.lang, &self.name, &self.dir, &sdk, &exe)?;
        println!(
            "created {}: build, test and check it with {}/build.sh",
            made.display(),
            made.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}
