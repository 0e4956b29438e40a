//! The plugin's settings: nfd-worker's config keys where they mean the same
//! thing, so that an operator's `nfd-worker.conf` moves over as it is.
//!
//! ```yaml
//! core:
//!   labelSources: [all]          # or [all, -usb], [pci, kernel]; `sources` is the old name
//! sources:
//!   pci:
//!     deviceClassWhitelist: ["03", "0b40", "12"]
//!     deviceLabelFields: [class, vendor]
//!   usb:
//!     deviceClassWhitelist: ["0e", "ef", "fe", "ff"]
//!     deviceLabelFields: [class, vendor, device]
//!   kernel:
//!     kconfigFile: /boot/my-config  # read before NFD's search paths
//!     configOpts: [NO_HZ, NO_HZ_IDLE, NO_HZ_FULL, PREEMPT]
//!   cpu:
//!     cpuid:                        # accepted; takes effect with the CPUID host function
//!       attributeBlacklist: [...]
//!       attributeWhitelist: [...]
//! featureFilesDir: /etc/kubernetes/node-feature-discovery/features.d   # nodestatus's own key
//! ```
//!
//! The plugin sees only what is granted to it, among the paths it asks for
//! (`/sys`, `/proc`, `/boot` and NFD's feature files' directory): a
//! `kconfigFile` or `featureFilesDir` elsewhere on the host is granted
//! mapped at one of them (`{path: /boot, from: /opt/kernel}`).
//!
//! Keys of nfd-worker that mean nothing here (`sleepInterval`: the engine's
//! passes; `featureSources`, `noPublish`, `klog`) are accepted and have no
//! effect. Keys that would change what is published and are not
//! implemented (`labelWhiteList`, `sources.custom`) are refused, as is any
//! other unknown key and any bad value, with the field named.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

/// NFD's default directory of feature files.
pub const DEFAULT_FEATURE_FILES_DIR: &str = "/etc/kubernetes/node-feature-discovery/features.d";

/// The label sources this plugin implements, as NFD names them.
pub const IMPLEMENTED: &[&str] = &[
    "cpu", "kernel", "local", "memory", "pci", "storage", "system", "usb",
];

/// NFD's label sources that this plugin does not implement.
const NOT_IMPLEMENTED: &[&str] = &["custom", "network"];

/// The settings as written.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// nfd-worker's `core`.
    pub core: Core,
    /// nfd-worker's `sources`.
    pub sources: Sources,
    /// Where the feature files are (NFD's fixed directory by default).
    pub feature_files_dir: Option<String>,
}

/// nfd-worker's `core` section.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Core {
    /// The sources whose labels are written.
    pub label_sources: Option<Vec<String>>,
    /// The old name of `labelSources`.
    pub sources: Option<Vec<String>>,
    /// Not implemented: refused when set to anything but an empty string.
    pub label_white_list: Option<String>,
    /// Accepted, no effect: the engine runs the passes.
    pub sleep_interval: Option<Value>,
    /// Accepted, no effect: this plugin publishes labels, not features.
    pub feature_sources: Option<Value>,
    /// Accepted, no effect.
    pub no_publish: Option<Value>,
    /// Accepted, no effect: the engine's log settings apply.
    pub klog: Option<Value>,
}

/// nfd-worker's `sources` section.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(default, deny_unknown_fields)]
pub struct Sources {
    /// `sources.pci`.
    pub pci: DeviceSource,
    /// `sources.usb`.
    pub usb: DeviceSource,
    /// `sources.kernel`.
    pub kernel: Kernel,
    /// `sources.cpu`.
    pub cpu: Cpu,
    /// `sources.custom`: refused (NFD's rules are not implemented).
    pub custom: Option<Value>,
    /// `sources.local`, `sources.memory`, ... take no settings in NFD.
    pub local: Option<Value>,
    /// As NFD: no settings.
    pub memory: Option<Value>,
    /// As NFD: no settings.
    pub storage: Option<Value>,
    /// As NFD: no settings.
    pub system: Option<Value>,
    /// As NFD: no settings (and the source is not implemented).
    pub network: Option<Value>,
}

/// `sources.pci` and `sources.usb`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceSource {
    /// Class code prefixes (hex) whose devices are labelled.
    pub device_class_whitelist: Option<Vec<String>>,
    /// The attributes that make up a device's label name.
    pub device_label_fields: Option<Vec<String>>,
}

/// `sources.kernel`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Kernel {
    /// A kernel config file read before NFD's search paths.
    pub kconfig_file: Option<String>,
    /// The kernel config options labelled.
    pub config_opts: Option<Vec<String>>,
}

/// `sources.cpu`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(default, deny_unknown_fields)]
pub struct Cpu {
    /// `sources.cpu.cpuid`.
    pub cpuid: Cpuid,
}

/// `sources.cpu.cpuid`.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Cpuid {
    /// Flags never labelled.
    pub attribute_blacklist: Option<Vec<String>>,
    /// When not empty, the only flags labelled.
    pub attribute_whitelist: Option<Vec<String>>,
}

/// One device source's resolved settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Devices {
    /// Lowercase hex class prefixes.
    pub class_whitelist: Vec<String>,
    /// The label fields, in NFD's attribute order.
    pub label_fields: Vec<&'static str>,
}

/// The settings, checked and with NFD's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The label sources to run.
    pub sources: BTreeSet<&'static str>,
    /// PCI.
    pub pci: Devices,
    /// USB.
    pub usb: Devices,
    /// The kernel config file to read first.
    pub kconfig_file: Option<String>,
    /// The kernel config options labelled.
    pub config_opts: Vec<String>,
    /// CPUID flags never labelled (used once the CPUID host function lands).
    pub cpuid_blacklist: Vec<String>,
    /// CPUID flags labelled when not empty (likewise).
    pub cpuid_whitelist: Vec<String>,
    /// The feature files' directory.
    pub feature_files_dir: String,
}

/// PCI attributes that may make up a label, in NFD's order.
pub const PCI_FIELDS: &[&str] = &[
    "class",
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
];
/// USB attributes that may make up a label, in NFD's order.
pub const USB_FIELDS: &[&str] = &["class", "vendor", "device", "serial"];

/// NFD's default CPUID blocklist.
pub const CPUID_BLACKLIST: &[&str] = &[
    "AVX10",
    "BMI1",
    "BMI2",
    "CLMUL",
    "CMOV",
    "CX16",
    "ERMS",
    "F16C",
    "HTT",
    "LZCNT",
    "MMX",
    "MMXEXT",
    "NX",
    "POPCNT",
    "RDRAND",
    "RDSEED",
    "RDTSCP",
    "SGX",
    "SGXLC",
    "SSE",
    "SSE2",
    "SSE3",
    "SSE4",
    "SSE42",
    "SSSE3",
    "TDX_GUEST",
];

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn devices(
    field: &str,
    s: &DeviceSource,
    default_classes: &[&str],
    allowed: &'static [&'static str],
    default_fields: &[&str],
) -> Result<Devices, String> {
    let classes = s
        .device_class_whitelist
        .clone()
        .unwrap_or_else(|| strings(default_classes));
    for (i, c) in classes.iter().enumerate() {
        if c.is_empty() || c.len() > 4 || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "{field}.deviceClassWhitelist[{i}]: {c:?} is not a class code prefix (1 to 4 hexadecimal digits, as \"03\" or \"0b40\")"
            ));
        }
    }
    let asked = s.device_label_fields.clone().unwrap_or_default();
    for (i, f) in asked.iter().enumerate() {
        if !allowed.contains(&f.as_str()) {
            return Err(format!(
                "{field}.deviceLabelFields[{i}]: {f:?} is not one of {}",
                allowed.join(", ")
            ));
        }
    }
    // NFD's order, whatever the order written; none: the defaults.
    let mut label_fields: Vec<&'static str> = allowed
        .iter()
        .copied()
        .filter(|a| asked.iter().any(|f| f == a))
        .collect();
    if label_fields.is_empty() {
        label_fields = allowed
            .iter()
            .copied()
            .filter(|a| default_fields.contains(a))
            .collect();
    }
    Ok(Devices {
        class_whitelist: classes.iter().map(|c| c.to_ascii_lowercase()).collect(),
        label_fields,
    })
}

/// The label sources of `core.labelSources` (NFD's rules: `all`, a name,
/// or `-name` to take one out, applied in order).
fn label_sources(field: &str, list: &[String]) -> Result<BTreeSet<&'static str>, String> {
    let mut out = BTreeSet::new();
    for (i, name) in list.iter().enumerate() {
        let (remove, bare) = match name.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, name.as_str()),
        };
        if bare == "all" {
            if remove {
                out.clear();
            } else {
                out.extend(IMPLEMENTED.iter().copied());
            }
            continue;
        }
        match IMPLEMENTED.iter().find(|s| **s == bare) {
            Some(s) if remove => {
                out.remove(s);
            }
            Some(s) => {
                out.insert(*s);
            }
            None if remove && NOT_IMPLEMENTED.contains(&bare) => {}
            None if NOT_IMPLEMENTED.contains(&bare) => {
                return Err(format!(
                    "{field}[{i}]: the source {bare:?} is not implemented by this plugin (it writes {})",
                    IMPLEMENTED.join(", ")
                ));
            }
            None => {
                return Err(format!(
                    "{field}[{i}]: {name:?} is not a label source: all, {} (or -name to leave one out)",
                    IMPLEMENTED.join(", ")
                ));
            }
        }
    }
    Ok(out)
}

fn option_names(field: &str, list: &[String]) -> Result<(), String> {
    for (i, o) in list.iter().enumerate() {
        if o.is_empty() || !o.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!(
                "{field}[{i}]: {o:?} is not a name (letters, digits and '_')"
            ));
        }
    }
    Ok(())
}

fn absolute(field: &str, path: &str) -> Result<(), String> {
    if path.starts_with('/') && !path.split('/').any(|c| c == "..") {
        Ok(())
    } else {
        Err(format!(
            "{field}: {path:?} must be an absolute path without '..'"
        ))
    }
}

impl Settings {
    /// Checks the settings and fills in NFD's defaults.
    pub fn resolve(&self) -> Result<Resolved, String> {
        if self
            .core
            .label_white_list
            .as_deref()
            .is_some_and(|w| !w.is_empty())
        {
            return Err("core.labelWhiteList is not implemented: narrow the labels with the plugin's fields (fields.deny: [\"metadata.labels[feature.node.kubernetes.io/...]\"]) instead".into());
        }
        if self.sources.custom.is_some() {
            return Err("sources.custom: NFD's custom rules are not implemented by this plugin; write a feature file (featureFilesDir) or a setter of your own".into());
        }
        let sources = match (&self.core.label_sources, &self.core.sources) {
            (Some(_), Some(_)) => {
                return Err(
                    "core.labelSources and core.sources (its old name) are both set: keep labelSources"
                        .into(),
                );
            }
            (Some(l), None) => label_sources("core.labelSources", l)?,
            (None, Some(l)) => label_sources("core.sources", l)?,
            (None, None) => IMPLEMENTED.iter().copied().collect(),
        };
        let pci = devices(
            "sources.pci",
            &self.sources.pci,
            &["03", "0b40", "12"],
            PCI_FIELDS,
            &["class", "vendor"],
        )?;
        let usb = devices(
            "sources.usb",
            &self.sources.usb,
            &["0e", "ef", "fe", "ff"],
            USB_FIELDS,
            &["class", "vendor", "device"],
        )?;
        let k = &self.sources.kernel;
        let config_opts = k
            .config_opts
            .clone()
            .unwrap_or_else(|| strings(&["NO_HZ", "NO_HZ_IDLE", "NO_HZ_FULL", "PREEMPT"]));
        option_names("sources.kernel.configOpts", &config_opts)?;
        if let Some(f) = &k.kconfig_file
            && !f.is_empty()
        {
            absolute("sources.kernel.kconfigFile", f)?;
        }
        let c = &self.sources.cpu.cpuid;
        let cpuid_blacklist = c
            .attribute_blacklist
            .clone()
            .unwrap_or_else(|| strings(CPUID_BLACKLIST));
        let cpuid_whitelist = c.attribute_whitelist.clone().unwrap_or_default();
        option_names("sources.cpu.cpuid.attributeBlacklist", &cpuid_blacklist)?;
        option_names("sources.cpu.cpuid.attributeWhitelist", &cpuid_whitelist)?;
        let feature_files_dir = self
            .feature_files_dir
            .clone()
            .unwrap_or_else(|| DEFAULT_FEATURE_FILES_DIR.to_owned());
        absolute("featureFilesDir", &feature_files_dir)?;
        Ok(Resolved {
            sources,
            pci,
            usb,
            kconfig_file: k.kconfig_file.clone().filter(|f| !f.is_empty()),
            config_opts,
            cpuid_blacklist,
            cpuid_whitelist,
            feature_files_dir,
        })
    }
}

/// Parses and resolves settings from their JSON.
pub fn parse(json: &str) -> Result<Resolved, String> {
    let s: Settings = serde_json::from_str(json).map_err(|e| format!("invalid settings: {e}"))?;
    s.resolve()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_settings_are_nfd_workers_defaults() {
        let r = parse("{}").unwrap();
        assert_eq!(r.sources.len(), IMPLEMENTED.len());
        assert_eq!(r.pci.class_whitelist, ["03", "0b40", "12"]);
        assert_eq!(r.pci.label_fields, ["class", "vendor"]);
        assert_eq!(r.usb.class_whitelist, ["0e", "ef", "fe", "ff"]);
        assert_eq!(r.usb.label_fields, ["class", "vendor", "device"]);
        assert_eq!(
            r.config_opts,
            ["NO_HZ", "NO_HZ_IDLE", "NO_HZ_FULL", "PREEMPT"]
        );
        assert_eq!(r.cpuid_blacklist.len(), 26);
        assert!(r.cpuid_whitelist.is_empty());
        assert_eq!(r.feature_files_dir, DEFAULT_FEATURE_FILES_DIR);
    }

    /// nfd-worker.conf as NFD's deployment ships it (its commented example
    /// with the keys uncommented), in JSON.
    #[test]
    fn an_nfd_worker_conf_moves_over() {
        let r = parse(
            r#"{
            "core": {"labelSources": ["all", "-usb"], "sleepInterval": "60s",
                     "featureSources": ["all"], "klog": {"v": "3"}, "labelWhiteList": ""},
            "sources": {
              "cpu": {"cpuid": {"attributeBlacklist": ["MMX", "SSE"], "attributeWhitelist": []}},
              "kernel": {"kconfigFile": "/path/to/kconfig", "configOpts": ["NO_HZ", "X86", "DMI"]},
              "pci": {"deviceClassWhitelist": ["0200", "03", "12"], "deviceLabelFields": ["vendor", "class"]},
              "usb": {"deviceClassWhitelist": ["0e", "ef", "fe", "ff"], "deviceLabelFields": ["class", "vendor", "device"]},
              "local": {}
            }}"#,
        )
        .unwrap();
        assert!(!r.sources.contains("usb") && r.sources.contains("pci"));
        assert_eq!(r.pci.class_whitelist, ["0200", "03", "12"]);
        // NFD's attribute order, whatever the order written.
        assert_eq!(r.pci.label_fields, ["class", "vendor"]);
        assert_eq!(r.config_opts, ["NO_HZ", "X86", "DMI"]);
        assert_eq!(r.kconfig_file.as_deref(), Some("/path/to/kconfig"));
        assert_eq!(r.cpuid_blacklist, ["MMX", "SSE"]);
        // The old name, and a list of named sources.
        let r = parse(r#"{"core": {"sources": ["pci", "kernel"]}}"#).unwrap();
        assert_eq!(r.sources.into_iter().collect::<Vec<_>>(), ["kernel", "pci"]);
        // Only some label fields: the others are not added.
        let r =
            parse(r#"{"sources": {"pci": {"deviceLabelFields": ["vendor", "device"]}}}"#).unwrap();
        assert_eq!(r.pci.label_fields, ["vendor", "device"]);
        // An empty list of fields is NFD's defaults; an empty class list
        // labels no device.
        let r =
            parse(r#"{"sources": {"pci": {"deviceLabelFields": [], "deviceClassWhitelist": []}}}"#)
                .unwrap();
        assert_eq!(r.pci.label_fields, ["class", "vendor"]);
        assert!(r.pci.class_whitelist.is_empty());
    }

    #[test]
    fn bad_settings_are_refused_with_the_field_named() {
        for (json, says) in [
            (
                r#"{"core": {"labelSources": ["pcie"]}}"#,
                "core.labelSources[0]: \"pcie\" is not a label source",
            ),
            (
                r#"{"core": {"labelSources": ["all", "network"]}}"#,
                "core.labelSources[1]: the source \"network\" is not implemented",
            ),
            (
                r#"{"core": {"labelSources": ["all"], "sources": ["all"]}}"#,
                "both set",
            ),
            (
                r#"{"core": {"labelWhiteList": "^cpu"}}"#,
                "core.labelWhiteList is not implemented",
            ),
            (
                r#"{"sources": {"custom": [{"name": "r"}]}}"#,
                "sources.custom",
            ),
            (
                r#"{"sources": {"pci": {"deviceClassWhitelist": ["03", "vga"]}}}"#,
                "sources.pci.deviceClassWhitelist[1]",
            ),
            (
                r#"{"sources": {"pci": {"deviceLabelFields": ["class", "serial"]}}}"#,
                "sources.pci.deviceLabelFields[1]: \"serial\" is not one of",
            ),
            (
                r#"{"sources": {"usb": {"deviceLabelFields": ["subsystem_vendor"]}}}"#,
                "sources.usb.deviceLabelFields[0]",
            ),
            (
                r#"{"sources": {"kernel": {"configOpts": ["NO HZ"]}}}"#,
                "sources.kernel.configOpts[0]",
            ),
            (
                r#"{"sources": {"kernel": {"kconfigFile": "boot/config"}}}"#,
                "sources.kernel.kconfigFile",
            ),
            (
                r#"{"sources": {"cpu": {"cpuid": {"attributeWhitelist": ["AVX-512"]}}}}"#,
                "attributeWhitelist[0]",
            ),
            (r#"{"featureFilesDir": "/etc/../root"}"#, "featureFilesDir"),
            (
                r#"{"sources": {"pci": {"deviceClassWhitelists": []}}}"#,
                "unknown field `deviceClassWhitelists`",
            ),
            (
                r#"{"core": {"labelsources": []}}"#,
                "unknown field `labelsources`",
            ),
        ] {
            let err = parse(json).unwrap_err();
            assert!(err.contains(says), "{json}: {err}");
        }
        // Taking out a source it does not implement is fine.
        assert!(parse(r#"{"core": {"labelSources": ["all", "-network", "-custom"]}}"#).is_ok());
    }
}
