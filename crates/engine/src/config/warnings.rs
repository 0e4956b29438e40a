//! What is valid but probably not meant ([`Config::warnings`]).

use std::path::Path;

use super::Config;
use super::plugins::{PROTECTED_PATHS, protected_why};

/// Something in a valid config that is probably not what the operator
/// meant. `config check` prints these and `run` logs them at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The field, as it is written in the file.
    pub field: String,
    /// What is odd, and what to do.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl Config {
    /// What is valid but probably not meant:
    /// - a `plugins` section whose `<name>.wasm` is not in the plugin
    ///   directory (a warning, not an error: a file dropped later is loaded
    ///   then, and one config serves nodes with different plugin sets);
    /// - a granted directory that holds one of [`PROTECTED_PATHS`] that
    ///   exists on this machine (the plugin can read it through the grant).
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out = Vec::new();
        match std::fs::read_dir(&self.plugin_dir) {
            Err(e) => out.push(Warning {
                field: "pluginDir".into(),
                message: format!(
                    "{}: {e}; plugins dropped there later are loaded then",
                    self.plugin_dir.display()
                ),
            }),
            Ok(_) => {
                for name in self.plugins.keys() {
                    if !self.plugin_dir.join(format!("{name}.wasm")).is_file() {
                        out.push(Warning {
                            field: format!("plugins.{name}"),
                            message: format!(
                                "no {name}.wasm in {}: this section applies once that plugin is dropped there; check the spelling",
                                self.plugin_dir.display()
                            ),
                        });
                    }
                }
            }
        }
        for (name, s) in &self.plugins {
            for (i, g) in s.sandbox.paths.iter().enumerate() {
                for p in PROTECTED_PATHS.iter().filter(|p| !p.starts_with("/proc")) {
                    let p = Path::new(p);
                    if p.starts_with(&g.from) && p.exists() {
                        out.push(Warning {
                            field: format!("plugins.{name}.paths[{i}]"),
                            message: format!(
                                "{} holds {} ({}), which the plugin can read through this grant: grant a narrower directory, or map an empty directory on the same filesystem for statvfs ({{path: {}, from: <empty dir>}})",
                                g.from.display(),
                                p.display(),
                                protected_why(&p.to_string_lossy()),
                                g.path.display()
                            ),
                        });
                    }
                }
            }
        }
        out
    }
}
