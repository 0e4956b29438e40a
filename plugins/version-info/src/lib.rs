//! The kubelet's `VersionInfo` setter: `nodeInfo.kernelVersion` (`uname -r`),
//! `osImage` (`PRETTY_NAME` of os-release, `Unknown` when absent),
//! `containerRuntimeVersion` (`<type>://<version>`: the config's when set,
//! else the container runtime's over CRI when granted, as the kubelet spells
//! it, else `Unknown`), `kubeletVersion` (the config's, or
//! [`default_kubelet_version`]: the kubelet release this setter matches with
//! its own version as a pre-release, `v1.37.2-nodestatus.0.1.0`), and
//! `kubeProxyVersion` only when configured.
use nodestatus_sdk::{Metadata, Node, Result, Setter, host};

/// The plugin's config.
#[derive(serde::Deserialize, Default, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// `<type>://<version>`, for example `containerd://1.7.13`.
    pub container_runtime_version: Option<String>,
    /// The version reported as the kubelet's.
    pub kubelet_version: Option<String>,
    /// The version reported as kube-proxy's (deprecated field).
    pub kube_proxy_version: Option<String>,
}

/// The versions the setter writes, by `nodeInfo` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    /// `nodeInfo.kernelVersion`.
    pub kernel_version: String,
    /// `nodeInfo.osImage`.
    pub os_image: String,
    /// `nodeInfo.containerRuntimeVersion`.
    pub container_runtime_version: String,
    /// `nodeInfo.kubeletVersion`.
    pub kubelet_version: String,
    /// `nodeInfo.kubeProxyVersion` (deprecated: written only when set).
    pub kube_proxy_version: Option<String>,
}

/// A value of an os-release file (shell-style quoting removed), if present
/// and not empty.
pub fn os_release_value(os_release: &str, key: &str) -> Option<String> {
    os_release.lines().find_map(|l| {
        let (k, v) = l.trim().split_once('=')?;
        if k.trim() != key {
            return None;
        }
        let v = v.trim();
        let unquoted = match v.as_bytes().first() {
            Some(q @ (b'"' | b'\'')) if v.len() >= 2 && v.as_bytes()[v.len() - 1] == *q => {
                &v[1..v.len() - 1]
            }
            _ => v,
        };
        let mut out = String::with_capacity(unquoted.len());
        let mut chars = unquoted.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else {
                out.push(c);
            }
        }
        (!out.is_empty()).then_some(out)
    })
}

/// The kubelet release whose `nodeInfo` this setter writes field by field
/// (docs/kubelet-parity.md compares against it).
pub const MATCHED_KUBELET: &str = "1.37.2";

/// `nodeInfo.kubeletVersion` when the config sets none: a semantic version
/// with the kubelet's `v` in front, as tools that parse the kubelet's
/// version (version-skew checks, dashboards, upgrade planners) require —
/// the matched kubelet release, with this setter's own version as a
/// pre-release (`v1.37.2-nodestatus.0.1.0`), which orders just before that
/// release and still says which writer the node has.
pub fn default_kubelet_version(own_version: &str) -> String {
    let own = own_version.replace(['+', '_'], ".");
    format!("v{MATCHED_KUBELET}-nodestatus.{own}")
}

fn configured(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// `<type>://<version>` from the runtime's CRI answer, as the kubelet
/// writes it (`containerd://1.6.20` for Debian's `1.6.20~ds1`); `None` when
/// the version does not parse, where the kubelet writes `Unknown`.
pub fn runtime_version(info: &host::ContainerRuntimeInfo) -> Option<String> {
    let version = nodestatus_sdk::host::kubelet_runtime_version(&info.version)?;
    (!info.name.is_empty()).then(|| format!("{}://{version}", info.name))
}

/// The versions, from the machine's facts, the config and the runtime's
/// `<type>://<version>` when it answered.
pub fn versions(
    kernel_release: &str,
    os_release: &str,
    config: &Config,
    own_version: &str,
    from_runtime: Option<String>,
) -> Result<Versions> {
    let runtime = configured(&config.container_runtime_version);
    if let Some(r) = &runtime {
        match r.split_once("://") {
            Some((t, v)) if !t.is_empty() && !v.is_empty() => {}
            _ => {
                return Err(format!(
                    "containerRuntimeVersion {r:?} must be <type>://<version>, for example containerd://1.7.13"
                )
                .into());
            }
        }
    }
    Ok(Versions {
        kernel_version: kernel_release.trim().to_owned(),
        os_image: os_release_value(os_release, "PRETTY_NAME").unwrap_or_else(|| "Unknown".into()),
        container_runtime_version: runtime.or(from_runtime).unwrap_or_else(|| "Unknown".into()),
        kubelet_version: configured(&config.kubelet_version)
            .unwrap_or_else(|| default_kubelet_version(own_version)),
        kube_proxy_version: configured(&config.kube_proxy_version),
    })
}

/// Writes the versions into `nodeInfo`.
pub fn apply(node: &mut Node, v: &Versions) {
    node.set_node_info("kernelVersion", &v.kernel_version);
    node.set_node_info("osImage", &v.os_image);
    node.set_node_info("containerRuntimeVersion", &v.container_runtime_version);
    node.set_node_info("kubeletVersion", &v.kubelet_version);
    if let Some(p) = &v.kube_proxy_version {
        node.set_node_info("kubeProxyVersion", p);
    }
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct VersionInfo;

impl Setter for VersionInfo {
    fn metadata() -> Metadata {
        Metadata::new("version-info", env!("CARGO_PKG_VERSION")).description(
            "the kubelet's VersionInfo setter: kernel, OS image, runtime and kubelet versions",
        )
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let info = host::system_info();
        let from_runtime = match host::container_runtime() {
            Ok(r) => runtime_version(&r),
            Err(host::RuntimeError::Unavailable(m)) => {
                host::warn(&format!("containerRuntimeVersion is Unknown: {m}"));
                None
            }
            Err(_) => None,
        };
        let v = versions(
            &info.kernel_release,
            &info.os_release,
            &config,
            env!("CARGO_PKG_VERSION"),
            from_runtime,
        )?;
        apply(node, &v);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/etc/os-release` of the development machine (Debian 12).
    const OS_RELEASE: &str = include_str!("../tests/fixtures/os-release");

    #[test]
    fn reads_pretty_name() {
        assert_eq!(
            os_release_value(OS_RELEASE, "PRETTY_NAME").as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(
            os_release_value("PRETTY_NAME='A \\\"b\\\"'\n", "PRETTY_NAME").as_deref(),
            Some("A \"b\"")
        );
        assert_eq!(
            os_release_value("NAME=x\nPRETTY_NAME=\"\"", "PRETTY_NAME"),
            None
        );
    }

    /// A tool that reads the kubelet's version as a semantic version
    /// (Kubernetes' `version.ParseSemantic`, the `semver` crate after the
    /// `v`) accepts the default.
    #[test]
    fn the_default_kubelet_version_is_a_semantic_version() {
        for own in ["0.1.0", env!("CARGO_PKG_VERSION"), "1.2.3-rc.1"] {
            let v = default_kubelet_version(own);
            let parsed = v
                .strip_prefix('v')
                .and_then(|s| semver::Version::parse(s).ok())
                .unwrap_or_else(|| panic!("{v:?} is not v<semantic version>"));
            assert_eq!(parsed.major, 1, "{v}");
            assert!(
                parsed.pre.as_str().starts_with("nodestatus."),
                "{v}: the writer is named in the pre-release"
            );
        }
    }

    #[test]
    fn defaults_when_unconfigured() {
        let v = versions("6.1.0-18-amd64\n", "", &Config::default(), "0.1.0", None).unwrap();
        assert_eq!(
            v,
            Versions {
                kernel_version: "6.1.0-18-amd64".into(),
                os_image: "Unknown".into(),
                container_runtime_version: "Unknown".into(),
                kubelet_version: "v1.37.2-nodestatus.0.1.0".into(),
                kube_proxy_version: None,
            }
        );
        let mut node = Node::named("n");
        apply(&mut node, &v);
        assert_eq!(node.node_info("kubeProxyVersion"), None);
        assert_eq!(node.node_info("containerRuntimeVersion"), Some("Unknown"));
        // Its part: the four nodeInfo keys it sets.
        let part = node.part();
        let info: Vec<_> = part["status"]["nodeInfo"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            info,
            [
                "kernelVersion",
                "osImage",
                "containerRuntimeVersion",
                "kubeletVersion"
            ]
        );
        assert_eq!(part["status"].as_object().unwrap().len(), 1);
    }

    #[test]
    fn configured_versions_are_used() {
        let c = Config {
            container_runtime_version: Some("containerd://1.7.13".into()),
            kubelet_version: Some("v1.31.2".into()),
            kube_proxy_version: Some("v1.31.2".into()),
        };
        let v = versions(
            "6.1",
            OS_RELEASE,
            &c,
            "0.1.0",
            Some("containerd://1.6.20".into()),
        )
        .unwrap();
        assert_eq!(v.os_image, "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(v.container_runtime_version, "containerd://1.7.13");
        let mut node = Node::named("n");
        apply(&mut node, &v);
        assert_eq!(node.node_info("kubeletVersion"), Some("v1.31.2"));
        assert_eq!(node.node_info("kubeProxyVersion"), Some("v1.31.2"));
        let bad = Config {
            container_runtime_version: Some("1.7.13".into()),
            ..Config::default()
        };
        assert!(versions("6.1", "", &bad, "0.1.0", None).is_err());
    }

    fn runtime(name: &str, version: &str) -> host::ContainerRuntimeInfo {
        host::ContainerRuntimeInfo {
            name: name.into(),
            version: version.into(),
            api_version: "v1".into(),
            conditions: Vec::new(),
            images: Vec::new(),
            handlers: Vec::new(),
        }
    }

    #[test]
    fn the_runtime_version_comes_from_cri_as_the_kubelet_spells_it() {
        assert_eq!(
            runtime_version(&runtime("containerd", "1.6.20~ds1")).as_deref(),
            Some("containerd://1.6.20")
        );
        assert_eq!(
            runtime_version(&runtime("cri-o", "1.29.1")).as_deref(),
            Some("cri-o://1.29.1")
        );
        assert_eq!(runtime_version(&runtime("containerd", "dev")), None);
        let v = versions(
            "6.1",
            "",
            &Config::default(),
            "0.1.0",
            runtime_version(&runtime("containerd", "1.6.20~ds1")),
        )
        .unwrap();
        assert_eq!(v.container_runtime_version, "containerd://1.6.20");
        // Through the host function, as the plugin runs.
        nodestatus_sdk::host::set_native_runtime(Some(Ok(runtime("containerd", "1.6.20~ds1"))));
        let mut node = Node::named("n");
        VersionInfo::set(&mut node).unwrap();
        assert_eq!(
            node.node_info("containerRuntimeVersion"),
            Some("containerd://1.6.20")
        );
        nodestatus_sdk::host::set_native_runtime(Some(Err(host::RuntimeError::Unavailable(
            "down".into(),
        ))));
        VersionInfo::set(&mut node).unwrap();
        assert_eq!(node.node_info("containerRuntimeVersion"), Some("Unknown"));
    }
}

nodestatus_sdk::export!(VersionInfo);
