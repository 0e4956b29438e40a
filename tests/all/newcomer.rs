//! A new user's first hour, as the README tells it, as one test: run.sh on
//! the embedded default, `nodestatus new` for a setter that reads a file,
//! its grant in the config file run.sh names (read again while running),
//! drop, delete, Ctrl-C, and a restart, with no warning in the engine's log.

use std::path::Path;
use std::process::{Command, Stdio};

use nodestatus_tests::{built, drop_plugin};

use crate::process::{READY, StopCluster, kubectl_node, wait_until};

const NODE: &str = "newcomer-node";

#[test]
fn a_new_user_runs_writes_grants_drops_deletes_and_restarts_without_a_warning() {
    let home = tempfile::tempdir().unwrap();
    let plugins = home.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for (file, src) in nodestatus_tests::DEFAULT_PLUGINS {
        drop_plugin(&plugins, file, Path::new(src));
    }
    let embedded = home.path().join("embedded");
    let _stop = StopCluster(embedded.clone());
    let config_home = home.path().join("config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // ./scripts/run.sh, with the binary under test instead of a release
    // build, and the default setters in a directory of this test's.
    let run_sh = |log: &Path| {
        Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/run.sh"))
            .args(["--node-name", NODE, "--address"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--plugin-dir")
            .arg(&plugins)
            .arg("--embedded-dir")
            .arg(&embedded)
            .args(["--cache-dir", built::TEST_CACHE_DIR])
            // The default status period; a short lease and grace period,
            // so that the stopped node turns Unknown within seconds.
            .args(["--node-lease-duration-seconds", "4"])
            .args(["--embedded-node-monitor-grace-period", "8s"])
            .env("NODESTATUS_BIN", env!("CARGO_BIN_EXE_nodestatus"))
            .env("XDG_CONFIG_HOME", &config_home)
            .env_remove("NODESTATUS_RUN_CONFIG")
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    let log = home.path().join("run.log");
    let mut engine = run_sh(&log);
    let admin = embedded.join("kubeconfig-admin");
    wait_until(180, &log, "never Ready", || {
        assert!(engine.try_wait().unwrap().is_none(), "run.sh exited");
        kubectl_node(&admin, NODE, READY) == "True"
    });
    // The config file run.sh named: the default config, the user's to edit.
    let config = config_home.join("nodestatus/config.yaml");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains(&format!("config: {}", config.display())),
        "{text}"
    );
    let default = std::fs::read_to_string(&config).unwrap();
    assert_eq!(default, nodestatus_engine::config::DEFAULT_CONFIG);

    // A setter that reads a file, from the binary alone.
    let made = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["new", "--lang", "c", "reader", "--dir"])
        .arg(home.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let dir = home.path().join("reader");
    let build = Command::new(dir.join("build.sh"))
        .env("NODESTATUS", env!("CARGO_BIN_EXE_nodestatus"))
        .output()
        .unwrap();
    assert!(build.status.success(), "{build:?}");

    // Its grant, as its README shows it, into the config the engine runs
    // with (an editor's save: write, then rename); read again while it runs.
    let grant = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    let section = grant.split_once("plugins:\n").unwrap().1;
    let edited = config.with_extension("yaml.new");
    std::fs::write(&edited, format!("{default}{section}")).unwrap();
    std::fs::rename(&edited, &config).unwrap();
    wait_until(30, &log, "the config was not reloaded", || {
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("config reloaded")
    });

    // Drop: the label appears. Delete: it goes.
    let label = "{.metadata.labels.reader\\.nodestatus\\.io/kernel}";
    drop_plugin(&plugins, "reader.wasm", &dir.join("dist/reader.wasm"));
    wait_until(90, &log, "the dropped setter's label never came", || {
        kubectl_node(&admin, NODE, label).contains('.')
    });
    std::fs::remove_file(plugins.join("reader.wasm")).unwrap();
    wait_until(30, &log, "the deleted setter's label stayed", || {
        kubectl_node(&admin, NODE, label).is_empty()
    });
    // Its grant stays in the config, as a user leaves it: at the next
    // start, a section for a plugin that is not in the directory is a
    // notice (INFO), not a warning (it used to be a WARN).

    // Ctrl-C: the engine exits; the cluster goes on and the node turns
    // Unknown; run.sh again and it is Ready again.
    // SAFETY: kill(2) on our own child (run.sh exec'd the engine).
    unsafe { libc::kill(engine.id() as i32, libc::SIGINT) };
    assert!(
        engine.wait().unwrap().success(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    wait_until(40, &log, "never Unknown", || {
        kubectl_node(&admin, NODE, READY) == "Unknown"
    });
    let log2 = home.path().join("run-2.log");
    let mut engine = run_sh(&log2);
    wait_until(60, &log2, "never Ready again", || {
        assert!(engine.try_wait().unwrap().is_none(), "run.sh exited");
        kubectl_node(&admin, NODE, READY) == "True"
    });
    // SAFETY: as above.
    unsafe { libc::kill(engine.id() as i32, libc::SIGINT) };
    assert!(engine.wait().unwrap().success());

    let text = std::fs::read_to_string(&log2).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains(" INFO ") && l.contains("plugins.reader: no reader.wasm in")),
        "{text}"
    );

    // No warning: none from the config, the grants or the plugins. (An API
    // call that times out on a loaded machine is retried, and says so: that
    // is the engine at work, not a snag of the user's.)
    for log in [&log, &log2] {
        let text = std::fs::read_to_string(log).unwrap();
        let warnings: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains("ERROR"))
            .filter(|l| !l.contains("will retry"))
            .collect();
        assert!(
            warnings.is_empty(),
            "a warning in the engine's log:\n{text}"
        );
    }
}
