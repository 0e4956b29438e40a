//! The WIT's `metadata` record: what a plugin is and what it asks for. The
//! SDK builds it in a setter; the host reads the same record back from a
//! plugin and validates it.

/// What a plugin is and what it asks for. Build it with [`Metadata::new`].
/// The host reads the same record back from a plugin (and validates it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Metadata {
    /// Unique name: lowercase letters, digits and `-`.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// One line on what it sets.
    pub description: String,
    /// Directories it reads, granted read-only by the operator.
    pub paths: Vec<String>,
    /// Environment variables it reads, granted by the operator.
    pub env: Vec<String>,
    /// Whether its failure should make the node not Ready.
    pub affects_readiness: bool,
}

impl Metadata {
    /// A plugin called `name`, at `version`, asking for nothing.
    pub fn new(name: &str, version: &str) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            description: String::new(),
            paths: Vec::new(),
            env: Vec::new(),
            affects_readiness: false,
        }
    }

    /// Sets the description.
    pub fn description(mut self, d: &str) -> Self {
        self.description = d.to_owned();
        self
    }

    /// Asks to read a directory (absolute).
    pub fn path(mut self, p: &str) -> Self {
        self.paths.push(p.to_owned());
        self
    }

    /// Asks for an environment variable.
    pub fn env(mut self, name: &str) -> Self {
        self.env.push(name.to_owned());
        self
    }

    /// Says that this plugin's failure should make the node not Ready.
    pub fn affects_readiness(mut self, yes: bool) -> Self {
        self.affects_readiness = yes;
        self
    }
}
