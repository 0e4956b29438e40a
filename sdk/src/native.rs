//! Native stand-ins for the host functions, so that a setter's source can be
//! unit-tested and benchmarked without a WebAssembly host.

use std::cell::RefCell;

use super::{EventType, FsStats, Level, NetworkInterface, SystemInfo};

thread_local! {
    static CONFIG: RefCell<String> = RefCell::new("{}".to_owned());
    static PROBLEMS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Sets what `config()` returns on this thread.
pub fn set_native_config(json: &str) {
    CONFIG.with(|c| *c.borrow_mut() = json.to_owned());
}

/// Sets what `node_problems()` returns on this thread.
pub fn set_native_problems(problems: Vec<String>) {
    PROBLEMS.with(|p| *p.borrow_mut() = problems);
}

pub fn log(_level: Level, _message: &str) {}

pub fn config() -> String {
    CONFIG.with(|c| c.borrow().clone())
}

pub fn record_event(_event_type: EventType, _reason: &str, _message: &str) {}

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Read once per thread, as the host reads them once per pass.
pub fn system_info() -> SystemInfo {
    thread_local! {
        static INFO: SystemInfo = read_system_info();
    }
    INFO.with(Clone::clone)
}

fn read_system_info() -> SystemInfo {
    SystemInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel_release: read("/proc/sys/kernel/osrelease"),
        kernel_version: read("/proc/sys/kernel/version"),
        machine: std::env::consts::ARCH.to_owned(),
        os_release: std::fs::read_to_string("/etc/os-release").unwrap_or_default(),
        machine_id: read("/etc/machine-id"),
        system_uuid: read("/sys/class/dmi/id/product_uuid"),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
    }
}

pub fn network_interfaces() -> Vec<NetworkInterface> {
    Vec::new()
}

pub fn fs_stats(path: &str) -> Result<FsStats, String> {
    Err(format!(
        "fs-stats({path:?}) is not available outside the host"
    ))
}

pub fn node_problems() -> Vec<String> {
    PROBLEMS.with(|p| p.borrow().clone())
}
