//! Tests of the parent module.

use super::*;

#[test]
fn a_directorys_identity_is_read_once_a_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let pass = Facts::new(FactSource::host());
    let first = pass.dir_id(&dir).expect("it exists");
    // Replaced within the pass (the old one kept aside, so that its
    // inode is not reused): the pass keeps what it saw.
    std::fs::rename(&dir, tmp.path().join("old")).unwrap();
    std::fs::create_dir(&dir).unwrap();
    assert_eq!(pass.dir_id(&dir), Some(first));
    // The next pass sees the new directory.
    let next = Facts::new(FactSource::host());
    let again = next.dir_id(&dir).expect("it exists");
    assert_ne!(again, first);
    assert_eq!(
        Facts::new(FactSource::host()).dir_id(&tmp.path().join("none")),
        None
    );
}

#[test]
fn normalize_rejects_escapes_and_relative_paths() {
    assert_eq!(normalize_abs("/proc/../etc"), Some(PathBuf::from("/etc")));
    assert_eq!(normalize_abs("/a/./b/"), Some(PathBuf::from("/a/b")));
    assert_eq!(normalize_abs("proc"), None);
    assert_eq!(normalize_abs("/.."), None);
}

#[test]
fn within_is_component_wise() {
    let granted = vec![PathBuf::from("/proc")];
    assert!(is_within(Path::new("/proc/meminfo"), &granted));
    assert!(is_within(Path::new("/proc"), &granted));
    assert!(!is_within(Path::new("/procfs"), &granted));
    assert!(!is_within(Path::new("/etc"), &granted));
}

#[test]
fn statvfs_stays_beneath_its_root() {
    let root = std::env::temp_dir().join(format!("ns-beneath-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("inside")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
    std::os::unix::fs::symlink("/nonexistent-xyz", root.join("nowhere")).unwrap();
    std::os::unix::fs::symlink("inside", root.join("in")).unwrap();
    assert!(statvfs_beneath(&root, Path::new("")).is_ok());
    assert!(statvfs_beneath(&root, Path::new("in")).is_ok());
    // Out of the root, to a path that exists or not: the same answer.
    let out = statvfs_beneath(&root, Path::new("out")).unwrap_err();
    let nowhere = statvfs_beneath(&root, Path::new("nowhere")).unwrap_err();
    assert_eq!(out.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(out.kind(), nowhere.kind());
    assert_eq!(
        statvfs_beneath(&root, Path::new("inside/../../etc"))
            .unwrap_err()
            .kind(),
        std::io::ErrorKind::NotFound
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_system_uuid_falls_back_as_cadvisors_does() {
    let root = std::env::temp_dir().join(format!("ns-uuid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(
        root.join("etc/machine-id"),
        "3d1219c7c4c5404aaa1f6d2a48adfda4\n",
    )
    .unwrap();
    // No DMI and no device tree (as on this VM): the machine id.
    assert_eq!(
        read_identity(&root).system_uuid,
        "3d1219c7c4c5404aaa1f6d2a48adfda4"
    );
    // A device tree's vm,uuid comes first, without its NUL.
    std::fs::create_dir_all(root.join("proc/device-tree")).unwrap();
    std::fs::write(root.join("proc/device-tree/vm,uuid"), "vm-uuid-1\0").unwrap();
    assert_eq!(read_identity(&root).system_uuid, "vm-uuid-1");
    std::fs::create_dir_all(root.join("sys/class/dmi/id")).unwrap();
    std::fs::write(root.join("sys/class/dmi/id/product_uuid"), "DMI-UUID\n").unwrap();
    assert_eq!(read_identity(&root).system_uuid, "DMI-UUID");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_pass_reads_the_proc_files_it_opens_once_each() {
    let source = FactSource::host();
    let proc = Path::new("/proc");
    let pass = Facts::new(source.clone());
    assert_eq!(source.proc_files_read(), 0);
    let meminfo = pass.proc_file(proc, "meminfo").unwrap().expect("a copy");
    assert!(
        std::fs::read_to_string(&meminfo)
            .unwrap()
            .contains("MemTotal")
    );
    pass.proc_file(proc, "loadavg").unwrap().expect("a copy");
    pass.proc_file(proc, "meminfo").unwrap();
    assert_eq!(source.proc_files_read(), 2, "two files opened: two read");
    assert_eq!(pass.proc_file(proc, "environ").unwrap(), None);
    drop(pass);
    let next = Facts::new(source.clone());
    next.proc_file(proc, "meminfo").unwrap();
    assert_eq!(source.proc_files_read(), 3, "the next pass reads anew");
}

#[test]
fn the_identity_files_are_read_once_per_period() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::create_dir_all(root.join("proc/sys/kernel/random")).unwrap();
    let write = |machine_id: &str, os: &str, boot_id: &str| {
        std::fs::write(root.join("etc/machine-id"), format!("{machine_id}\n")).unwrap();
        std::fs::write(root.join("etc/os-release"), os).unwrap();
        std::fs::write(root.join("proc/sys/kernel/random/boot_id"), boot_id).unwrap();
    };
    write("id-1", "NAME=one\n", "boot-1\n");
    // A virtual clock, in seconds after `start`.
    let start = Instant::now();
    let secs = Arc::new(AtomicU64::new(0));
    let clock = secs.clone();
    let source = FactSource {
        root: root.to_owned(),
        ..FactSource::host()
    }
    .with_clock(move || start + Duration::from_secs(clock.load(Ordering::SeqCst)));
    let pass = |source: &FactSource| {
        let facts = Facts::new(source.clone());
        let s = facts.system();
        (
            s.machine_id.clone(),
            s.os_release.clone(),
            s.system_uuid.clone(),
            s.boot_id.clone(),
        )
    };
    // What a pass sees: the machine id, os-release, the system uuid
    // (the machine id here: no DMI, no device tree) and the boot id.
    let seen = |id: &str, os: &str, boot: &str| {
        (id.to_owned(), os.to_owned(), id.to_owned(), boot.to_owned())
    };
    let one = seen("id-1", "NAME=one\n", "boot-1");
    assert_eq!(pass(&source), one, "read at the first pass");
    // Changed on disk: within the period, every pass (each a new
    // `Facts` of a clone of the source) is served what was read.
    write("id-2", "NAME=two\n", "boot-2\n");
    for at in [1, 60, IDENTITY_PERIOD.as_secs() - 1] {
        secs.store(at, Ordering::SeqCst);
        assert_eq!(pass(&source), one, "at {at} s: from memory");
    }
    // After the period, read again: the changed files are seen.
    secs.store(IDENTITY_PERIOD.as_secs(), Ordering::SeqCst);
    let two = seen("id-2", "NAME=two\n", "boot-2");
    assert_eq!(pass(&source), two, "read again after the period");
    // And kept for a period from that read.
    write("id-3", "NAME=three\n", "boot-3\n");
    secs.store(2 * IDENTITY_PERIOD.as_secs() - 1, Ordering::SeqCst);
    assert_eq!(pass(&source), two);
    // A fixed source never reads them.
    let fixed = FactSource::fixed(
        SystemInfo {
            machine_id: "fixed".into(),
            ..SystemInfo::default()
        },
        Vec::new(),
    );
    assert_eq!(Facts::new(fixed).system().machine_id, "fixed");
}

#[test]
fn real_machine_facts_are_read() {
    let facts = Facts::new(FactSource::host());
    assert!(!facts.system().kernel_release.is_empty());
    assert!(facts.system().cpus >= 1);
    assert!(facts.interfaces().iter().any(|i| i.loopback));
    let st = statvfs(Path::new("/")).unwrap();
    assert!(st.total_bytes > 0 && st.total_bytes >= st.free_bytes);
}
