//! The kubelet's `GoRuntime` setter: `nodeInfo.operatingSystem` and
//! `nodeInfo.architecture`, in Go's spelling (`GOOS`, `GOARCH`) as Kubernetes
//! uses them. The architecture is the kernel's (`uname -m`), mapped to
//! `GOARCH`; the operating system is `linux`, the only one the host serves
//! its facts on (uname, `/proc`).
use nodestatus_sdk::{Metadata, Node, Result, Setter, host};

/// `uname -m` to Go's `GOARCH`. An unknown machine is returned as is.
pub fn go_arch(machine: &str) -> &str {
    match machine.trim() {
        "x86_64" | "amd64" => "amd64",
        "aarch64" | "aarch64_be" | "arm64" => "arm64",
        "i386" | "i486" | "i586" | "i686" | "x86" => "386",
        m if m.starts_with("armv") || m == "arm" => "arm",
        "ppc64le" => "ppc64le",
        "ppc64" => "ppc64",
        "ppc" => "ppc",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        "loongarch64" => "loong64",
        "mips64" => "mips64",
        "mips" => "mips",
        "sparc64" => "sparc64",
        other => other,
    }
}

/// The operating system in Go's spelling, from the kernel's facts: every
/// host that serves them is Linux.
pub const OPERATING_SYSTEM: &str = "linux";

/// Writes `operatingSystem` and `architecture`.
pub fn apply(node: &mut Node, machine: &str) -> Result<()> {
    let arch = go_arch(machine);
    if arch.is_empty() {
        return Err("the host reported no machine architecture".into());
    }
    node.set_node_info("operatingSystem", OPERATING_SYSTEM);
    node.set_node_info("architecture", arch);
    Ok(())
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct OsArch;

impl Setter for OsArch {
    fn metadata() -> Metadata {
        Metadata::new("os-arch", env!("CARGO_PKG_VERSION")).description(
            "the kubelet's GoRuntime setter: nodeInfo.operatingSystem and architecture",
        )
    }

    fn set(node: &mut Node) -> Result<()> {
        apply(node, &host::system_info().machine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_uname_to_goarch() {
        for (m, g) in [
            ("x86_64", "amd64"),
            ("aarch64", "arm64"),
            ("armv7l", "arm"),
            ("armv6l", "arm"),
            ("i686", "386"),
            ("ppc64le", "ppc64le"),
            ("s390x", "s390x"),
            ("riscv64", "riscv64"),
            ("loongarch64", "loong64"),
            ("weird", "weird"),
        ] {
            assert_eq!(go_arch(m), g, "{m}");
        }
    }

    #[test]
    fn sets_node_info() {
        let mut node = Node::named("n");
        apply(&mut node, "x86_64").unwrap();
        assert_eq!(node.node_info("operatingSystem"), Some("linux"));
        assert_eq!(node.node_info("architecture"), Some("amd64"));
        assert_eq!(
            node.part().to_string(),
            r#"{"status":{"nodeInfo":{"operatingSystem":"linux","architecture":"amd64"}}}"#
        );
        assert!(apply(&mut node, "").is_err());
    }
}

nodestatus_sdk::export!(OsArch);
