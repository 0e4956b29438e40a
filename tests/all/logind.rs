//! The node's own shutdown from logind: `nodestatus run` (the real binary)
//! against the real apiserver, with `DBUS_SYSTEM_BUS_ADDRESS` pointing at a
//! private `dbus-daemon` on which a stand-in `org.freedesktop.login1` hands
//! out inhibitor locks and sends `PrepareForShutdown`.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodestatus_tests::{built, drop_plugin};
use serde_json::Value;
use zbus::object_server::SignalEmitter;

use crate::common::until;
use crate::kube::{condition, server_node};

/// A private bus (`dbus-daemon --session`), killed on drop.
struct Bus {
    daemon: Child,
    address: String,
}

impl Bus {
    fn start(dir: &Path) -> Bus {
        let mut daemon = Command::new("dbus-daemon")
            .args(["--session", "--print-address", "--nofork"])
            .arg(format!("--address=unix:path={}", dir.join("bus").display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("running dbus-daemon (apt-get install dbus-daemon)");
        let mut out = daemon.stdout.take().unwrap();
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while out.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        let address = String::from_utf8(line).unwrap();
        assert!(
            address.starts_with("unix:"),
            "dbus-daemon printed {address:?}"
        );
        Bus { daemon, address }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// One `Inhibit` call: its arguments, and the read end of the pipe whose
/// write end was handed out as the lock (EOF once every copy is closed).
struct Lock {
    args: [String; 4],
    held: std::io::PipeReader,
}

/// The stand-in logind.
#[derive(Clone, Default)]
struct Logind {
    locks: Arc<Mutex<Vec<Lock>>>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Logind {
    async fn inhibit(
        &self,
        what: &str,
        who: &str,
        why: &str,
        mode: &str,
    ) -> zbus::fdo::Result<zbus::zvariant::OwnedFd> {
        let (held, lock) = std::io::pipe().map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        self.locks.lock().unwrap().push(Lock {
            args: [what.into(), who.into(), why.into(), mode.into()],
            held,
        });
        Ok(std::os::fd::OwnedFd::from(lock).into())
    }

    #[zbus(signal)]
    async fn prepare_for_shutdown(emitter: &SignalEmitter<'_>, start: bool) -> zbus::Result<()>;
}

/// Whether the lock's write end is closed everywhere (the holder let go).
fn released(l: &Lock) -> bool {
    let mut p = libc::pollfd {
        fd: l.held.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one valid pollfd, no timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & (libc::POLLHUP | libc::POLLIN) != 0
}

/// `nodestatus run` for `node` with the node's own identity on the shared
/// apiserver, with `bus` as its system bus.
fn start(node: &str, bus: &str, dir: &Path) -> (Child, PathBuf) {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    drop_plugin(&plugins, "ready.wasm", Path::new(built::READY));
    let (mut engine, log) = crate::kube::engine_command(dir, node, &plugins);
    let child = engine.env("DBUS_SYSTEM_BUS_ADDRESS", bus).spawn().unwrap();
    (child, log)
}

fn ready(node: &Option<Value>) -> (String, String) {
    let c = node.as_ref().and_then(|n| condition(n, "Ready"));
    let s = |k: &str| c.and_then(|c| c[k].as_str()).unwrap_or_default().to_owned();
    (s("status"), s("message"))
}

fn stop(mut child: Child, log: &Path) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let s = crate::process::wait_bounded(&mut child, Duration::from_secs(15), log);
    assert!(
        s.success(),
        "{s}:\n{}",
        std::fs::read_to_string(log).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn logind_prepare_for_shutdown_marks_the_node_shutting_down_with_a_delay_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let bus = Bus::start(tmp.path());
    let logind = Logind::default();
    let conn = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name("org.freedesktop.login1")
        .unwrap()
        .serve_at("/org/freedesktop/login1", logind.clone())
        .unwrap()
        .build()
        .await
        .unwrap();
    let (child, log) = start("logind-node", &bus.address, tmp.path());

    // Subscribed, then a delay lock for shutdown taken; the node Ready.
    until(30, &log, "no inhibitor lock taken", async || {
        !logind.locks.lock().unwrap().is_empty()
    })
    .await;
    {
        let locks = logind.locks.lock().unwrap();
        assert_eq!(locks[0].args[0], "shutdown");
        assert_eq!(locks[0].args[1], "nodestatus");
        assert_eq!(locks[0].args[3], "delay");
    }
    until(30, &log, "never Ready", async || {
        ready(&server_node("logind-node").await).0 == "True"
    })
    .await;
    // Without the signal, Ready stays True and the lock stays held.
    for _ in 0..20 {
        assert_eq!(ready(&server_node("logind-node").await).0, "True");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !released(&logind.locks.lock().unwrap()[0]),
        "lock let go early"
    );

    // PrepareForShutdown(true): Ready=False `node is shutting down`, then
    // the lock is released, and the process goes on.
    let iface = conn
        .object_server()
        .interface::<_, Logind>("/org/freedesktop/login1")
        .await
        .unwrap();
    Logind::prepare_for_shutdown(iface.signal_emitter(), true)
        .await
        .unwrap();
    until(10, &log, "not marked shutting down", async || {
        let (status, message) = ready(&server_node("logind-node").await);
        status == "False" && message.contains("node is shutting down")
    })
    .await;
    until(10, &log, "the lock was not released", async || {
        released(&logind.locks.lock().unwrap()[0])
    })
    .await;
    let mut child = child;
    assert!(child.try_wait().unwrap().is_none(), "the process exited");

    // PrepareForShutdown(false): the shutdown was cancelled; a new lock,
    // and Ready again.
    Logind::prepare_for_shutdown(iface.signal_emitter(), false)
        .await
        .unwrap();
    until(10, &log, "no new lock after the cancel", async || {
        logind.locks.lock().unwrap().len() == 2
    })
    .await;
    until(10, &log, "not Ready after the cancel", async || {
        ready(&server_node("logind-node").await).0 == "True"
    })
    .await;
    stop(child, &log);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_system_bus_or_logind_it_logs_once_and_runs_on() {
    let tmp = tempfile::tempdir().unwrap();
    // A bus with no logind on it.
    let bus = Bus::start(tmp.path());
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let (nologind, log_a) = start("nologind-node", &bus.address, &a);
    // No bus at all.
    let none = format!("unix:path={}", tmp.path().join("no-bus").display());
    let (nobus, log_b) = start("nobus-node", &none, &b);
    for (node, log, says) in [
        (
            "nologind-node",
            &log_a,
            "no org.freedesktop.login1 on the system bus",
        ),
        (
            "nobus-node",
            &log_b,
            "cannot connect to the D-Bus system bus",
        ),
    ] {
        until(30, log, "never Ready", async || {
            ready(&server_node(node).await).0 == "True"
        })
        .await;
        let text = std::fs::read_to_string(log).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(says)).collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(lines[0].contains("INFO"), "not at info: {}", lines[0]);
    }
    stop(nologind, &log_a);
    stop(nobus, &log_b);
}
