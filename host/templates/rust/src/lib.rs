//! {{name}}: a nodestatus setter. It labels the node with its kernel's
//! major.minor version, read from a file; change `set` to report what you
//! need.
//!
//! `set` is given the whole node to read, and what it writes is its part:
//! the SDK records each field `set` writes (here the one label) and returns
//! only those to the host, which merges them into the node. A field it wrote
//! in an earlier pass and no longer writes is removed.
//!
//! A setter reads only the directories it asks for in its metadata and the
//! operator grants (`config.yaml` holds the grant). Build, test and check it
//! with `./build.sh`.
use nodestatus_sdk::{Metadata, Node, Result, Setter, host};

/// The label this setter owns.
pub const LABEL: &str = "{{name}}.nodestatus.io/kernel";

/// The file it reads, in the directory it asks for.
pub const RELEASE_FILE: &str = "{{grant}}/osrelease";

pub struct Plugin;

/// The kernel's `major.minor`, from a release such as `6.1.0-18-amd64`.
pub fn major_minor(release: &str) -> Option<String> {
    let mut parts = release.split(['.', '-']);
    let (major, minor) = (parts.next()?, parts.next()?);
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (numeric(major) && numeric(minor)).then(|| format!("{major}.{minor}"))
}

impl Setter for Plugin {
    fn metadata() -> Metadata {
        Metadata::new("{{name}}", env!("CARGO_PKG_VERSION"))
            .description("labels the node with its kernel's major.minor version")
            // The directory of RELEASE_FILE; config.yaml grants it.
            .path("{{grant}}")
    }

    fn set(node: &mut Node) -> Result<()> {
        let release = host::read_file(RELEASE_FILE)?;
        let release = release.trim();
        let version = major_minor(release)
            .ok_or_else(|| format!("cannot read a version from the kernel release {release:?}"))?;
        node.set_label(LABEL, &version);
        Ok(())
    }
}

nodestatus_sdk::export!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_major_minor() {
        assert_eq!(major_minor("6.1.0-18-amd64").as_deref(), Some("6.1"));
        assert_eq!(major_minor("5.15"), Some("5.15".into()));
        assert_eq!(major_minor("linux"), None);
    }

    #[test]
    fn its_part_is_the_label() {
        let mut node = Node::named("n");
        Plugin::set(&mut node).unwrap();
        assert!(node.label(LABEL).is_some());
        // What it returns to the host: the label, and nothing else.
        let part = node.part();
        assert!(part["metadata"]["labels"][LABEL].is_string(), "{part}");
        assert_eq!(part.as_object().map(|p| p.len()), Some(1), "{part}");
    }
}
