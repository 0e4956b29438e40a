//! The sources and the feature files against fixtures written as NFD
//! documents and reads them: a sysfs, procfs and features.d tree in a
//! temporary directory, read as if it were `/`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use features::local::{self, Outcome};
use features::settings;
use features::sources::{self, Root};
use features::{Facts, labels};

/// A temporary directory, removed when dropped.
struct Tree(PathBuf);

impl Tree {
    /// A tree of its own: tests run side by side, and two of the same
    /// name (every test's `machine()`) must not share one (one's drop
    /// removed the other's files while it read them).
    fn new(name: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "nodestatus-features-{name}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, path: &str, content: impl AsRef<[u8]>) -> &Self {
        let p = self.0.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    fn root(&self) -> Root {
        Root::at(&self.0)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn pci_device(t: &Tree, addr: &str, attrs: &[(&str, &str)]) {
    for (name, value) in attrs {
        t.write(
            &format!("/sys/bus/pci/devices/{addr}/{name}"),
            format!("{value}\n"),
        );
    }
}

fn gzip(text: &str) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

/// A machine as sysfs and procfs show one: a VGA controller, an NVIDIA GPU
/// with SR-IOV, an accelerator (0b40), an ISA bridge and an incomplete
/// device; a USB hub, a composite device and a webcam; two NUMA nodes,
/// swap, NVDIMMs; a rotating and an NVMe disk; an Intel CPU with SMT,
/// intel_pstate and intel_idle.
fn machine() -> Tree {
    let t = Tree::new("machine");
    let full = |class: &str, vendor: &str| {
        vec![
            ("class", class.to_owned()),
            ("vendor", vendor.to_owned()),
            ("device", "0x1111".to_owned()),
            ("subsystem_vendor", "0x2222".to_owned()),
            ("subsystem_device", "0x3333".to_owned()),
        ]
    };
    let as_refs = |v: &Vec<(&'static str, String)>| -> Vec<(&'static str, String)> { v.clone() };
    for (addr, attrs) in [
        ("0000:00:02.0", full("0x030000", "0x1234")),
        ("0000:3b:00.0", full("0x030200", "0x10de")),
        ("0000:01:00.0", full("0x0b4000", "0x1d0f")),
        ("0000:00:1f.0", full("0x060100", "0x8086")),
        ("0000:5e:00.0", full("0x020000", "0x8086")),
    ] {
        let attrs = as_refs(&attrs);
        let refs: Vec<(&str, &str)> = attrs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        pci_device(&t, addr, &refs);
    }
    t.write("/sys/bus/pci/devices/0000:3b:00.0/sriov_totalvfs", "0\n");
    t.write("/sys/bus/pci/devices/0000:5e:00.0/sriov_totalvfs", "64\n");
    // A processing accelerator (class 12) without subsystem_device: NFD
    // skips a device whose mandatory attribute cannot be read.
    pci_device(
        &t,
        "0000:00:1f.6",
        &[
            ("class", "0x120000"),
            ("vendor", "0x8086"),
            ("device", "0x1"),
            ("subsystem_vendor", "0x1"),
        ],
    );
    for (dev, class, vendor, product) in [
        ("usb1", "09", "1d6b", "0002"),
        ("1-2", "00", "0bda", "8153"),
        ("2-1", "ef", "046d", "0825"),
    ] {
        let d = format!("/sys/bus/usb/devices/{dev}");
        t.write(&format!("{d}/bDeviceClass"), format!("{class}\n"))
            .write(&format!("{d}/idVendor"), format!("{vendor}\n"))
            .write(&format!("{d}/idProduct"), format!("{product}\n"));
    }
    t.write("/sys/bus/usb/devices/1-2/1-2:1.0/bInterfaceClass", "ff\n")
        .write("/sys/bus/usb/devices/1-2/1-2:1.1/bInterfaceClass", "02\n")
        // Not a device: no idProduct.
        .write("/sys/bus/usb/devices/1-0:1.0/bInterfaceClass", "09\n");
    t.write(
        "/proc/config.gz",
        gzip("#\n# Automatically generated file; DO NOT EDIT.\nCONFIG_NO_HZ=y\nCONFIG_NO_HZ_IDLE=y\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_PREEMPT=m\nCONFIG_LOCALVERSION=\"-fc\"\nCONFIG_DEFAULT_TCP_CONG=\"cubic\"\nCONFIG_NR_CPUS=512\nCONFIG_X86=y\n"),
    );
    t.write("/sys/fs/selinux/enforce", "1");
    t.write("/sys/bus/node/devices/node0/cpulist", "0-1\n")
        .write("/sys/bus/node/devices/node1/cpulist", "2-3\n");
    t.write(
        "/proc/swaps",
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/zram0                              partition\t8388604\t\t0\t\t100\n",
    );
    t.write("/sys/bus/nd/devices/region0/devtype", "nd_pmem\n")
        .write("/sys/bus/nd/devices/dax0.0/devtype", "nd_dax\n");
    t.write("/sys/block/sda/queue/rotational", "1\n")
        .write("/sys/block/nvme0n1/queue/rotational", "0\n");
    t.write(
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n",
    );
    for cpu in ["cpu0", "cpu1"] {
        t.write(
            &format!("/sys/bus/cpu/devices/{cpu}/topology/thread_siblings_list"),
            "0-1\n",
        )
        .write(
            &format!("/sys/bus/cpu/devices/{cpu}/topology/physical_package_id"),
            "0\n",
        );
    }
    let cpu = "/sys/devices/system/cpu";
    t.write(&format!("{cpu}/intel_pstate/status"), "active\n")
        .write(&format!("{cpu}/intel_pstate/no_turbo"), "0\n")
        .write(&format!("{cpu}/cpufreq/policy0/affected_cpus"), "0\n")
        .write(
            &format!("{cpu}/cpufreq/policy0/scaling_governor"),
            "performance\n",
        )
        .write(&format!("{cpu}/cpufreq/policy1/affected_cpus"), "1\n")
        .write(
            &format!("{cpu}/cpufreq/policy1/scaling_governor"),
            "performance\n",
        )
        .write(&format!("{cpu}/cpuidle/current_driver"), "intel_idle\n")
        .write("/sys/module/intel_idle/parameters/max_cstate", "9\n");
    t
}

const DEBIAN: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nID=debian\n";

fn facts() -> Facts {
    Facts {
        kernel_release: "6.18.44-fc-v782".into(),
        os_release: DEBIAN.into(),
        now: 1_800_000_000,
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_default_source_writes_nfds_names_and_values() {
    let t = machine();
    let r = settings::parse("{}").unwrap();
    let out = labels(&t.root(), &r, &facts());
    let p = |s: &str| format!("feature.node.kubernetes.io/{s}");
    let expected: BTreeMap<String, String> = [
        ("cpu-model.vendor_id", "Intel"),
        ("cpu-model.family", "6"),
        ("cpu-model.id", "143"),
        ("cpu-hardware_multithreading", "true"),
        ("cpu-pstate.status", "active"),
        ("cpu-pstate.turbo", "true"),
        ("cpu-pstate.scaling_governor", "performance"),
        ("cpu-cstate.enabled", "true"),
        ("kernel-version.full", "6.18.44-fc-v782"),
        ("kernel-version.major", "6"),
        ("kernel-version.minor", "18"),
        ("kernel-version.revision", "44"),
        ("kernel-config.NO_HZ", "true"),
        ("kernel-config.NO_HZ_IDLE", "true"),
        ("kernel-config.PREEMPT", "true"),
        ("kernel-selinux.enabled", "true"),
        ("memory-numa", "true"),
        ("memory-swap", "true"),
        ("memory-nv.present", "true"),
        ("memory-nv.dax", "true"),
        ("pci-0300_1234.present", "true"),
        ("pci-0302_10de.present", "true"),
        ("pci-0302_10de.sriov.capable", "true"),
        ("pci-0b40_1d0f.present", "true"),
        ("storage-nonrotationaldisk", "true"),
        ("system-os_release.ID", "debian"),
        ("system-os_release.VERSION_ID", "12"),
        ("system-os_release.VERSION_ID.major", "12"),
        ("usb-ff_0bda_8153.present", "true"),
        ("usb-ef_046d_0825.present", "true"),
    ]
    .iter()
    .map(|(k, v)| (p(k), v.to_string()))
    .collect();
    assert_eq!(out.labels, expected);
    assert!(out.dropped.is_empty(), "{:?}", out.dropped);
}

#[test]
fn the_settings_change_what_the_sources_write() {
    let t = machine();
    let r = settings::parse(
        r#"{"core": {"labelSources": ["pci", "kernel"]},
            "sources": {"pci": {"deviceClassWhitelist": ["02"], "deviceLabelFields": ["vendor", "device"]},
                        "kernel": {"configOpts": ["X86", "LOCALVERSION", "NO_HZ_FULL", "DEFAULT_TCP_CONG", "NR_CPUS"]}}}"#,
    )
    .unwrap();
    let out = labels(&t.root(), &r, &facts());
    let mine: Vec<&str> = out.labels.keys().map(String::as_str).collect();
    assert_eq!(
        mine,
        [
            "feature.node.kubernetes.io/kernel-config.DEFAULT_TCP_CONG",
            "feature.node.kubernetes.io/kernel-config.NR_CPUS",
            "feature.node.kubernetes.io/kernel-config.X86",
            "feature.node.kubernetes.io/kernel-selinux.enabled",
            "feature.node.kubernetes.io/kernel-version.full",
            "feature.node.kubernetes.io/kernel-version.major",
            "feature.node.kubernetes.io/kernel-version.minor",
            "feature.node.kubernetes.io/kernel-version.revision",
            "feature.node.kubernetes.io/pci-8086_1111.present",
            "feature.node.kubernetes.io/pci-8086_1111.sriov.capable",
        ]
    );
    // A string option keeps its value without the quotes; one "is not
    // set" is no label; one whose value is no label value ("-fc") is left
    // out, as NFD leaves it out.
    assert_eq!(
        out.labels["feature.node.kubernetes.io/kernel-config.DEFAULT_TCP_CONG"],
        "cubic"
    );
    assert_eq!(
        out.labels["feature.node.kubernetes.io/kernel-config.NR_CPUS"],
        "512"
    );
    assert_eq!(out.dropped.len(), 1, "{:?}", out.dropped);
    assert!(out.dropped[0].contains("\"-fc\""), "{:?}", out.dropped);
}

#[test]
fn what_the_machine_lacks_is_not_present_and_no_error() {
    let t = Tree::new("empty");
    let r = settings::parse("{}").unwrap();
    let f = Facts {
        kernel_release: "5.15.0-1051-azure".into(),
        os_release: String::new(),
        now: 0,
    };
    let out = labels(&t.root(), &r, &f);
    assert_eq!(
        out.labels.keys().collect::<Vec<_>>(),
        [
            "feature.node.kubernetes.io/kernel-version.full",
            "feature.node.kubernetes.io/kernel-version.major",
            "feature.node.kubernetes.io/kernel-version.minor",
            "feature.node.kubernetes.io/kernel-version.revision",
        ]
    );
    assert_eq!(out.local, Outcome::default());
    // /boot/config-<release> where /proc/config.gz is missing.
    t.write("/boot/config-5.15.0-1051-azure", "CONFIG_PREEMPT=y\n");
    let out = labels(&t.root(), &r, &f);
    assert_eq!(
        out.labels["feature.node.kubernetes.io/kernel-config.PREEMPT"],
        "true"
    );
    // The configured file comes first.
    t.write("/etc/kconfig", "CONFIG_PREEMPT=n\n");
    let r = settings::parse(r#"{"sources": {"kernel": {"kconfigFile": "/etc/kconfig"}}}"#).unwrap();
    let out = labels(&t.root(), &r, &f);
    assert_eq!(
        out.labels["feature.node.kubernetes.io/kernel-config.PREEMPT"],
        "n"
    );
}

#[test]
fn kernel_versions_as_nfd_splits_them() {
    let v = |r: &str| sources::kernel_version(r);
    assert_eq!(
        v("5.15.0-1051-azure"),
        map(&[
            ("version.full", "5.15.0-1051-azure"),
            ("version.major", "5"),
            ("version.minor", "15"),
            ("version.revision", "0")
        ])
    );
    // The parts that are absent are empty, as NFD's regexp leaves them.
    assert_eq!(
        v("4.19"),
        map(&[
            ("version.full", "4.19"),
            ("version.major", "4"),
            ("version.minor", "19"),
            ("version.revision", "")
        ])
    );
    // Characters outside [-A-Za-z0-9_.] are '_', and -_. cut at the ends.
    assert_eq!(v("5.10.0+")["version.full"], "5.10.0");
    assert_eq!(v("6.1.0 #1 SMP")["version.full"], "6.1.0__1_SMP");
    // Not of the form: only `full`.
    assert_eq!(v("6.1.0.7"), map(&[("version.full", "6.1.0.7")]));
    assert_eq!(v("6.x"), map(&[("version.full", "6.x")]));
}

#[test]
fn os_release_versions_as_nfd_splits_them() {
    let s = |text: &str| sources::system(text);
    assert_eq!(
        s("NAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\nID=ubuntu\nID_LIKE=debian\n"),
        map(&[
            ("os_release.ID", "ubuntu"),
            ("os_release.VERSION_ID", "22.04"),
            ("os_release.VERSION_ID.major", "22"),
            ("os_release.VERSION_ID.minor", "04")
        ])
    );
    assert_eq!(
        s("ID='rhel'\nVERSION_ID=9.4.1\n")["os_release.VERSION_ID.minor"],
        "4"
    );
    // `1.2x`: NFD's regexp takes `.2x` as the tail, so no minor.
    let odd = s("ID=x\nVERSION_ID=1.2x\n");
    assert_eq!(odd["os_release.VERSION_ID.major"], "1");
    assert!(!odd.contains_key("os_release.VERSION_ID.minor"));
    // No VERSION_ID (a rolling release).
    assert_eq!(s("ID=arch\n"), map(&[("os_release.ID", "arch")]));
}

#[test]
fn cpu_vendors_are_cpuids_names() {
    assert_eq!(sources::cpu_vendor("GenuineIntel"), "Intel");
    assert_eq!(sources::cpu_vendor("AuthenticAMD"), "AMD");
    assert_eq!(sources::cpu_vendor("HygonGenuine"), "Hygon");
    assert_eq!(sources::cpu_vendor("CentaurHauls"), "VIA");
    assert_eq!(sources::cpu_vendor("  Shanghai  "), "VendorUnknown");
    // Not x86 (no vendor_id): no model labels.
    assert!(sources::cpu_model("processor\t: 0\nCPU implementer\t: 0x41\n").is_empty());
}

/// NFD's own test data (source/local/testdata/features.d) and the examples
/// of its customization guide.
#[test]
fn feature_files_as_nfd_documents_them() {
    let t = Tree::new("features-d");
    let d = "/etc/kubernetes/node-feature-discovery/features.d";
    t.write(&format!("{d}/valid_feature"), "# +expiry-time=2080-07-28T11:22:33Z\nfeatureKeyValid=featureValue\n")
        .write(&format!("{d}/expired_feature"), "# +expiry-time=2012-07-28T11:22:33Z\nfeatureKeyExpired=featureValue\n")
        .write(&format!("{d}/feature_with_comments"), "# Notes: foo bar\nfeatureKeyRandomComment=featureValue\n")
        .write(
            &format!("{d}/multiple_expiration_dates"),
            "# +expiry-time=2012-07-28T11:22:33Z\nvendor.io/feature1=featureValue\n\n# +expiry-time=2080-07-28T11:22:33Z\nvendor.io/feature2=featureValue2\n\n# +expiry-time=2070-07-28T11:22:33Z\nvendor.io/feature3=featureValue3\n\n# +expiry-time=2002-07-28T11:22:33Z\nvendor.io/feature4=featureValue4\n",
        )
        .write(
            &format!("{d}/features_with_labels"),
            "# +no-feature\nvendor.io/label-only=value\n\nvendor.io/my-feature=value\n\nfoo=bar\n# +no-label\nfoo=baz\nplain\n",
        )
        .write(&format!("{d}/.my.feature"), "hiddenFeatureKey=hiddenFeatureValue\n")
        .write(&format!("{d}/big_file"), "a=b\n".repeat(20_000));
    std::fs::create_dir_all(t.path().join(d.trim_start_matches('/')).join("subdir")).unwrap();
    let out = local::read_dir(&t.root(), d, 1_800_000_000);
    let p = |s: &str| format!("feature.node.kubernetes.io/{s}");
    let expected: BTreeMap<String, String> = [
        (p("featureKeyValid"), "featureValue"),
        (p("featureKeyRandomComment"), "featureValue"),
        ("vendor.io/feature2".into(), "featureValue2"),
        ("vendor.io/feature3".into(), "featureValue3"),
        ("vendor.io/label-only".into(), "value"),
        ("vendor.io/my-feature".into(), "value"),
        (p("plain"), "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect();
    assert_eq!(out.labels, expected);
    assert_eq!(out.expired, 3);
    assert_eq!(out.refused.len(), 1, "{:?}", out.refused);
    assert!(out.refused[0].starts_with("big_file: 80000 bytes, over NFD's limit of 65536"));
    // At 2075, feature3 (2070) has expired too.
    let later = local::read_dir(&t.root(), d, 3_330_000_000);
    assert!(later.labels.contains_key("vendor.io/feature2"));
    assert!(!later.labels.contains_key("vendor.io/feature3"));
    assert_eq!(later.expired, 4);
}

#[test]
fn bad_lines_are_refused_and_the_rest_applies() {
    let t = Tree::new("bad-lines");
    let d = "/features.d";
    let mut bad = b"good=1\n".to_vec();
    bad.extend_from_slice(b"latin1=caf\xe9\n");
    bad.extend_from_slice(b"vendor.io/Bad Name=x\n");
    bad.extend_from_slice(b"value=has spaces\n");
    bad.extend_from_slice(format!("long={}\n", "v".repeat(64)).as_bytes());
    bad.extend_from_slice(format!("{}=1\n", "n".repeat(400)).as_bytes());
    bad.extend_from_slice(b"kubernetes.io/hostname=evil\n");
    bad.extend_from_slice(b"node-role.kubernetes.io/worker\n");
    bad.extend_from_slice(b"gpu.node.kubernetes.io/ok=yes\n");
    bad.extend_from_slice(b"# +frobnicate\n");
    bad.extend_from_slice(b"# +expiry-time=2080-07-28T11:22:33X\n");
    bad.extend_from_slice(b"under.bad.expiry=1\n");
    bad.extend_from_slice(b"# +expiry-time=2080-07-28T13:22:33+02:00\n");
    bad.extend_from_slice(b"after=2\n");
    t.write(&format!("{d}/vendor"), &bad)
        .write(&format!("{d}/other"), "other=ok\n");
    let out = local::read_dir(&t.root(), d, 1_800_000_000);
    let p = |s: &str| format!("feature.node.kubernetes.io/{s}");
    assert_eq!(
        out.labels,
        [
            (p("good"), "1"),
            (p("after"), "2"),
            ("gpu.node.kubernetes.io/ok".into(), "yes"),
            (p("other"), "ok"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect::<BTreeMap<_, _>>()
    );
    let refused = out.refused.join("\n");
    for says in [
        "vendor:2: not UTF-8 text",
        "vendor:3: invalid label name",
        "vendor:4: invalid label value \"has spaces\"",
        "vendor:5: invalid label value",
        "vendor:6: invalid label name",
        "vendor:7: \"kubernetes.io/hostname\": a node may not set a kubernetes.io label on itself",
        "vendor:8: \"node-role.kubernetes.io/worker\": a node may not set",
        "vendor:10: unknown directive \"frobnicate\"",
        "vendor:11: the expiry time \"2080-07-28T11:22:33X\" does not parse",
        "vendor:12: \"under.bad.expiry\" is under an expiry time that does not parse",
    ] {
        assert!(refused.contains(says), "{says}\n{refused}");
    }
    assert_eq!(out.refused.len(), 10, "{refused}");
    // +02:00 is two hours ahead of UTC: "after" expires at 11:22:33Z.
    let at = |now| {
        local::read_dir(&t.root(), d, now)
            .labels
            .contains_key(&p("after"))
    };
    assert!(at(3_489_391_353) && !at(3_489_391_354));
}

#[test]
fn rfc3339_times_as_go_parses_them() {
    assert_eq!(
        local::rfc3339_seconds("2070-07-28T11:22:33Z"),
        Ok(3_173_772_153)
    );
    assert_eq!(
        local::rfc3339_seconds("2070-07-28T13:22:33.5+02:00"),
        Ok(3_173_772_153)
    );
    assert_eq!(
        local::rfc3339_seconds("2070-07-28T06:22:33-05:00"),
        Ok(3_173_772_153)
    );
    assert_eq!(
        local::rfc3339_seconds("2070-07-28T1:22:33Z"),
        Ok(3_173_772_153 - 36_000)
    );
    for bad in [
        "2070-07-28",
        "2070-07-28 11:22:33Z",
        "2070-07-28T11:22:33",
        "tomorrow",
    ] {
        assert!(local::rfc3339_seconds(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_setter_writes_the_files_labels_and_fails_on_bad_settings() {
    use nodestatus_sdk::host;
    let t = Tree::new("setter");
    t.write(
        "/fd/gpu",
        "nvidia.com/gpu.present=true\n# +no-label\nhidden\n",
    );
    let config = format!(
        r#"{{"core": {{"labelSources": ["local"]}}, "featureFilesDir": "{}/fd"}}"#,
        t.path().display()
    );
    host::set_native_config(&config);
    let node = nodestatus_sdk::Node::named("n").to_json();
    let part = nodestatus_sdk::run::<features::Features>(&node)
        .unwrap()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&part).unwrap();
    assert_eq!(
        v["metadata"]["labels"],
        serde_json::json!({"nvidia.com/gpu.present": "true"})
    );
    // The directory it watches is the configured one.
    let subs = <features::Features as nodestatus_sdk::reactor::Reactor>::subscribe();
    assert_eq!(subs.watch, [format!("{}/fd", t.path().display())]);
    host::set_native_config(r#"{"sources": {"pci": {"deviceLabelFields": ["colour"]}}}"#);
    let err = nodestatus_sdk::run::<features::Features>(&node).unwrap_err();
    assert!(err.contains("sources.pci.deviceLabelFields[0]"), "{err}");
}

#[test]
fn a_refused_line_is_reported_once_until_the_refusals_change() {
    use nodestatus_sdk::host;
    let t = Tree::new("report");
    t.write("/fd/bad", "ok=1\nBad Name\n");
    host::set_native_config(&format!(
        r#"{{"core": {{"labelSources": ["local"]}}, "featureFilesDir": "{}/fd"}}"#,
        t.path().display()
    ));
    let node = nodestatus_sdk::Node::named("n").to_json();
    let _ = host::take_native_events();
    for _ in 0..3 {
        nodestatus_sdk::run::<features::Features>(&node).unwrap();
    }
    let events = host::take_native_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].1, features::REFUSED_EVENT);
    assert!(
        events[0].2.contains("bad:2: invalid label name"),
        "{events:?}"
    );
    t.write("/fd/bad", "ok=1\n");
    nodestatus_sdk::run::<features::Features>(&node).unwrap();
    assert!(
        host::take_native_events().is_empty(),
        "none refused now: nothing to say"
    );
}
