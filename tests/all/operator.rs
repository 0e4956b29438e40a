//! What an operator sees of the command line, as docs/operations.md promises it:
//! the run order set with `order`, the log format, colour only on a
//! terminal and never with `NO_COLOR`, and a guest's stdout discarded and
//! its stderr bounded.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use nodestatus_tests::{built, drop_plugin};
use serde_json::Value;

/// `nodestatus` with `RUST_LOG` as given and no `--log-format`.
fn nodestatus(rust_log: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodestatus"));
    c.env("RUST_LOG", rust_log).env_remove("NO_COLOR");
    c
}

/// A plugin directory with machine-info, kernel-check and ready, whose
/// default order is the kubelet's setters first (machine-info), every other
/// plugin by name (kernel-check), `ready` last.
fn three_setters() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (file, src) in [
        ("machine-info.wasm", built::MACHINE_INFO),
        ("kernel-check.wasm", built::KERNEL_CHECK),
        ("ready.wasm", built::READY),
    ] {
        drop_plugin(dir.path(), file, Path::new(src));
    }
    dir
}

/// The plugins as `plugin list` prints them, in its order.
fn listed(dir: &Path, config: Option<&Path>) -> Vec<String> {
    let mut c = nodestatus("warn");
    c.args(["plugin", "list", "--cache-dir", built::TEST_CACHE_DIR])
        .arg("--plugin-dir")
        .arg(dir);
    if let Some(config) = config {
        c.arg("--config").arg(config);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

/// The setters in the order `once` ran them (its report on stderr: one
/// line `<plugin> <version>: ...` per setter, in run order).
fn ran(dir: &Path, config: &Path, names: &[&str]) -> Vec<String> {
    let out = nodestatus("warn")
        .args(["once", "--node-name", "order-node"])
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .arg("--plugin-dir")
        .arg(dir)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    stderr
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| names.contains(w))
        .map(str::to_owned)
        .collect()
}

/// `order` per plugin changes the run order: the pass runs the setters in
/// it (lower first), and `plugin list` shows it.
#[test]
fn the_operators_order_decides_the_run_order() {
    let dir = three_setters();
    let names = ["machine-info", "kernel-check", "ready"];
    assert_eq!(listed(dir.path(), None), names, "the default order");
    let config = dir.path().join("order.yaml");
    std::fs::write(
        &config,
        "plugins:\n  ready: {order: 1}\n  kernel-check: {order: 2}\n  machine-info: {order: 3}\n",
    )
    .unwrap();
    let reversed = ["ready", "kernel-check", "machine-info"];
    assert_eq!(listed(dir.path(), Some(&config)), reversed);
    assert_eq!(ran(dir.path(), &config, &names), reversed);
}

/// `--log-format json`: every line of the log is one JSON object with the
/// level and the message; the text format's lines are not JSON.
#[test]
fn log_format_json_writes_one_json_object_per_line() {
    let dir = three_setters();
    let log = |format: &str| {
        let out = nodestatus("info")
            .args(["--log-format", format, "plugin", "list"])
            .args(["--cache-dir", built::TEST_CACHE_DIR])
            .arg("--plugin-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        let stderr = String::from_utf8(out.stderr).unwrap();
        // One line per plugin loaded, at least.
        assert!(stderr.lines().count() >= 3, "{stderr}");
        stderr
    };
    let json = log("json");
    for line in json.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line:?}"));
        assert!(v["level"].is_string(), "{line}");
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
    assert!(json.contains("\"plugin\":\"kernel-check\""), "{json}");
    let text = log("text");
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_err()),
        "{text}"
    );
}

/// Runs `command` with its stderr on a new pseudo-terminal, so that it is a
/// terminal, and returns what it wrote there.
fn stderr_on_a_terminal(mut command: Command) -> String {
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two new descriptors into the integers given;
    // the other arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new, open and owned by nothing else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(slave));
    let mut child = command.spawn().unwrap();
    // The child holds the terminal's only other end now: reading ends
    // (EIO) once it exits.
    drop(command);
    let reader = std::thread::spawn(move || {
        let mut master = std::fs::File::from(master);
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    assert!(child.wait().unwrap().success());
    reader.join().unwrap()
}

/// Text logs are coloured on a terminal, and never with `NO_COLOR` set
/// (to anything but the empty string, as no-color.org says); a pipe gets
/// plain text.
#[test]
fn no_color_turns_the_colours_off_on_a_terminal() {
    let dir = three_setters();
    let list = |no_color: Option<&str>| {
        let mut c = nodestatus("info");
        c.args(["plugin", "list", "--cache-dir", built::TEST_CACHE_DIR])
            .arg("--plugin-dir")
            .arg(dir.path());
        if let Some(v) = no_color {
            c.env("NO_COLOR", v);
        }
        c
    };
    const ESC: &str = "\x1b[";
    let coloured = stderr_on_a_terminal(list(None));
    assert!(coloured.contains("INFO"), "{coloured}");
    assert!(
        coloured.contains(ESC),
        "no colour on a terminal: {coloured:?}"
    );
    let empty = stderr_on_a_terminal(list(Some("")));
    assert!(empty.contains(ESC), "NO_COLOR= (empty) is unset: {empty:?}");
    let plain = stderr_on_a_terminal(list(Some("1")));
    assert!(plain.contains("INFO"), "{plain}");
    assert!(!plain.contains(ESC), "colours with NO_COLOR=1: {plain:?}");
    let piped = list(None).output().unwrap();
    let piped = String::from_utf8_lossy(&piped.stderr);
    assert!(piped.contains("INFO") && !piped.contains(ESC), "{piped:?}");
}

/// A guest's stdout is discarded (the Node alone reaches `once`'s stdout),
/// and its stderr is kept up to 4 KiB a call for the debug log: of 1,000
/// lines of 64 bytes, the first 64 and no others.
/// A call that traps logs the guest's stderr at warn, where the default
/// log shows it: a Go panic's message and stack say why (at debug, the log
/// said only "wasm `unreachable` instruction executed").
#[test]
fn a_trapped_calls_stderr_is_logged_at_warn() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "plugins:\n  go-probe:\n    paths: [/tmp]\n    config: {do: panic}\n",
    )
    .unwrap();
    let out = nodestatus("warn")
        .args(["once", "--node-name", "guest-panic-node"])
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .arg("--plugin")
        .arg(nodestatus_tests::guest("go-probe"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let panic = stderr
        .lines()
        .find(|l| l.contains("assignment to entry in nil map"))
        .unwrap_or_else(|| panic!("the guest's panic is not in the log:\n{stderr}"));
    assert!(panic.contains("WARN"), "{panic}");
}

#[test]
fn guest_stdout_is_discarded_and_stderr_is_kept_up_to_4_kib() {
    const MARKER: &str = "GUEST-STDOUT-MUST-NOT-SHOW";
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("plugins:\n  probe:\n    config: {{stdout: {MARKER}, stderr_lines: 1000}}\n"),
    )
    .unwrap();
    let out = nodestatus("warn,nodestatus::plugin=debug")
        .args(["once", "--node-name", "guest-output-node"])
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .args(["--plugin", built::PROBE])
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stdout.contains(MARKER), "guest stdout reached stdout");
    assert!(!stderr.contains(MARKER), "guest stdout reached the log");
    let node: Value = serde_json::from_str(&stdout).expect("stdout is the Node alone");
    assert_eq!(
        node["metadata"]["labels"]["probe.nodestatus.test/version"],
        "1"
    );
    let kept: Vec<u32> = stderr
        .lines()
        .filter_map(|l| l.split("probe stderr line ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(
        kept,
        (0..4096 / 64).collect::<Vec<u32>>(),
        "guest stderr lines in the log:\n{stderr}"
    );
}
