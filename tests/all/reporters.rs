//! The vendor reporters (plugins/gpu, plugins/disk) in the real host, on
//! fixture trees of real file contents served through mapped grants.

use std::path::{Path, PathBuf};

use nodestatus_runtime::{PathGrant, PluginSettings};
use nodestatus_tests::{built, drop_plugin, nodes};
use serde_json::{Value, json};

use crate::common::*;

pub(crate) fn gpu_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/gpu/tests/fixtures")
        .join(name)
}

pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A sysfs tree laid out like the kernel's: each PCI device of the fixture
/// lives under `devices/pci0000:00/`, and `bus/pci/devices/<addr>` is a
/// relative symlink to it, so the test also shows that a `/sys` grant lets
/// the plugin follow sysfs's own links.
pub(crate) fn sysfs_with_links(fixture_sys: &Path, to: &Path) {
    let real = to.join("devices/pci0000:00");
    let links = to.join("bus/pci/devices");
    std::fs::create_dir_all(&links).unwrap();
    for e in std::fs::read_dir(fixture_sys.join("bus/pci/devices")).unwrap() {
        let e = e.unwrap();
        copy_tree(&e.path(), &real.join(e.file_name()));
        std::os::unix::fs::symlink(
            Path::new("../../../devices/pci0000:00").join(e.file_name()),
            links.join(e.file_name()),
        )
        .unwrap();
    }
}

#[test]
fn gpu_sees_a_driver_that_loads_after_it_started() {
    // The machine: two NVIDIA H100s on the PCI bus; the driver's /proc tree
    // is absent (not installed yet) but granted.
    let machine = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    sysfs_with_links(
        &gpu_fixture("nvidia-nodriver/sys"),
        &machine.path().join("sys"),
    );
    let proc_nvidia = machine.path().join("proc/driver/nvidia");
    let (sys, nv) = (machine.path().join("sys"), proc_nvidia.clone());
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: vec![
            PathGrant {
                path: "/proc/driver/nvidia".into(),
                from: nv.clone(),
            },
            PathGrant {
                path: "/sys".into(),
                from: sys.clone(),
            },
        ],
        config: json!({"advertise": true}),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "gpu.wasm", Path::new(built::GPU));
    dir.rescan();
    assert_eq!(dir.current().setters().len(), 1, "gpu loads");

    let node = pass_ok(&dir, &nodes::small_node("n1"));
    let c = condition_of(&node, "GPUHealthy").expect("GPUHealthy is set");
    assert_eq!(c["status"], "False", "{c}");
    assert_eq!(c["reason"], "GPUDriverNotLoaded", "{c}");
    assert_eq!(node["metadata"]["labels"]["nvidia.com/gpu.count"], "2");
    assert_eq!(node["status"]["capacity"]["nvidia.com/gpu"], "2");
    assert_eq!(node["status"]["allocatable"]["nvidia.com/gpu"], "0");

    // The driver loads. Same plugin instance, no reload, next pass.
    copy_tree(&gpu_fixture("nvidia-2gpu/proc/driver/nvidia"), &proc_nvidia);
    let node = pass_ok(&dir, &node);
    let c = condition_of(&node, "GPUHealthy").unwrap();
    assert_eq!(c["status"], "True", "{c}");
    assert_eq!(c["reason"], "GPUsHealthy", "{c}");
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["nvidia.com/gpu.count"], "2");
    assert_eq!(labels["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
    assert_eq!(node["status"]["allocatable"]["nvidia.com/gpu"], "2");
}

#[test]
fn gpu_without_a_sys_grant_sees_no_pci_devices() {
    // Granting only /sys/bus/pci/devices hides every device behind its
    // symlink: the reason the plugin asks for all of /sys.
    let machine = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    sysfs_with_links(
        &gpu_fixture("nvidia-nodriver/sys"),
        &machine.path().join("sys"),
    );
    let pci = machine.path().join("sys/bus/pci/devices");
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: vec![PathGrant {
            path: "/sys/bus/pci/devices".into(),
            from: pci.clone(),
        }],
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "gpu.wasm", Path::new(built::GPU));
    dir.rescan();
    let node = pass_ok(&dir, &nodes::small_node("n1"));
    assert!(condition_of(&node, "GPUHealthy").is_none(), "{node}");
    assert!(node["metadata"]["labels"]["nvidia.com/gpu.count"].is_null());
}

#[test]
fn disk_reports_usage_from_statvfs_and_counts_healthy_mounts() {
    // A writable directory of this machine that the plugin sees at
    // /mnt/data, and a configured mount that was not granted. (Read-only
    // mounts are covered by the plugin's own tests: an unprivileged test
    // cannot make one here.)
    let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data_path = data.path().to_owned();
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: vec![PathGrant {
            path: "/mnt/data".into(),
            from: data_path.clone(),
        }],
        config: json!({
            "mounts": [
                {"path": "/mnt/data"},
                {"path": "/mnt/missing"},
            ],
            "extendedResource": {"name": "example.com/local-disk", "mounts": ["mnt-data"]},
        }),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "disk.wasm", Path::new(built::DISK));
    dir.rescan();
    let node = pass_ok(&dir, &nodes::small_node("n1"));

    let ann = &node["metadata"]["annotations"];
    let data_ann: Value =
        serde_json::from_str(ann["disk.nodestatus.io/mnt-data"].as_str().unwrap()).unwrap();
    let st = nodestatus_runtime::facts::statvfs(data.path()).unwrap();
    assert_eq!(data_ann["path"], "/mnt/data");
    assert_eq!(data_ann["totalBytes"], st.total_bytes, "{data_ann}");
    assert_eq!(data_ann["readOnly"], false);
    // Available bytes move with other writers on this machine; within 1 GiB.
    let avail = data_ann["availableBytes"].as_u64().unwrap();
    assert!(avail.abs_diff(st.available_bytes) < 1 << 30, "{data_ann}");
    let missing: Value =
        serde_json::from_str(ann["disk.nodestatus.io/mnt-missing"].as_str().unwrap()).unwrap();
    assert!(
        missing["error"]
            .as_str()
            .unwrap()
            .contains("not inside a path granted"),
        "{missing}"
    );

    let c = condition_of(&node, "ReadonlyFilesystem").unwrap();
    assert_eq!(c["status"], "False", "{c}");
    assert_eq!(c["reason"], "FilesystemIsNotReadOnly");
    assert_eq!(node["status"]["capacity"]["example.com/local-disk"], "1");
    assert!(
        condition_of(&node, "DiskPressure").is_none(),
        "disk never writes DiskPressure"
    );
}
