//! NFD's label sources, read from files: pci, usb, kernel, memory, storage,
//! system and cpu (what a file tells; the CPUID flags wait for the host).
//!
//! Each source returns its features as NFD names them after
//! `feature.node.kubernetes.io/<source>-` (`0300_10de.present`,
//! `version.major`), with NFD's values. What a source cannot read (a path
//! not granted, a file the machine does not have) is a feature not present,
//! never an error: NFD logs it and writes the source's other labels, and so
//! does this plugin.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::settings::{Devices, Resolved};

/// Features of one source: name after `<source>-`, value.
pub type Features = BTreeMap<String, String>;

/// The machine's file tree: `/` in a component, a directory of fixtures in
/// a test.
#[derive(Debug, Clone)]
pub struct Root(PathBuf);

impl Root {
    /// The machine's own files.
    pub fn host() -> Self {
        Self(PathBuf::from("/"))
    }

    /// The tree under `dir`, read as if it were `/`.
    pub fn at(dir: &Path) -> Self {
        Self(dir.to_owned())
    }

    /// `path` (absolute, as on the machine) under this root.
    pub fn path(&self, path: &str) -> PathBuf {
        self.0.join(path.trim_start_matches('/'))
    }

    /// The bytes of a file, if it can be read.
    pub fn bytes(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.path(path)).ok()
    }

    /// The text of a file with its surrounding white space cut, if it can
    /// be read.
    pub fn text(&self, path: &str) -> Option<String> {
        let b = self.bytes(path)?;
        Some(String::from_utf8_lossy(&b).trim().to_owned())
    }

    /// The names in a directory, sorted (as Go's `os.ReadDir`), if it can
    /// be listed.
    pub fn list(&self, path: &str) -> Option<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(path))
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Some(names)
    }

    /// Whether `path` exists.
    pub fn exists(&self, path: &str) -> bool {
        self.path(path).exists()
    }
}

fn yes(f: &mut Features, name: impl Into<String>) {
    f.insert(name.into(), "true".into());
}

/// A device's label name: its fields' values joined by `_` (a missing one
/// is empty, as in NFD).
fn device_label(attrs: &BTreeMap<&str, String>, fields: &[&str]) -> String {
    fields
        .iter()
        .map(|f| attrs.get(f).map_or("", String::as_str))
        .collect::<Vec<_>>()
        .join("_")
}

fn whitelisted(class: &str, d: &Devices) -> bool {
    d.class_whitelist
        .iter()
        .any(|w| class.starts_with(w.as_str()))
}

/// `pci`: `<class>_<vendor>.present` for each device of a listed class
/// (the class cut to four hex digits), and `.sriov.capable` for one that
/// has `sriov_totalvfs`.
pub fn pci(root: &Root, d: &Devices) -> Features {
    let mut out = Features::new();
    let base = "/sys/bus/pci/devices";
    for dev in root.list(base).unwrap_or_default() {
        let dir = format!("{base}/{dev}");
        let attr = |name: &str| {
            let raw = root.bytes(&format!("{dir}/{name}"))?;
            let raw = String::from_utf8_lossy(&raw);
            let mut v = raw.strip_prefix("0x").unwrap_or(&raw).trim().to_owned();
            if name == "class" && v.len() > 4 {
                v.truncate(4);
            }
            Some(v)
        };
        let mut attrs = BTreeMap::new();
        let complete = crate::settings::PCI_FIELDS
            .iter()
            .all(|name| attr(name).map(|v| attrs.insert(*name, v)).is_some());
        if !complete {
            continue;
        }
        if whitelisted(&attrs["class"], d) {
            let label = device_label(&attrs, &d.label_fields);
            yes(&mut out, format!("{label}.present"));
            if root.exists(&format!("{dir}/sriov_totalvfs")) {
                yes(&mut out, format!("{label}.sriov.capable"));
            }
        }
    }
    out
}

/// `usb`: `<class>_<vendor>_<device>.present` for each device (or, for a
/// device whose class is `00`, each of its interfaces' classes) of a listed
/// class.
pub fn usb(root: &Root, d: &Devices) -> Features {
    let mut out = Features::new();
    let base = "/sys/bus/usb/devices";
    for dev in root.list(base).unwrap_or_default() {
        let dir = format!("{base}/{dev}");
        if !root.exists(&format!("{dir}/idProduct")) {
            continue;
        }
        let mut attrs = BTreeMap::new();
        for (name, file) in [
            ("class", "bDeviceClass"),
            ("vendor", "idVendor"),
            ("device", "idProduct"),
            ("serial", "serial"),
        ] {
            if let Some(v) = root
                .text(&format!("{dir}/{file}"))
                .filter(|v| !v.is_empty())
            {
                attrs.insert(name, v);
            }
        }
        let classes = if attrs.get("class").map(String::as_str) != Some("00") {
            vec![attrs.get("class").cloned().unwrap_or_default()]
        } else {
            // The class is the interfaces': one device per interface class.
            let interfaces: Option<Vec<String>> = root
                .list(&dir)
                .unwrap_or_default()
                .iter()
                .filter(|i| root.exists(&format!("{dir}/{i}/bInterfaceClass")))
                .map(|i| root.text(&format!("{dir}/{i}/bInterfaceClass")))
                .collect();
            // An interface that cannot be read: the device is skipped.
            interfaces.unwrap_or_default()
        };
        for class in classes {
            attrs.insert("class", class);
            if whitelisted(&attrs["class"], d) {
                yes(
                    &mut out,
                    format!("{}.present", device_label(&attrs, &d.label_fields)),
                );
            }
        }
    }
    out
}

/// NFD's `kernel-version.*` of a release: `full` (characters outside
/// `[-A-Za-z0-9_.]` made `_`, `-_.` cut from both ends) and, when it has
/// the form `<major>[.<minor>[.<revision>]][-...]`, the three parts (empty
/// when absent).
pub fn kernel_version(release: &str) -> Features {
    let full: String = release
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = full.trim_matches(['-', '_', '.']).to_owned();
    let mut out = Features::new();
    out.insert("version.full".into(), full.clone());
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let mut rest = full.as_str();
    let n = digits(rest);
    if n == 0 {
        return out;
    }
    let major = &rest[..n];
    rest = &rest[n..];
    let mut parts = vec![major, "", ""];
    for part in parts.iter_mut().skip(1) {
        let Some(after) = rest.strip_prefix('.') else {
            break;
        };
        let n = digits(after);
        if n == 0 {
            return out;
        }
        *part = &after[..n];
        rest = &after[n..];
    }
    if !(rest.is_empty() || rest.starts_with('-')) {
        return out;
    }
    for (name, v) in ["major", "minor", "revision"].iter().zip(parts) {
        out.insert(format!("version.{name}"), v.to_owned());
    }
    out
}

/// Where NFD looks for the kernel's config, in its order, after the
/// configured file.
fn kconfig_paths(release: &str) -> Vec<String> {
    let mut v = vec!["/proc/config.gz".to_owned()];
    for p in [
        "/usr/src/linux-{}/.config",
        "/usr/src/linux-rt-{}/.config",
        "/usr/src/linux/.config",
        "/usr/lib/modules/{}/config",
        "/usr/lib/ostree-boot/config-{}",
        "/usr/lib/kernel/config-{}",
        "/usr/src/linux-headers-{}/.config",
        "/lib/modules/{}/build/.config",
        "/usr/src/linux-rt-headers-{}/.config",
        "/boot/config-{}",
    ] {
        v.push(p.replace("{}", release));
    }
    v
}

/// The kernel config's text: the first of the configured file and NFD's
/// search paths that can be read (`.gz` ones gunzipped), with its path.
pub fn read_kconfig(root: &Root, file: Option<&str>, release: &str) -> Option<(String, String)> {
    file.map(str::to_owned)
        .into_iter()
        .chain(kconfig_paths(release))
        .find_map(|p| {
            let raw = root.bytes(&p)?;
            let text = if p.ends_with(".gz") {
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(raw.as_slice())
                    .take(64 << 20)
                    .read_to_end(&mut out)
                    .ok()?;
                out
            } else {
                raw
            };
            Some((p, String::from_utf8_lossy(&text).into_owned()))
        })
}

/// `config.<OPTION>` for each configured option the kernel config sets:
/// `true` for `y` and `m`, else the value without its quotes.
pub fn kernel_config(text: &str, opts: &[String]) -> Features {
    let mut set = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("CONFIG_") else {
            continue;
        };
        let Some((name, value)) = rest.split_once('=') else {
            continue;
        };
        let v = if value == "y" || value == "m" {
            "true".to_owned()
        } else {
            value.trim_matches('"').to_owned()
        };
        set.insert(name, v);
    }
    opts.iter()
        .filter_map(|o| Some((format!("config.{o}"), set.get(o.as_str())?.clone())))
        .collect()
}

/// `kernel`: the version of `release`, the configured config options and
/// `selinux.enabled` (only when SELinux enforces).
pub fn kernel(root: &Root, r: &Resolved, release: &str) -> Features {
    let mut out = kernel_version(release);
    if let Some((_, text)) = read_kconfig(root, r.kconfig_file.as_deref(), release) {
        out.extend(kernel_config(&text, &r.config_opts));
    }
    if root.exists("/sys/fs")
        && root
            .bytes("/sys/fs/selinux/enforce")
            .is_some_and(|b| b.first() == Some(&b'1'))
    {
        yes(&mut out, "selinux.enabled");
    }
    out
}

/// `memory`: `numa` (more than one NUMA node), `swap` (a swap area in
/// `/proc/swaps`), `nv.present` (an NVDIMM region) and `nv.dax`.
pub fn memory(root: &Root) -> Features {
    let mut out = Features::new();
    if root
        .list("/sys/bus/node/devices")
        .is_some_and(|n| n.len() > 1)
    {
        yes(&mut out, "numa");
    }
    if root
        .text("/proc/swaps")
        .is_some_and(|s| s.lines().filter(|l| !l.trim().is_empty()).count() > 1)
    {
        yes(&mut out, "swap");
    }
    let nv = root.list("/sys/bus/nd/devices").unwrap_or_default();
    if !nv.is_empty() {
        yes(&mut out, "nv.present");
    }
    if nv.iter().any(|d| {
        root.text(&format!("/sys/bus/nd/devices/{d}/devtype"))
            .as_deref()
            == Some("nd_dax")
    }) {
        yes(&mut out, "nv.dax");
    }
    out
}

/// `storage`: `nonrotationaldisk` when a block device's queue is not
/// rotational.
pub fn storage(root: &Root) -> Features {
    let mut out = Features::new();
    let any = root.list("/sys/block").unwrap_or_default().iter().any(|d| {
        root.text(&format!("/sys/block/{d}/queue/rotational"))
            .as_deref()
            == Some("0")
    });
    if any {
        yes(&mut out, "nonrotationaldisk");
    }
    out
}

/// The major and minor of an os-release `VERSION_ID` as NFD splits it
/// (`^(\d+)(\.(\d+))?(\..*)?$`), each only when not empty.
fn split_version(v: &str) -> Option<(&str, &str)> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let n = digits(v);
    if n == 0 {
        return None;
    }
    let (major, rest) = v.split_at(n);
    if rest.is_empty() {
        return Some((major, ""));
    }
    let after = rest.strip_prefix('.')?;
    let m = digits(after);
    let tail = &after[m..];
    if m > 0 && (tail.is_empty() || tail.starts_with('.')) {
        Some((major, &after[..m]))
    } else {
        // The minor group matches nothing; `.…` is the tail.
        Some((major, ""))
    }
}

/// `system`: `os_release.ID`, `os_release.VERSION_ID` and its `.major` and
/// `.minor`, from the text of `/etc/os-release`.
pub fn system(os_release: &str) -> Features {
    let mut fields = BTreeMap::new();
    for line in os_release.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.is_empty()
            || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            || v.is_empty()
        {
            continue;
        }
        fields.insert(k, v.trim_matches(['"', '\'']));
    }
    let mut out = Features::new();
    for key in ["ID", "VERSION_ID"] {
        if let Some(v) = fields.get(key) {
            out.insert(format!("os_release.{key}"), v.to_string());
        }
    }
    if let Some((major, minor)) = fields.get("VERSION_ID").and_then(|v| split_version(v)) {
        for (name, v) in [("major", major), ("minor", minor)] {
            if !v.is_empty() {
                out.insert(format!("os_release.VERSION_ID.{name}"), v.to_owned());
            }
        }
    }
    out
}

/// The CPUID vendor name NFD writes for the vendor string `/proc/cpuinfo`
/// prints (`GenuineIntel` is `Intel`), `VendorUnknown` for others.
pub fn cpu_vendor(vendor_id: &str) -> &'static str {
    match vendor_id.trim() {
        "GenuineIntel" => "Intel",
        "AuthenticAMD" | "AMDisbetter!" => "AMD",
        "CentaurHauls" | "VIA VIA VIA" => "VIA",
        "TransmetaCPU" | "GenuineTMx86" => "Transmeta",
        "Geode by NSC" => "NSC",
        "HygonGenuine" => "Hygon",
        "Vortex86 SoC" | "SiS SiS SiS" | "RiseRiseRise" => "SiS",
        "Genuine  RDC" => "RDC",
        _ => "VendorUnknown",
    }
}

/// `model.vendor_id`, `model.family` and `model.id` from the first
/// processor of `/proc/cpuinfo` (x86: the fields CPUID gives).
pub fn cpu_model(cpuinfo: &str) -> Features {
    let first = cpuinfo.split("\n\n").next().unwrap_or_default();
    let field = |key: &str| {
        first.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_owned())
        })
    };
    let mut out = Features::new();
    if let (Some(vendor), Some(family), Some(model)) =
        (field("vendor_id"), field("cpu family"), field("model"))
    {
        out.insert("model.vendor_id".into(), cpu_vendor(&vendor).into());
        out.insert("model.family".into(), family);
        out.insert("model.id".into(), model);
    }
    out
}

/// `hardware_multithreading`: whether a CPU has a sibling thread (none of
/// the topology files unreadable).
fn multithreading(root: &Root) -> Option<bool> {
    let base = "/sys/bus/cpu/devices";
    let mut ht = false;
    for cpu in root.list(base)? {
        let siblings = root.bytes(&format!("{base}/{cpu}/topology/thread_siblings_list"))?;
        root.bytes(&format!("{base}/{cpu}/topology/physical_package_id"))?;
        ht |= siblings.iter().any(|c| matches!(c, b',' | b'-'));
    }
    Some(ht)
}

/// `pstate.status`, `pstate.turbo` and `pstate.scaling_governor` where
/// `intel_pstate` drives the CPUs.
fn pstate(root: &Root, out: &mut Features) {
    let cpu = "/sys/devices/system/cpu";
    let Some(status) = root.text(&format!("{cpu}/intel_pstate/status")) else {
        return;
    };
    if status == "off" {
        return;
    }
    out.insert("pstate.status".into(), status.clone());
    if let Some(b) = root.bytes(&format!("{cpu}/intel_pstate/no_turbo")) {
        let on = b.first() == Some(&b'0');
        out.insert("pstate.turbo".into(), on.to_string());
    }
    if status != "active" {
        return;
    }
    let mut scaling = String::new();
    for policy in root.list(&format!("{cpu}/cpufreq")).unwrap_or_default() {
        let dir = format!("{cpu}/cpufreq/{policy}");
        match root.text(&format!("{dir}/affected_cpus")) {
            Some(c) if !c.is_empty() => {}
            _ => continue,
        }
        let Some(governor) = root.text(&format!("{dir}/scaling_governor")) else {
            continue;
        };
        if !scaling.is_empty() && scaling != governor {
            scaling.clear();
            break;
        }
        scaling = governor;
    }
    if !scaling.is_empty() {
        out.insert("pstate.scaling_governor".into(), scaling);
    }
}

/// `cstate.enabled` where `intel_idle` drives the idle states.
fn cstate(root: &Root, out: &mut Features) {
    let driver = root.text("/sys/devices/system/cpu/cpuidle/current_driver");
    if driver.as_deref() != Some("intel_idle") {
        return;
    }
    if let Some(n) = root
        .text("/sys/module/intel_idle/parameters/max_cstate")
        .and_then(|t| t.parse::<i64>().ok())
    {
        out.insert("cstate.enabled".into(), (n > 0).to_string());
    }
}

/// `cpu`: the model, `hardware_multithreading`, `pstate.*` and
/// `cstate.enabled`. The CPUID flags (`cpuid.*`) need the host's CPUID
/// function.
pub fn cpu(root: &Root) -> Features {
    let mut out = cpu_model(&root.text("/proc/cpuinfo").unwrap_or_default());
    if let Some(ht) = multithreading(root) {
        out.insert("hardware_multithreading".into(), ht.to_string());
    }
    pstate(root, &mut out);
    cstate(root, &mut out);
    out
}
