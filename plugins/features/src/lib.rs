//! node-feature-discovery's labels, written by the node itself: the labels
//! nfd-worker's default sources write (`feature.node.kubernetes.io/<source>-
//! <feature>`, NFD's names and values) and NFD's local feature files, with
//! no nfd-master.
//!
//! - `pci`: `pci-<class>_<vendor>.present` and `.sriov.capable`;
//! - `usb`: `usb-<class>_<vendor>_<device>.present`;
//! - `kernel`: `kernel-version.{full,major,minor,revision}`,
//!   `kernel-config.<OPTION>`, `kernel-selinux.enabled`;
//! - `memory`: `memory-numa`, `memory-swap`, `memory-nv.present`,
//!   `memory-nv.dax`;
//! - `storage`: `storage-nonrotationaldisk`;
//! - `system`: `system-os_release.{ID,VERSION_ID,VERSION_ID.major,VERSION_ID.minor}`;
//! - `cpu`: `cpu-model.{vendor_id,family,id}`, `cpu-hardware_multithreading`,
//!   `cpu-pstate.*`, `cpu-cstate.enabled` (the `cpuid.*` flags wait for
//!   the host's CPUID function);
//! - `local`: the feature files ([`local`]), which win over the sources for
//!   a name both write, as in NFD.
//!
//! The settings are nfd-worker's config keys ([`settings`]). Grants: `/sys`
//! (devices, topology, power states), `/proc` (`cpuinfo`, `swaps`,
//! `config.gz`), `/boot` (the kernel config where `/proc/config.gz` is
//! missing) and the feature files' directory, which the plugin watches: a
//! file written, renamed in or removed reaches the node within a second. A
//! path not granted or not there is a feature not present, never an error.
//! A label whose file went away, or whose time expired, is no longer in the
//! plugin's part, so the host removes it from the node.

use std::collections::BTreeMap;

use nodestatus_sdk::reactor::{Lines, Reactor, Subscriptions};
use nodestatus_sdk::{EventType, Metadata, Node, Result, Setter, host};

pub mod local;
pub mod settings;
pub mod sources;

use settings::Resolved;
use sources::Root;

/// The prefix of every label of the sources.
pub const PREFIX: &str = "feature.node.kubernetes.io/";

/// The event recorded when the feature files' refusals change.
pub const REFUSED_EVENT: &str = "FeatureFileRefused";

/// The machine facts the sources need that the host gives.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The kernel release (`uname -r`).
    pub kernel_release: String,
    /// The text of the host's `/etc/os-release`.
    pub os_release: String,
    /// Now, in seconds since the epoch.
    pub now: i64,
}

/// Every label, and what the feature files had refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// Name (with its prefix) and value.
    pub labels: BTreeMap<String, String>,
    /// The feature files' outcome.
    pub local: local::Outcome,
    /// Labels of the sources left out: their value is not a label value.
    pub dropped: Vec<String>,
}

/// The labels of the configured sources over `root`.
pub fn labels(root: &Root, r: &Resolved, facts: &Facts) -> Labels {
    let mut out = Labels::default();
    let on = |s: &str| r.sources.contains(s);
    let mut by_source: Vec<(&str, sources::Features)> = Vec::new();
    if on("cpu") {
        by_source.push(("cpu", sources::cpu(root)));
    }
    if on("kernel") {
        by_source.push(("kernel", sources::kernel(root, r, &facts.kernel_release)));
    }
    if on("memory") {
        by_source.push(("memory", sources::memory(root)));
    }
    if on("pci") {
        by_source.push(("pci", sources::pci(root, &r.pci)));
    }
    if on("storage") {
        by_source.push(("storage", sources::storage(root)));
    }
    if on("system") {
        by_source.push(("system", sources::system(&facts.os_release)));
    }
    if on("usb") {
        by_source.push(("usb", sources::usb(root, &r.usb)));
    }
    for (source, features) in by_source {
        for (feature, value) in features {
            let name = format!("{PREFIX}{source}-{feature}");
            match local::label_problem(&name, &value) {
                None => {
                    out.labels.insert(name, value);
                }
                Some(why) => out.dropped.push(why),
            }
        }
    }
    if on("local") {
        out.local = local::read_dir(root, &r.feature_files_dir, facts.now);
        out.labels
            .extend(out.local.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    out
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

thread_local! {
    /// The refusals reported last, so that a kept instance reports a
    /// change once, not at every pass.
    static REPORTED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// Logs the refused lines and records one Warning event when they changed
/// since the last report.
fn report(refused: &[String]) {
    let changed = REPORTED.with(|r| {
        let mut r = r.borrow_mut();
        let changed = r.as_deref() != Some(refused);
        *r = Some(refused.to_vec());
        changed
    });
    if !changed || refused.is_empty() {
        return;
    }
    for line in refused {
        host::warn(&format!("feature file refused: {line}"));
    }
    let mut message = refused.join("; ");
    if message.len() > 900 {
        let mut cut = 900;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str(" ...");
    }
    host::record_event(EventType::Warning, REFUSED_EVENT, &message);
}

/// The setter (its [`Setter`] and [`Reactor`] implementations are what the
/// component exports).
pub struct Features;

impl Setter for Features {
    fn metadata() -> Metadata {
        Metadata::new("features", env!("CARGO_PKG_VERSION"))
            .description(
                "node-feature-discovery's labels (pci, usb, kernel, memory, storage, system, cpu) and its feature files",
            )
            // What NFD reads. A featureFilesDir or kconfigFile elsewhere on
            // the host is granted mapped at one of these
            // ({path: <asked>, from: <host directory>}).
            .path("/sys")
            .path("/proc")
            .path("/boot")
            .path(settings::DEFAULT_FEATURE_FILES_DIR)
    }

    fn set(node: &mut Node) -> Result<()> {
        let r = settings::parse(&host::config_json())?;
        let info = host::system_info();
        let facts = Facts {
            kernel_release: info.kernel_release,
            os_release: info.os_release,
            now: now(),
        };
        let out = labels(&Root::host(), &r, &facts);
        for (k, v) in &out.labels {
            node.set_label(k, v);
        }
        for why in &out.dropped {
            host::debug(&format!("label not written: {why}"));
        }
        report(&out.local.refused);
        Ok(())
    }
}

impl Reactor for Features {
    fn subscribe() -> Subscriptions {
        // Bad settings fail `set`, which says why; the default directory
        // is watched meanwhile.
        let dir = settings::parse(&host::config_json())
            .map(|r| r.feature_files_dir)
            .unwrap_or_else(|_| settings::DEFAULT_FEATURE_FILES_DIR.to_owned());
        Subscriptions::new().watch(&dir)
    }

    fn on_lines(node: &mut Node, _lines: &Lines) -> Result<()> {
        Self::set(node)
    }
}

nodestatus_sdk::export_reactor!(Features);
