//! What is valid but probably not meant ([`Config::warnings`]).

use std::path::Path;

use nodestatus_runtime::PathGrant;

use super::parse::distance;
use super::plugins::{PROTECTED_PATHS, protected_why};
use super::{Config, ConfigFile, DEFAULT_CONFIG};

/// Something in a valid config that is probably not what the operator
/// meant. `config check` prints these and `run` logs them at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The field, as it is written in the file.
    pub field: String,
    /// What is odd, and what to do.
    pub message: String,
    /// How loud `run` says it.
    pub severity: Severity,
}

/// How loud a [`Warning`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Probably a mistake: `run` logs it at WARN.
    Warning,
    /// Valid and handled by a running engine (a section for a plugin that
    /// is not in the directory now, kept for one dropped later or left
    /// from one deleted): `run` logs it at INFO; `config check` prints it.
    Notice,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The names of the bundled setters: the plugin sections of
/// [`DEFAULT_CONFIG`].
pub fn bundled_plugin_names() -> Vec<String> {
    ConfigFile::parse(DEFAULT_CONFIG, Path::new("(embedded default config)"))
        .map(|c| c.plugins.into_keys().collect())
        .unwrap_or_default()
}

/// The plugin names of the `*.wasm` files in `dir`.
pub fn plugin_names_in(dir: &Path) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            if p.extension()? != "wasm" {
                return None;
            }
            Some(p.file_stem()?.to_string_lossy().into_owned())
        })
        .collect())
}

/// The warnings for grant `g` (`plugins.<name>.paths[i]`) that holds one of
/// [`PROTECTED_PATHS`] for which `exists` holds: the plugin could read it
/// through the grant. A directory that holds the host's `/proc` (`/` on a
/// host) serves `statvfs` only, never its files
/// ([`nodestatus_runtime::proc_view`]): it exposes nothing, and gets none.
pub(super) fn exposed_protected_paths(
    name: &str,
    i: usize,
    g: &PathGrant,
    exists: &dyn Fn(&Path) -> bool,
) -> Vec<Warning> {
    use nodestatus_runtime::proc_view::{ProcGrant, classify};
    if classify(&g.from) == ProcGrant::HoldsProc {
        return Vec::new();
    }
    PROTECTED_PATHS
        .iter()
        .filter(|p| !p.starts_with("/proc"))
        .map(Path::new)
        .filter(|p| p.starts_with(&g.from) && exists(p))
        .map(|p| Warning {
            severity: Severity::Warning,
            field: format!("plugins.{name}.paths[{i}]"),
            message: format!(
                "{} holds {} ({}), which the plugin can read through this grant: grant a narrower directory, or map an empty directory on the same filesystem for statvfs ({{path: {}, from: <empty dir>}})",
                g.from.display(),
                p.display(),
                protected_why(&p.to_string_lossy()),
                g.path.display()
            ),
        })
        .collect()
}

impl Config {
    /// What is valid but probably not meant:
    /// - a `plugins` section named like no plugin but close to one
    ///   ([`Config::misspelled_plugins`]), with "did you mean";
    /// - a `plugins` section whose `<name>.wasm` is not in the plugin
    ///   directory (a [`Severity::Notice`], not an error: a file dropped
    ///   later is loaded then, one config serves nodes with different
    ///   plugin sets, and a deleted setter may leave its section);
    /// - a granted directory that holds one of [`PROTECTED_PATHS`] that
    ///   exists on this machine (the plugin can read it through the grant);
    /// - a `pullInterval` set on a tag that `pullPolicy: IfNotPresent`
    ///   resolves once (it then only bounds the retries).
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out = Vec::new();
        let present = plugin_names_in(&self.plugin_dir);
        // A section named like no plugin here and no bundled setter, but
        // close to one of them: a typo, said whether or not the directory
        // exists (`config check` runs where it may not).
        out.extend(self.misspelled_plugins(present.as_ref().ok().into_iter().flatten()));
        let misspelled: std::collections::BTreeSet<String> =
            out.iter().map(|w| w.field.clone()).collect();
        match present {
            Err(e) => out.push(Warning {
                severity: Severity::Warning,
                field: "pluginDir".into(),
                message: format!(
                    "{}: {e}; plugins dropped there later are loaded then (a run given --plugin-dir loads that directory instead: give it here too)",
                    self.plugin_dir.display()
                ),
            }),
            Ok(_) => {
                for (name, p) in &self.plugins {
                    if misspelled.contains(&format!("plugins.{name}")) {
                        continue;
                    }
                    if p.image.is_none() && !self.plugin_dir.join(format!("{name}.wasm")).is_file()
                    {
                        out.push(Warning {
                            severity: Severity::Notice,
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
        for (name, p) in &self.plugins {
            let Some(image) = &p.image else { continue };
            // A pullInterval other than the default on a tag that is
            // resolved once: written for a re-resolution that never comes.
            if !image.reference.is_pinned()
                && image.pull_policy == super::PullPolicy::IfNotPresent
                && image.pull_interval != super::DEFAULT_PULL_INTERVAL
            {
                out.push(Warning {
                    severity: Severity::Warning,
                    field: format!("plugins.{name}.pullInterval"),
                    message: format!(
                        "{} is resolved once with pullPolicy IfNotPresent (the default for a tag other than latest), so pullInterval only bounds the retries after a failure: add pullPolicy: Always to resolve the tag every {:?}",
                        image.reference, image.pull_interval
                    ),
                });
            }
        }
        for (name, s) in &self.plugins {
            for (i, g) in s.sandbox.paths.iter().enumerate() {
                out.extend(exposed_protected_paths(name, i, g, &|p| p.exists()));
            }
            // `stateless` speaks of a kept instance: a fresh one per call
            // carries nothing anyway.
            if s.sandbox.stateless && !s.sandbox.reuse_instance {
                out.push(Warning {
                    severity: Severity::Warning,
                    field: format!("plugins.{name}.stateless"),
                    message: "has no effect without reuseInstance: true (a fresh instance per call carries nothing from one call to the next, and its calls are skipped as they are)".into(),
                });
            }
        }
        out
    }

    /// The `plugins` sections whose name is no plugin in `present` (the
    /// plugin names of a directory) nor a bundled setter
    /// ([`bundled_plugin_names`]), but close to one of them: each with "did
    /// you mean". A section for a plugin not dropped yet, with a name unlike
    /// every known one, is not a typo and gets no warning here.
    pub fn misspelled_plugins<S: AsRef<str>>(
        &self,
        present: impl IntoIterator<Item = S>,
    ) -> Vec<Warning> {
        let mut known: Vec<String> = present.into_iter().map(|s| s.as_ref().to_owned()).collect();
        known.extend(bundled_plugin_names());
        known.sort();
        known.dedup();
        // Closer than `closest` allows for field names: plugin names are
        // short and alike (`reader` is no typo of `ready`), so one edit in
        // four characters at most (one in a name of up to 7).
        let typo_of = |name: &str| {
            known
                .iter()
                .map(|k| (distance(name, k), k))
                .min()
                .filter(|(d, k)| *d <= (k.len() / 4).max(1))
                .map(|(_, k)| k.clone())
        };
        self.plugins
            .keys()
            .filter(|name| !known.contains(*name))
            .filter_map(|name| {
                typo_of(name).map(|c| Warning {
                    severity: Severity::Warning,
                    field: format!("plugins.{name}"),
                    message: format!(
                        "no plugin is named {name} (did you mean `{c}`?): this section applies to nothing until a {name}.wasm is loaded"
                    ),
                })
            })
            .collect()
    }
}
