//! A custom setter in about 30 lines: label the node with its kernel version
//! and set a `KernelSupported` condition against a minimum from the config.
use nodestatus_sdk::{ConditionStatus, Metadata, Node, Result, Setter, host};

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Config {
    min_kernel: Option<String>, // for example "5.15"
}

fn version(s: &str) -> Vec<u32> {
    s.split(|c: char| !c.is_ascii_digit())
        .take(3)
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct KernelCheck;

impl Setter for KernelCheck {
    fn metadata() -> Metadata {
        Metadata::new("kernel-check", env!("CARGO_PKG_VERSION"))
            .description("labels the kernel version and checks it against minKernel")
    }

    fn set(node: &mut Node) -> Result<()> {
        let min = host::config::<Config>()?
            .min_kernel
            .unwrap_or_else(|| "4.19".into());
        let release = host::system_info().kernel_release;
        let v = version(&release);
        node.set_label(
            "kernel.example.com/version",
            &v.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join("."),
        );
        let ok = v >= version(&min);
        let (reason, message) = match ok {
            true => (
                "KernelSupported",
                format!("kernel {release} is at least {min}"),
            ),
            false => (
                "KernelTooOld",
                format!("kernel {release} is older than {min}"),
            ),
        };
        node.set_condition(
            "KernelSupported",
            ConditionStatus::from_bool(ok),
            reason,
            &message,
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_part_is_the_label_and_the_condition() {
        let input = Node::named("n1").to_json();
        let part = nodestatus_sdk::run::<KernelCheck>(&input)
            .unwrap()
            .expect("a part");
        let mut node = Node::parse(&part).unwrap();
        assert!(node.label("kernel.example.com/version").is_some());
        assert!(node.condition("KernelSupported").is_some());
        node.remove_label("kernel.example.com/version");
        node.remove_condition("KernelSupported");
        assert_eq!(
            node.to_json(),
            r#"{"metadata":{"labels":{}},"status":{"conditions":[]}}"#
        );
    }
}

nodestatus_sdk::export!(KernelCheck);
