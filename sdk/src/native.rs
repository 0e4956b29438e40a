//! Native stand-ins for the host functions, so that a setter's source can be
//! unit-tested and benchmarked without a WebAssembly host.

use std::cell::RefCell;
use std::rc::Rc;

use super::{
    ContainerRuntimeInfo, EventType, FsStats, Level, NetworkInterface, RuntimeError, SystemInfo,
};

thread_local! {
    static CONFIG: RefCell<String> = RefCell::new("{}".to_owned());
    static PROBLEMS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static EVENTS: RefCell<Vec<(EventType, String, String)>> = const { RefCell::new(Vec::new()) };
    static HOST: RefCell<Option<Rc<dyn NativeHost>>> = const { RefCell::new(None) };
    static RUNTIME: RefCell<Option<Result<ContainerRuntimeInfo, RuntimeError>>> =
        const { RefCell::new(None) };
}

/// Sets what `container_runtime()` returns on this thread (`None`: not
/// configured, as outside a host with a runtime).
pub fn set_native_runtime(answer: Option<Result<ContainerRuntimeInfo, RuntimeError>>) {
    RUNTIME.with(|r| *r.borrow_mut() = answer);
}

pub fn container_runtime() -> Result<ContainerRuntimeInfo, RuntimeError> {
    RUNTIME.with(|r| r.borrow().clone()).unwrap_or_else(|| {
        Err(RuntimeError::NotConfigured(
            "no container runtime outside the host (set_native_runtime)".to_owned(),
        ))
    })
}

/// The machine facts the native stand-ins answer with, when a test or a
/// benchmark wants the real host's answers (the nodestatus host's own fact
/// reader) rather than the built-in ones: no interfaces, no `fs_stats`.
pub trait NativeHost {
    /// What `system_info()` returns.
    fn system_info(&self) -> SystemInfo;
    /// What `network_interfaces()` returns.
    fn network_interfaces(&self) -> Vec<NetworkInterface>;
    /// What `fs_stats(path)` returns.
    fn fs_stats(&self, path: &str) -> Result<FsStats, String>;
}

/// Answers the fact functions on this thread from `host` (`None`: the
/// built-in answers).
pub fn set_native_host(host: Option<Rc<dyn NativeHost>>) {
    HOST.with(|h| *h.borrow_mut() = host);
}

fn with_host<T>(f: impl FnOnce(&dyn NativeHost) -> T) -> Option<T> {
    HOST.with(|h| h.borrow().as_deref().map(f))
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

pub fn record_event(event_type: EventType, reason: &str, message: &str) {
    EVENTS.with(|e| {
        e.borrow_mut()
            .push((event_type, reason.to_owned(), message.to_owned()))
    });
}

/// The events recorded on this thread since the last call, oldest first
/// (a test's view of `record_event`).
pub fn take_native_events() -> Vec<(EventType, String, String)> {
    EVENTS.with(|e| std::mem::take(&mut *e.borrow_mut()))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Read once per thread, as the host reads them once per pass.
pub fn system_info() -> SystemInfo {
    if let Some(info) = with_host(|h| h.system_info()) {
        return info;
    }
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
        cpus: online_cpus(&read("/sys/devices/system/cpu/online")).unwrap_or(1),
    }
}

/// The number of CPUs in a sysfs CPU list (`0-3,8-11`), as the host's
/// `cpus` counts them: every logical CPU online, not only those this
/// process may use.
fn online_cpus(list: &str) -> Option<u32> {
    list.trim().split(',').try_fold(0u32, |n, range| {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
        n.checked_add(b.checked_sub(a)? + 1)
    })
}

pub fn network_interfaces() -> Vec<NetworkInterface> {
    with_host(|h| h.network_interfaces()).unwrap_or_default()
}

pub fn fs_stats(path: &str) -> Result<FsStats, String> {
    if let Some(r) = with_host(|h| h.fs_stats(path)) {
        return r;
    }
    Err(format!(
        "fs-stats({path:?}) is not available outside the host"
    ))
}

pub fn node_problems() -> Vec<String> {
    PROBLEMS.with(|p| p.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::online_cpus;

    #[test]
    fn a_sysfs_cpu_list_is_counted() {
        assert_eq!(online_cpus("0\n"), Some(1));
        assert_eq!(online_cpus("0-1\n"), Some(2));
        assert_eq!(online_cpus("0-3,8-11"), Some(8));
        assert_eq!(online_cpus("0,2,4-5"), Some(4));
        assert_eq!(online_cpus(""), None);
        assert_eq!(online_cpus("3-1"), None);
    }
}
