//! Test kit for nodestatus: the plugins built from `plugins/`, small hostile
//! WAT components, sample nodes, and helpers to drop files into a watched
//! directory the way users are told to (write a temp file, then rename).

use std::path::{Path, PathBuf};

pub mod hostile;
pub mod nodes;
pub mod patch;
pub mod registry;

/// Paths of the components built from `plugins/` by this crate's build script.
pub mod built {
    include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
}

/// The default setters (the kubelet's, in its order, then ready), by file
/// name, built from `plugins/`.
pub const DEFAULT_PLUGINS: [(&str, &str); 11] = [
    ("node-address.wasm", built::NODE_ADDRESS),
    ("machine-info.wasm", built::MACHINE_INFO),
    ("version-info.wasm", built::VERSION_INFO),
    ("daemon-endpoints.wasm", built::DAEMON_ENDPOINTS),
    ("images.wasm", built::IMAGES),
    ("os-arch.wasm", built::OS_ARCH),
    ("memory-pressure.wasm", built::MEMORY_PRESSURE),
    ("disk-pressure.wasm", built::DISK_PRESSURE),
    ("pid-pressure.wasm", built::PID_PRESSURE),
    ("volumes.wasm", built::VOLUMES),
    ("ready.wasm", built::READY),
];

fn guest_plugins() -> PathBuf {
    std::env::var_os("NODESTATUS_GUEST_PLUGINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guest-plugins"))
}

/// A setter written in another language, built by `scripts/guests/<lang>.sh`
/// into `target/guest-plugins` (or `$NODESTATUS_GUEST_PLUGINS`):
/// `cpu-features` (Python), `load-average` (JavaScript), `memory-features` (C),
/// `local-disks` and the test component `go-probe` (Go).
/// `scripts/test.sh` builds them before the tests; a missing one fails the
/// test that needs it, with the command that builds it.
pub fn guest(name: &str) -> PathBuf {
    let path = guest_plugins().join(format!("{name}.wasm"));
    let lang = match name {
        "cpu-features" | "readonly-fs" => "python",
        "load-average" | "nvme-reset" => "js",
        "local-disks" | "go-probe" | "hung-task" | "k8s-types" => "go",
        _ => "c",
    };
    assert!(
        path.is_file(),
        "{} is missing: build it with scripts/guests/{lang}.sh (scripts/test.sh does)",
        path.display()
    );
    path
}

/// Whether [`guest_aot`]'s component of `name` is built (weval is not on
/// every machine).
pub fn guest_aot_built(name: &str) -> bool {
    guest_plugins()
        .join("aot")
        .join(format!("{name}.wasm"))
        .is_file()
}

/// A JavaScript setter of `plugins/js` built ahead of time (`build.mjs
/// --aot`, weval) into the `aot` folder beside [`guest`]'s. `scripts/test.sh`
/// builds `load-average` so when weval is at hand (docs/testing.md).
pub fn guest_aot(name: &str) -> PathBuf {
    let path = guest_plugins().join("aot").join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing: build it with NODESTATUS_JS_AOT=1 NODESTATUS_PLUGIN_DIRS=plugins/js/{name} scripts/guests/js.sh target/guest-plugins/aot (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The machine's logical CPUs online (`sysconf(_SC_NPROCESSORS_ONLN)`):
/// what the kubelet's `capacity.cpu` counts.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).expect("sysconf(_SC_NPROCESSORS_ONLN)")
}

/// Copies `src` into `dir` as `name` by writing a dotfile and renaming it, as
/// the docs tell users to.
pub fn drop_plugin(dir: &Path, name: &str, src: &Path) -> PathBuf {
    let bytes = std::fs::read(src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
    drop_bytes(dir, name, &bytes)
}

/// Writes `bytes` into `dir` as `name` by write-then-rename.
pub fn drop_bytes(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).unwrap();
    let dest = dir.join(name);
    std::fs::rename(&tmp, &dest).unwrap();
    dest
}
