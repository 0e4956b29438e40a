//! Machine facts that WASI has no API for: uname, identity files, network
//! interfaces and filesystem statistics.
//!
//! [`Facts`] reads each group lazily and at most once, so a pass that creates
//! one `Facts` and shares it between its setters reads the interfaces once,
//! not once per plugin. The identity files (`os-release`, the machine id,
//! the system uuid and the boot id) are not read every pass at all: the
//! long-lived [`FactSource`] keeps them for [`IDENTITY_PERIOD`], the period
//! on which cadvisor reads them again for the kubelet.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::proc_view::{self, Pool, ProcGrant, Snapshot};
use std::ffi::{CStr, CString};
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// How long the identity files of [`SystemInfo`] (`os_release`,
/// `machine_id`, `system_uuid`, `boot_id`) are served from the
/// [`FactSource`]'s memory before they are read again: cadvisor's
/// `update_machine_info_interval`, 5 minutes by default
/// (`lib/manager/manager.go` of github.com/google/cadvisor:
/// `updateMachineInfo` re-reads `machine.Info`, which holds `MachineID`,
/// `SystemUUID` and `BootID`, on a ticker of that period). The kubelet reads
/// cadvisor's machine info once at start ("assumes that the machine info
/// can't change without a reboot", `GetCachedMachineInfo` in
/// `pkg/kubelet/kubelet_getters.go`), so its machine id, system uuid and
/// boot id never change while it runs. `os-release` is the one file that
/// cadvisor reads on each `GetVersionInfo` call (the kubelet's `osImage`,
/// every status update): an `os-release` changed in place, without a
/// reboot (a point release of the distribution's base package), shows here
/// within this period rather than at the next status update. The kernel's
/// `uname` and the CPUs online are read every pass (a system call and one
/// small sysfs file).
pub const IDENTITY_PERIOD: Duration = Duration::from_secs(5 * 60);

/// Kernel and identity facts, as the `system-info` WIT record carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SystemInfo {
    /// `uname -n`.
    pub hostname: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// `uname -m`.
    pub machine: String,
    /// `/etc/os-release` or `/usr/lib/os-release`.
    pub os_release: String,
    /// `/etc/machine-id` or `/var/lib/dbus/machine-id`.
    pub machine_id: String,
    /// `/sys/class/dmi/id/product_uuid`, else (as cadvisor does)
    /// `/proc/device-tree/system-id`, `/proc/device-tree/vm,uuid`, then
    /// `/etc/machine-id`.
    pub system_uuid: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// Logical CPUs online.
    pub cpus: u32,
}

/// One address on an interface.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IpAddress {
    /// The address.
    pub address: IpAddr,
    /// Its prefix length.
    pub prefix_len: u8,
}

/// A network interface.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NetworkInterface {
    /// Name, such as `eth0`.
    pub name: String,
    /// `IFF_UP`.
    pub up: bool,
    /// `IFF_LOOPBACK`.
    pub loopback: bool,
    /// IPv4 first, then IPv6, each in the kernel's order.
    pub addresses: Vec<IpAddress>,
}

/// `statvfs(3)` in bytes and inodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FsStats {
    /// Total size.
    pub total_bytes: u64,
    /// Free bytes, root's reserve included.
    pub free_bytes: u64,
    /// Bytes available to unprivileged users.
    pub available_bytes: u64,
    /// Total inodes.
    pub total_inodes: u64,
    /// Free inodes.
    pub free_inodes: u64,
    /// `ST_RDONLY`.
    pub read_only: bool,
}

/// The identity files of [`SystemInfo`], as read at one time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Identity {
    os_release: String,
    machine_id: String,
    system_uuid: String,
    boot_id: String,
}

/// A monotonic clock: the real one, or a test's.
#[derive(Clone)]
struct Clock(Arc<dyn Fn() -> Instant + Send + Sync>);

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self(Arc::new(Instant::now))
    }
}

/// The identity files last read, and when.
#[derive(Debug, Default)]
struct IdentityCache {
    read: Mutex<Option<(Instant, Arc<Identity>)>>,
}

impl IdentityCache {
    /// The identity as read within [`IDENTITY_PERIOD`] before `now`, else
    /// read again beneath `root`.
    fn get(&self, root: &Path, now: Instant) -> Arc<Identity> {
        let mut read = self.read.lock().expect("identity lock");
        if let Some((at, id)) = &*read
            && now.saturating_duration_since(*at) < IDENTITY_PERIOD
        {
            return id.clone();
        }
        let id = Arc::new(read_identity(root));
        *read = Some((now, id.clone()));
        id
    }
}

/// Where the facts come from. Tests point it at a fixture tree; production
/// uses the real machine (`root = /`). One source serves a node's passes
/// for as long as it runs (clones share what it keeps): the `/proc` view's
/// directories, and the identity files for [`IDENTITY_PERIOD`].
#[derive(Debug, Clone)]
pub struct FactSource {
    root: PathBuf,
    /// The filtered `/proc` views' directories, reused from pass to pass.
    proc_views: Arc<Pool>,
    /// The identity files, read at most once per [`IDENTITY_PERIOD`].
    identity: Arc<IdentityCache>,
    /// What [`Self::identity`] takes the time from.
    clock: Clock,
    override_system: Option<SystemInfo>,
    override_interfaces: Option<Vec<NetworkInterface>>,
}

impl Default for FactSource {
    fn default() -> Self {
        Self::host()
    }
}

impl FactSource {
    /// The real machine.
    pub fn host() -> Self {
        Self {
            root: PathBuf::from("/"),
            proc_views: Arc::default(),
            identity: Arc::default(),
            clock: Clock::default(),
            override_system: None,
            override_interfaces: None,
        }
    }

    /// Fixed facts, for tests and `once --facts`.
    pub fn fixed(system: SystemInfo, interfaces: Vec<NetworkInterface>) -> Self {
        Self {
            override_system: Some(system),
            override_interfaces: Some(interfaces),
            ..Self::host()
        }
    }

    /// A simulated machine (`nodestatus simulate`): fixed kernel facts and
    /// interfaces, and every granted host path read beneath `root` instead
    /// of `/` (a grant of `/proc` reads `<root>/proc`, a plain directory
    /// of files the simulation writes; `statvfs` of `/` is of `root`).
    pub fn rooted(root: PathBuf, system: SystemInfo, interfaces: Vec<NetworkInterface>) -> Self {
        Self {
            root,
            ..Self::fixed(system, interfaces)
        }
    }

    /// The same source, whose identity cache takes the time from `now`
    /// instead of [`Instant::now`] (a test's virtual clock). The cache
    /// starts empty.
    pub fn with_clock(self, now: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        Self {
            identity: Arc::default(),
            clock: Clock(Arc::new(now)),
            ..self
        }
    }

    /// How many `/proc` files the filtered views of this source (and of its
    /// clones) have read, all passes together.
    pub fn proc_files_read(&self) -> u64 {
        self.proc_views.reads()
    }

    /// The identity files, as read within the last [`IDENTITY_PERIOD`].
    fn identity(&self) -> Arc<Identity> {
        self.identity.get(&self.root, (self.clock.0)())
    }

    /// Where the granted host path `from` is on this machine: itself on
    /// the real machine, beneath the root of a [`Self::rooted`] one.
    pub fn host_path<'a>(&self, from: &'a Path) -> std::borrow::Cow<'a, Path> {
        if self.root == Path::new("/") {
            return std::borrow::Cow::Borrowed(from);
        }
        let rest = from.strip_prefix("/").unwrap_or(from);
        std::borrow::Cow::Owned(self.root.join(rest))
    }
}

/// Facts for one pass, each group read on first use.
#[derive(Debug, Default)]
pub struct Facts {
    source: FactSource,
    system: OnceLock<SystemInfo>,
    interfaces: OnceLock<Vec<NetworkInterface>>,
    /// The filtered `/proc` views of this pass, by host procfs root.
    proc_views: Mutex<HashMap<PathBuf, Arc<Snapshot>>>,
    /// What each granted host directory is in this pass (`None`: absent).
    grants: Mutex<HashMap<PathBuf, Option<ProcGrant>>>,
    /// Which directory each preopened host path is in this pass.
    dir_ids: Mutex<HashMap<PathBuf, Option<(u64, u64)>>>,
}

impl Facts {
    /// Facts read from `source` on demand.
    pub fn new(source: FactSource) -> Self {
        Self {
            source,
            system: OnceLock::new(),
            interfaces: OnceLock::new(),
            proc_views: Mutex::new(HashMap::new()),
            grants: Mutex::new(HashMap::new()),
            dir_ids: Mutex::new(HashMap::new()),
        }
    }

    /// What the granted host directory `from` is in this pass, as far as
    /// procfs goes ([`proc_view::classify`]); `None` when it does not exist.
    /// Looked at once per pass, and shared by the pass's calls.
    pub(crate) fn grant(&self, from: &Path) -> Option<ProcGrant> {
        let mut grants = self.grants.lock().expect("grants lock");
        if let Some(g) = grants.get(from) {
            return g.clone();
        }
        let host = self.source.host_path(from);
        let g = path_exists(&host).then(|| proc_view::classify(&host));
        grants.insert(from.to_owned(), g.clone());
        g
    }

    /// Which directory the host path `host` is in this pass, as its device
    /// and inode (`None`: it cannot be read): a directory removed and made
    /// again is another one. Looked at once per pass and shared by the
    /// pass's calls (a `stat` of each preopen in every call was a fifth of a
    /// `/proc` reader's call).
    pub(crate) fn dir_id(&self, host: &Path) -> Option<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let mut ids = self.dir_ids.lock().expect("dir ids lock");
        if let Some(id) = ids.get(host) {
            return *id;
        }
        let id = std::fs::metadata(host).ok().map(|m| (m.dev(), m.ino()));
        ids.insert(host.to_owned(), id);
        id
    }

    /// The filtered view of the procfs root `from` for this pass, taken on
    /// first use and shared by the pass's setters (its directory goes back to
    /// the source's pool with the facts).
    pub(crate) fn proc_view(&self, from: &Path) -> std::io::Result<Arc<Snapshot>> {
        let mut views = self.proc_views.lock().expect("proc views lock");
        if let Some(v) = views.get(from) {
            return Ok(v.clone());
        }
        let v = Arc::new(self.source.proc_views.take(&self.source.host_path(from))?);
        views.insert(from.to_owned(), v.clone());
        Ok(v)
    }

    /// Where the granted host path `from` is ([`FactSource::host_path`]).
    pub fn host_path<'a>(&self, from: &'a Path) -> std::borrow::Cow<'a, Path> {
        self.source.host_path(from)
    }

    /// The file `name` of this pass's filtered view of the procfs root
    /// `from` (see [`proc_view`]), copied for the pass as a setter's first
    /// open of it copies it: the pass's setters and later calls see the
    /// same copy. Its path in the view; `None` when `name` is not one of
    /// [`proc_view::PROC_FILES`] or the host has no such file.
    pub fn proc_file(&self, from: &Path, name: &str) -> std::io::Result<Option<PathBuf>> {
        let Some(i) = proc_view::file_index(name) else {
            return Ok(None);
        };
        let view = self.proc_view(from)?;
        view.copy(i)?;
        let path = view.path().join(proc_view::PROC_FILES[i]);
        Ok(path_exists(&path).then_some(path))
    }

    /// Kernel and identity facts: `uname` and the CPUs online as they are
    /// now, the identity files as the source read them within the last
    /// [`IDENTITY_PERIOD`].
    pub fn system(&self) -> &SystemInfo {
        self.system
            .get_or_init(|| match &self.source.override_system {
                Some(fixed) => fixed.clone(),
                None => system_info(&self.source.identity()),
            })
    }

    /// The machine's swap in bytes: `SwapTotal` of `/proc/meminfo` (beneath
    /// a simulated machine's root), as cadvisor reads it for the kubelet;
    /// `None` when it cannot be read.
    pub fn swap_bytes(&self) -> Option<u64> {
        let text =
            std::fs::read_to_string(self.source.host_path(Path::new("/proc/meminfo"))).ok()?;
        let line = text.lines().find(|l| l.starts_with("SwapTotal:"))?;
        let kb: u64 = line
            .trim_start_matches("SwapTotal:")
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        kb.checked_mul(1024)
    }

    /// Whether this process runs in a user namespace other than the
    /// initial one (the kubelet's `userns.RunningInUserNS`): its
    /// `/proc/self/uid_map` maps less than every uid from 0. Read once
    /// per process: a process never changes its user namespace.
    pub fn running_in_user_namespace(&self) -> Option<bool> {
        static IN_USER_NAMESPACE: OnceLock<Option<bool>> = OnceLock::new();
        *IN_USER_NAMESPACE.get_or_init(|| {
            let map = std::fs::read_to_string("/proc/self/uid_map").ok()?;
            let fields: Vec<&str> = map.split_whitespace().collect();
            Some(fields != ["0", "0", "4294967295"])
        })
    }

    /// Network interfaces and their addresses.
    pub fn interfaces(&self) -> &[NetworkInterface] {
        self.interfaces.get_or_init(|| {
            self.source
                .override_interfaces
                .clone()
                .unwrap_or_else(read_interfaces)
        })
    }
}

fn read_first(root: &Path, candidates: &[&str]) -> String {
    candidates
        .iter()
        .find_map(|c| std::fs::read_to_string(root.join(c.trim_start_matches('/'))).ok())
        .unwrap_or_default()
}

/// The identity files beneath `root`.
fn read_identity(root: &Path) -> Identity {
    Identity {
        os_release: read_first(root, &["/etc/os-release", "/usr/lib/os-release"]),
        machine_id: read_first(root, &["/etc/machine-id", "/var/lib/dbus/machine-id"])
            .trim()
            .to_owned(),
        // cadvisor's order: DMI, then the device tree (which ends its
        // strings with NUL), then the machine id.
        system_uuid: read_first(
            root,
            &[
                "/sys/class/dmi/id/product_uuid",
                "/proc/device-tree/system-id",
                "/proc/device-tree/vm,uuid",
                "/etc/machine-id",
            ],
        )
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .to_owned(),
        boot_id: read_first(root, &["/proc/sys/kernel/random/boot_id"])
            .trim()
            .to_owned(),
    }
}

/// `uname` and the CPUs online, read now, with `identity`.
fn system_info(identity: &Identity) -> SystemInfo {
    // SAFETY: uname fills the zeroed struct; every field is a NUL-terminated
    // array of c_char.
    let uts = unsafe {
        let mut uts: libc::utsname = std::mem::zeroed();
        libc::uname(&mut uts);
        uts
    };
    let field = |f: &[libc::c_char]| {
        // SAFETY: uname guarantees NUL termination within the array.
        unsafe { CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    SystemInfo {
        hostname: field(&uts.nodename),
        kernel_release: field(&uts.release),
        kernel_version: field(&uts.version),
        machine: field(&uts.machine),
        os_release: identity.os_release.clone(),
        machine_id: identity.machine_id.clone(),
        system_uuid: identity.system_uuid.clone(),
        boot_id: identity.boot_id.clone(),
        cpus: online_cpus(),
    }
}

/// The machine's logical CPUs online, as the kubelet counts them for
/// `capacity.cpu`: `sysconf(_SC_NPROCESSORS_ONLN)`, which glibc reads from
/// `/sys/devices/system/cpu/online`. Not `available_parallelism`: that is
/// what this process may use (its affinity, its cgroup's CPU quota), which
/// in a pod is the CPU manager's shared pool or the pod's CPU limit, not
/// the node's.
fn online_cpus() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

fn read_interfaces() -> Vec<NetworkInterface> {
    let mut by_name: BTreeMap<String, NetworkInterface> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below; we only read it.
    if unsafe { libc::getifaddrs(&mut ifap) } != 0 {
        return Vec::new();
    }
    let mut cur = ifap;
    while !cur.is_null() {
        // SAFETY: cur walks the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        // SAFETY: ifa_name is a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let entry = by_name.entry(name.clone()).or_insert_with(|| {
            order.push(name.clone());
            NetworkInterface {
                name,
                up: ifa.ifa_flags & libc::IFF_UP as u32 != 0,
                loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0,
                addresses: Vec::new(),
            }
        });
        // SAFETY: the sockaddr pointers, when non-null, point at a sockaddr of
        // the family they declare.
        let (addr, mask) = unsafe { (sockaddr_ip(ifa.ifa_addr), sockaddr_ip(ifa.ifa_netmask)) };
        if let Some(address) = addr {
            let prefix_len = match mask {
                Some(IpAddr::V4(m)) => u32::from(m).count_ones() as u8,
                Some(IpAddr::V6(m)) => u128::from(m).count_ones() as u8,
                None => 0,
            };
            entry.addresses.push(IpAddress {
                address,
                prefix_len,
            });
        }
    }
    // SAFETY: ifap came from getifaddrs.
    unsafe { libc::freeifaddrs(ifap) };
    order
        .into_iter()
        .filter_map(|n| by_name.remove(&n))
        .map(|mut i| {
            i.addresses.sort_by_key(|a| a.address.is_ipv6());
            i
        })
        .collect()
}

/// # Safety
/// `sa` is null or points at a valid sockaddr.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: per the function's contract.
    unsafe {
        match (*sa).sa_family as i32 {
            libc::AF_INET => {
                let sin = &*(sa as *const libc::sockaddr_in);
                Some(IpAddr::from(
                    u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                ))
            }
            libc::AF_INET6 => {
                let sin6 = &*(sa as *const libc::sockaddr_in6);
                Some(IpAddr::from(sin6.sin6_addr.s6_addr))
            }
            _ => None,
        }
    }
}

/// Normalizes an absolute path lexically: no `.`, no `..`, no trailing slash.
/// Returns `None` for a relative path or one that climbs above `/`.
pub fn normalize_abs(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(s) => out.push(s),
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Whether `path` lies at or under one of `granted` (component-wise, after
/// normalization).
pub fn is_within(path: &Path, granted: &[PathBuf]) -> bool {
    granted.iter().any(|g| path.starts_with(g))
}

/// `statvfs(3)` on `rest` resolved beneath the directory `root`: `..` and
/// symlinks may move around inside `root` but never out of it
/// (`openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`). A path that escapes
/// reports "not found", the same as one that does not exist, so the answer
/// says nothing about the host outside `root`.
pub fn statvfs_beneath(root: &Path, rest: &Path) -> std::io::Result<FsStats> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
    let dir = std::fs::File::open(root)?;
    let rest = if rest.as_os_str().is_empty() {
        CString::new(".").expect("no NUL")
    } else {
        CString::new(rest.as_os_str().as_encoded_bytes()).map_err(|_| not_found())?
    };
    /// `struct open_how` of openat2(2).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads `how` (of the size given) and the NUL-terminated
    // path; on success it returns a new descriptor that we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            rest.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EXDEV | libc::ELOOP | libc::ENOENT | libc::ENOTDIR) => not_found(),
            _ => err,
        });
    }
    // SAFETY: fd is a fresh descriptor from openat2.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: fstatvfs fills the zeroed struct on success.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::fstatvfs(fd.as_raw_fd(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        st
    };
    Ok(fs_stats(&st))
}

fn fs_stats(st: &libc::statvfs) -> FsStats {
    let frsize = st.f_frsize;
    FsStats {
        total_bytes: st.f_blocks * frsize,
        free_bytes: st.f_bfree * frsize,
        available_bytes: st.f_bavail * frsize,
        total_inodes: st.f_files,
        free_inodes: st.f_ffree,
        read_only: st.f_flag & libc::ST_RDONLY != 0,
    }
}

/// `statvfs(3)` on `path`.
pub fn statvfs(path: &Path) -> std::io::Result<FsStats> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs fills the zeroed struct on success.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        st
    };
    Ok(fs_stats(&st))
}

/// A condition of the runtime (CRI `RuntimeCondition`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeCondition {
    /// `RuntimeReady`, `NetworkReady`, ...
    pub type_: String,
    /// Whether it holds.
    pub status: bool,
    /// Why not.
    pub reason: String,
    /// Why not, for people.
    pub message: String,
}

/// An image the runtime holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeImage {
    /// Its id.
    pub id: String,
    /// Its tags.
    pub repo_tags: Vec<String>,
    /// Its digests.
    pub repo_digests: Vec<String>,
    /// Its size in bytes.
    pub size: u64,
}

/// What the container runtime said in one pass (CRI `Version`, `Status`
/// and `ListImages`), as the engine read it; plugins granted
/// `containerRuntime` read it through `host.container-runtime`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeFacts {
    /// `runtime_name`, for example `containerd`.
    pub name: String,
    /// `runtime_version`, for example `1.6.20~ds1`.
    pub version: String,
    /// `runtime_api_version`, for example `v1`.
    pub api_version: String,
    /// Its status conditions.
    pub conditions: Vec<RuntimeCondition>,
    /// Its images.
    pub images: Vec<RuntimeImage>,
    /// Its runtime handlers (CRI `StatusResponse.runtime_handlers`, 1.30+;
    /// empty from older runtimes such as containerd 1.6), in its order.
    pub handlers: Vec<RuntimeHandler>,
    /// Its features (CRI `StatusResponse.features`, 1.31+; `None` from
    /// older runtimes).
    pub features: Option<RuntimeFeatures>,
}

pub use nodestatus_apimachinery::RuntimeHandler;

/// The runtime's features, as CRI's `RuntimeFeatures` gives them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeFeatures {
    /// `supplemental_groups_policy`: the runtime supports
    /// `SupplementalGroupsPolicy` and `ContainerUser`.
    pub supplemental_groups_policy: bool,
}

/// Whether `p` exists. Only "not found" counts as absent: a path that
/// exists but cannot be read is left to the preopen, whose error names it.
pub(crate) fn path_exists(p: &std::path::Path) -> bool {
    !matches!(std::fs::metadata(p), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests;
