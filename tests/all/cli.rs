//! The `nodestatus` command line, run as a user would.

use std::path::Path;
use std::process::Command;

use nodestatus_tests::{built, drop_bytes, drop_plugin, hostile};
use serde_json::Value;

pub(crate) fn nodestatus() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodestatus"));
    c.env("RUST_LOG", "warn").args(["--log-format", "text"]);
    c
}

/// What `command` printed, after checking that it succeeded.
pub(crate) fn stdout_of(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON that `command` printed, after checking that it succeeded.
pub(crate) fn json_of(command: &mut Command) -> Value {
    serde_json::from_str(&stdout_of(command)).unwrap()
}

#[test]
fn once_shows_a_label_and_a_condition_from_a_rust_plugin() {
    let dir = tempfile::tempdir().unwrap();
    drop_plugin(
        dir.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_bytes(
        dir.path(),
        "trap.wasm",
        &hostile::component("trap", &hostile::Behaviour::Trap),
    );
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "plugins:\n  kernel-check:\n    config: {minKernel: \"99.0\"}\n",
    )
    .unwrap();
    let out = nodestatus()
        .args(["once", "--node-name", "cli-node", "--plugin-dir"])
        .arg(dir.path())
        .arg("--config")
        .arg(&config)
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let node: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(node["metadata"]["name"], "cli-node");
    assert!(
        node["metadata"]["labels"]["kernel.example.com/version"]
            .as_str()
            .unwrap()
            .contains('.')
    );
    let cond = &node["status"]["conditions"][0];
    assert_eq!(cond["type"], "KernelSupported");
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "KernelTooOld");
    assert!(stderr.contains("kernel-check 0.1.0: set metadata.labels[kernel.example.com/version], status.conditions[KernelSupported]"), "{stderr}");
    assert!(stderr.contains("trap 0.0.1: FAILED [trap]"), "{stderr}");
    // The host's built-in steps are reported after the setters.
    assert!(
        stderr.contains("built-in os-arch-labels ")
            && stderr.contains("built-in allocatable-for-capacity "),
        "{stderr}"
    );
    // The trap's warning is logged; into a pipe, without colour codes.
    assert!(stderr.contains("WARN"), "{stderr}");
    assert!(
        !stderr.contains('\x1b'),
        "colour codes in a pipe: {stderr:?}"
    );
}

#[test]
fn once_starts_from_a_given_node_file() {
    let dir = tempfile::tempdir().unwrap();
    drop_plugin(
        dir.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    let node_file = dir.path().join("node.json");
    std::fs::write(&node_file, nodestatus_tests::nodes::busy_node().to_string()).unwrap();
    let node = json_of(
        nodestatus()
            .args(["once", "--plugin-dir"])
            .arg(dir.path())
            .arg("--node")
            .arg(&node_file)
            .args(["--cache-dir", built::TEST_CACHE_DIR]),
    );
    assert_eq!(node["status"]["images"].as_array().unwrap().len(), 50);
    assert_eq!(node["status"]["conditions"].as_array().unwrap().len(), 5);

    std::fs::write(&node_file, "[]").unwrap();
    let out = nodestatus()
        .args(["once", "--plugin-dir"])
        .arg(dir.path())
        .arg("--node")
        .arg(&node_file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a Node"));
}

#[test]
fn plugin_check_prints_metadata_or_the_reason_for_refusal() {
    let info = json_of(nodestatus().args(["plugin", "check", built::PROBE]));
    assert_eq!(info["metadata"]["name"], "probe");
    assert_eq!(
        info["metadata"]["paths"],
        serde_json::json!(["/tmp", "/etc"])
    );
    assert_eq!(info["granted"]["withheld"].as_array().unwrap().len(), 4);
    assert_eq!(info["wit"], "0.2", "the version of `setter` it exports");
    let old = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/wit-0.1/os-arch.wasm"
    );
    assert_eq!(
        json_of(nodestatus().args(["plugin", "check", old]))["wit"],
        "0.1"
    );

    let dir = tempfile::tempdir().unwrap();
    for (name, bytes, want) in [
        ("text.wasm", b"hello".to_vec(), "not a WebAssembly file"),
        (
            "core.wasm",
            hostile::core_module(),
            "a core WebAssembly module, not a component",
        ),
        (
            "world.wasm",
            hostile::wrong_world(),
            "does not implement the world",
        ),
    ] {
        let path = drop_bytes(dir.path(), name, &bytes);
        let out = nodestatus()
            .args(["plugin", "check"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{name}: {stderr}");
    }
    let out = nodestatus()
        .args(["plugin", "check", "/nonexistent.wasm"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent.wasm"));
}

/// "Try it without a cluster" (README, docs/running.md): `once --plugin-dir DIR` with no
/// `--config` runs on the embedded default config, so it gives the same
/// capacity, allocatable and conditions as `--config
/// deploy/default-config.yaml` (it used to run with no grants: no capacity,
/// and machine-info failing on /proc/meminfo).
/// `capacity.cpu` counts the machine's online CPUs, as the kubelet's does,
/// not the CPUs the engine may run on: in a pod, those are the CPU
/// manager's shared pool (a cpuset) or the pod's CPU limit, and the node's
/// capacity would shrink to the engine's own share.
#[test]
fn once_counts_every_online_cpu_whatever_the_engine_may_run_on() {
    let online = nodestatus_tests::online_cpus();
    assert!(
        online > 1,
        "this test needs two CPUs or more to tell the machine's from the process's"
    );
    let mut c = nodestatus();
    c.args(["once", "--plugin", built::MACHINE_INFO])
        .args(["--cache-dir", built::TEST_CACHE_DIR]);
    // The engine may run on CPU 0 only, as a cpuset would allow it.
    // SAFETY: between fork and exec, only sched_setaffinity on a local set.
    unsafe {
        use std::os::unix::process::CommandExt;
        c.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let node = json_of(&mut c);
    assert_eq!(
        node["status"]["capacity"]["cpu"],
        online.to_string().as_str(),
        "{}",
        node["status"]
    );
}

/// A plugin directory with the default set in it.
fn default_plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (file, src) in nodestatus_tests::DEFAULT_PLUGINS {
        drop_plugin(dir.path(), file, Path::new(src));
    }
    dir
}

/// `nodestatus once --strict` over `dir`, with `extra` arguments: the Node
/// it prints.
fn once_default_set(dir: &tempfile::TempDir, extra: Option<[&str; 2]>) -> Value {
    let mut c = nodestatus();
    c.args(["once", "--strict", "--plugin-dir"])
        .arg(dir.path())
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .args(extra.iter().flatten());
    json_of(&mut c)
}

/// `once --kubernetes-version` writes the node as that release's kubelet
/// does (what the version matrix's real-node suite compares with each
/// release's own kubelet): 1.37 declares its features and says whether it
/// runs in a user namespace, and writes ephemeral storage in decimal; 1.36
/// declares them too, says nothing of the namespace and writes the storage
/// in binary units; 1.35 declares none.
#[test]
fn once_writes_the_node_as_the_kubelet_of_the_release_it_is_given() {
    let dir = default_plugin_dir();
    let once = |release: Option<&str>| {
        once_default_set(&dir, release.map(|r| ["--kubernetes-version", r]))
    };
    let newest = once(None);
    let v137 = once(Some("v1.37.2"));
    assert_eq!(
        v137["status"]["declaredFeatures"],
        newest["status"]["declaredFeatures"]
    );
    let v136 = once(Some("1.36"));
    let v135 = once(Some("1.35"));
    let status = |n: &Value, k: &str| n["status"].get(k).is_some();
    assert!(status(&newest, "declaredFeatures") && status(&v136, "declaredFeatures"));
    assert!(!status(&v135, "declaredFeatures"), "{}", v135["status"]);
    assert!(
        newest["status"]["nodeInfo"]
            .get("runningInUserNamespace")
            .is_some()
    );
    assert!(
        v136["status"]["nodeInfo"]
            .get("runningInUserNamespace")
            .is_none()
    );
    let storage = |n: &Value| {
        n["status"]["capacity"]["ephemeral-storage"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let bytes = |q: &str| -> u64 {
        let (digits, unit) = match q.strip_suffix('i') {
            Some(q) => (
                &q[..q.len() - 1],
                1u64 << (10 * (1 + "KMGTPE".find(&q[q.len() - 1..]).unwrap())),
            ),
            None => (q, 1),
        };
        digits.parse::<u64>().unwrap() * unit
    };
    assert!(
        storage(&newest).bytes().all(|b| b.is_ascii_digit()),
        "{}",
        storage(&newest)
    );
    assert_eq!(
        bytes(&storage(&v136)),
        bytes(&storage(&newest)),
        "the same amount"
    );
    if bytes(&storage(&newest)) % 1024 == 0 {
        assert!(
            storage(&v136).ends_with('i'),
            "binary units: {}",
            storage(&v136)
        );
    }
    let bad = nodestatus()
        .args(["once", "--kubernetes-version", "2"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("is not a Kubernetes release"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn once_without_a_config_runs_the_embedded_default() {
    let dir = default_plugin_dir();
    let once = |config: Option<&str>| once_default_set(&dir, config.map(|f| ["--config", f]));
    let embedded = once(None);
    let file = once(Some(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/default-config.yaml"
    )));
    let conditions = |n: &Value| -> Vec<(Value, Value, Value)> {
        n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["type"].clone(), c["status"].clone(), c["reason"].clone()))
            .collect()
    };
    for field in ["capacity", "allocatable"] {
        assert!(
            embedded["status"][field]["memory"].is_string(),
            "{field}: {}",
            embedded["status"]
        );
        assert_eq!(embedded["status"][field], file["status"][field], "{field}");
    }
    assert_eq!(conditions(&embedded), conditions(&file));
    assert_eq!(conditions(&embedded).len(), 4);
    // The embedded default is the file in deploy/, printed whole.
    let printed = stdout_of(nodestatus().args(["config", "default"]));
    let deploy = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/default-config.yaml"
    ))
    .unwrap();
    assert_eq!(printed, deploy);
}

#[test]
fn config_check_names_the_field_of_each_mistake() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/default-config.yaml"),
        &good,
    )
    .unwrap();
    let out = nodestatus()
        .args(["config", "check"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (yaml, want) in [
        (
            "nodeStatusUpdateFrequncy: 10s\n",
            "did you mean `nodeStatusUpdateFrequency`",
        ),
        (
            "nodeLeaseDurationSeconds: 0\n",
            "nodeLeaseDurationSeconds: 0 must be between 1 and 3600",
        ),
        (
            "plugins: {gpu: {memoryLimit: lots}}\n",
            "plugins.gpu.memoryLimit",
        ),
    ] {
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, yaml).unwrap();
        let out = nodestatus()
            .args(["config", "check"])
            .arg(&bad)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{yaml}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{yaml}: {stderr}");
    }
}

#[test]
fn plugin_list_shows_run_order_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    drop_plugin(dir.path(), "ready.wasm", Path::new(built::READY));
    drop_plugin(
        dir.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_plugin(
        dir.path(),
        "machine-info.wasm",
        Path::new(built::MACHINE_INFO),
    );
    let out = nodestatus()
        .args(["plugin", "list", "--plugin-dir"])
        .arg(dir.path())
        .args([
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/default-config.yaml"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        names,
        vec!["machine-info", "kernel-check", "ready"],
        "{text}"
    );
    assert!(text.contains("/proc"), "{text}");

    drop_bytes(dir.path(), "broken.wasm", b"nope");
    let out = nodestatus()
        .args(["plugin", "list", "--plugin-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("refused"));
}

/// The arguments `scripts/run.sh` would give `nodestatus run` (its
/// NODESTATUS_RUN_PRINT_ARGS mode, which builds nothing).
fn run_sh_args(args: &[&str]) -> Vec<String> {
    run_sh_args_in(args, Path::new("/nonexistent/config-home"))
}

/// [`run_sh_args`] with `$XDG_CONFIG_HOME` at `config_home`.
fn run_sh_args_in(args: &[&str], config_home: &Path) -> Vec<String> {
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/run.sh"))
        .args(args)
        .env("NODESTATUS_RUN_PRINT_ARGS", "1")
        .env("XDG_CONFIG_HOME", config_home)
        .env_remove("NODESTATUS_RUN_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn run_sh_passes_the_users_config_and_else_a_file_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("my.yaml");
    // A config that `run` refuses at once, so the command ends before it
    // connects anywhere: the error must be about the file, not about clap.
    std::fs::write(&mine, "nodeStatusUpdateFrequency: 1ms\n").unwrap();
    let mine = mine.to_str().unwrap();
    let configs = |args: &[String]| -> Vec<String> {
        args.iter()
            .enumerate()
            .filter_map(|(i, a)| match a.strip_prefix("--config") {
                Some("") => Some(args[i + 1].clone()),
                Some(v) => v.strip_prefix('=').map(str::to_owned),
                None => None,
            })
            .collect()
    };
    // No --config: a file of the user's own, which the engine reads again
    // while it runs (run.sh writes it from the default config once).
    assert_eq!(
        configs(&run_sh_args_in(&[], dir.path())),
        [dir.path().join("nodestatus/config.yaml").to_str().unwrap()],
        "no --config: the user's own file"
    );
    let with_equals = format!("--config={mine}");
    for given in [vec!["--config", mine], vec![with_equals.as_str()]] {
        let args = run_sh_args(&given);
        assert_eq!(configs(&args), [mine], "{args:?}");
        // The same arguments, given to the real binary, reach the config.
        let plugin_dir = dir.path().to_str().unwrap();
        let real: Vec<&str> = args
            .iter()
            .skip(1)
            .map(|a| match a.as_str() {
                "<the default setters>" => plugin_dir,
                a => a,
            })
            .collect();
        let out = nodestatus()
            .arg("run")
            .args(&real)
            .args(["--address", ""])
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains("nodeStatusUpdateFrequency") && !stderr.contains("multiple times"),
            "{real:?}: {stderr}"
        );
    }
    let args = run_sh_args(&["--plugin-dir", "/p"]);
    assert_eq!(
        args.iter()
            .filter(|a| a.starts_with("--plugin-dir"))
            .count(),
        1,
        "{args:?}"
    );
}

#[test]
fn once_runs_single_files_and_strict_gates_on_a_failed_setter() {
    let dir = tempfile::tempdir().unwrap();
    let trap = dir.path().join("trap.wasm");
    std::fs::write(&trap, hostile::component("trap", &hostile::Behaviour::Trap)).unwrap();
    let once_with = |strict: bool, config: Option<&Path>| {
        let mut c = nodestatus();
        c.args(["once", "--node-name", "files-node"])
            .args(["--plugin", built::KERNEL_CHECK])
            .arg("--plugin")
            .arg(&trap)
            .args(["--cache-dir", built::TEST_CACHE_DIR]);
        if strict {
            c.arg("--strict");
        }
        if let Some(config) = config {
            c.arg("--config").arg(config);
        }
        c.output().unwrap()
    };
    let once = |strict: bool| once_with(strict, None);
    // Without --strict: the failure is reported, the exit status is 0.
    let out = once(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("trap 0.0.1: FAILED [trap]"), "{stderr}");
    let node: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        node["metadata"]["labels"]["kernel.example.com/version"].is_string(),
        "{node}"
    );
    // With --strict: the same run exits 1 and says why.
    let out = once(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--strict: 1 plugin(s) refused or failed"),
        "{stderr}"
    );
    // Only the good one: --strict passes.
    stdout_of(
        nodestatus()
            .args(["once", "--strict", "--plugin", built::KERNEL_CHECK])
            .args(["--cache-dir", built::TEST_CACHE_DIR]),
    );
    // The failing one disabled in the config: not loaded, said so, and not
    // a failure for --strict (disabling is the operator's choice).
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "plugins:\n  trap:\n    enabled: false\n").unwrap();
    let out = once_with(true, Some(&config));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "disabled {}: enabled: false in the config",
            trap.display()
        )),
        "{stderr}"
    );
    assert!(
        !stderr.contains("FAILED") && !stderr.contains("refused"),
        "{stderr}"
    );
    // Two files with one name are refused before anything runs.
    let other = tempfile::tempdir().unwrap();
    let twin = drop_plugin(other.path(), "trap.wasm", Path::new(built::KERNEL_CHECK));
    let out = nodestatus()
        .args(["once", "--plugin"])
        .arg(&trap)
        .arg("--plugin")
        .arg(&twin)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("two plugins named trap.wasm"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Neither --plugin-dir nor --plugin, and the config's pluginDir does
    // not exist: the error says which flags to give.
    let config = dir.path().join("missing-dir.yaml");
    std::fs::write(
        &config,
        format!("pluginDir: {}\n", dir.path().join("missing").display()),
    )
    .unwrap();
    let out = nodestatus()
        .args(["once", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not a directory: give --plugin-dir DIR or --plugin FILE"),
        "{stderr}"
    );
}

#[test]
fn once_prints_yaml_or_a_diff_against_the_input_node() {
    let once = |output: &str| {
        stdout_of(
            nodestatus()
                .args(["once", "--node-name", "diff-node", "--output", output])
                .args(["--plugin", built::KERNEL_CHECK])
                .args(["--cache-dir", built::TEST_CACHE_DIR]),
        )
    };
    let json: Value = serde_json::from_str(&once("json")).unwrap();
    let yaml: Value = serde_yaml::from_str(&once("yaml")).unwrap();
    assert_eq!(json["metadata"]["labels"], yaml["metadata"]["labels"]);
    // The two runs may fall on either side of a second: compare the
    // conditions without the times the host stamps.
    let untimed = |n: &Value| {
        let mut c = n["status"]["conditions"].clone();
        for c in c.as_array_mut().unwrap() {
            let c = c.as_object_mut().unwrap();
            assert!(c.remove("lastHeartbeatTime").is_some(), "{c:?}");
            assert!(c.remove("lastTransitionTime").is_some(), "{c:?}");
        }
        c
    };
    assert_eq!(untimed(&json), untimed(&yaml));
    let diff = once("diff");
    assert!(
        diff.starts_with("--- node (input)\n+++ node (after the setters)\n"),
        "{diff}"
    );
    assert!(
        diff.lines()
            .any(|l| l.starts_with('+') && l.contains("\"kernel.example.com/version\"")),
        "{diff}"
    );
    // The initial labels are context, not changes.
    assert!(
        !diff
            .lines()
            .any(|l| l.starts_with('+') && l.contains("kubernetes.io/hostname")),
        "{diff}"
    );
}

#[test]
fn config_check_shows_each_value_and_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    std::fs::write(
        &file,
        "pluginDir: /from/the/file\nnodeStatusUpdateFrequency: 20s\n",
    )
    .unwrap();
    let row = |out: &str, key: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no {key} in {out}"))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let out = stdout_of(nodestatus().args(["config", "check"]).arg(&file));
    assert_eq!(row(&out, "pluginDir"), "/from/the/file (file)");
    assert_eq!(row(&out, "nodeStatusUpdateFrequency"), "20s (file)");
    // Follows the update frequency when unset.
    assert_eq!(row(&out, "nodeStatusReportFrequency"), "20s (default)");
    assert_eq!(row(&out, "nodeLeaseDurationSeconds"), "40 (default)");
    // A flag wins over the file, and says so (it used to print the file's).
    let out = stdout_of(
        nodestatus()
            .args(["config", "check", "--plugin-dir", "/from/a/flag"])
            .arg(&file),
    );
    assert_eq!(row(&out, "pluginDir"), "/from/a/flag (flag)");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains("pluginDir /from/a/flag"),
        "{out}"
    );
}

/// The embedded cluster's directory follows `XDG_DATA_HOME`, as the config
/// follows `XDG_CONFIG_HOME` (issue 48, item 8); without it, `~/.local/share`.
#[test]
fn the_embedded_clusters_directory_follows_xdg_data_home() {
    let dir = tempfile::tempdir().unwrap();
    let stop = |xdg: Option<&Path>| {
        let mut c = nodestatus();
        c.args(["run", "--embedded-stop"])
            .env("HOME", dir.path().join("home"))
            .env_remove("KUBECONFIG");
        match xdg {
            Some(x) => c.env("XDG_DATA_HOME", x),
            None => c.env_remove("XDG_DATA_HOME"),
        };
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let data = dir.path().join("data");
    let said = stop(Some(&data));
    assert!(
        said.contains(&format!(
            "no local cluster running in {}",
            data.join("nodestatus/embedded").display()
        )),
        "{said}"
    );
    let said = stop(None);
    assert!(
        said.contains(&format!(
            "no local cluster running in {}",
            dir.path()
                .join("home/.local/share/nodestatus/embedded")
                .display()
        )),
        "{said}"
    );
}

/// `config check` shows, for each plugin section, where the plugin comes
/// from, what it is granted and what it must verify against: a plugin's
/// own `verify.key` (the top-level `verify` is unset), a file's `sha256`,
/// and an image with nothing to verify it (issue 48, item 9).
#[test]
fn config_check_shows_each_plugins_source_grants_and_verification() {
    let dir = tempfile::tempdir().unwrap();
    let (_, vendor_pub) = nodestatus_tests::registry::key_pair(dir.path(), "vendor");
    let file = dir.path().join("c.yaml");
    let sha = "ab".repeat(32);
    std::fs::write(
        &file,
        format!(
            "pluginDir: /srv/plugins\nplugins:\n  disk-health:\n    image: registry.example.com/vendor/disk-health:1.0.0\n    verify:\n      key: {}\n    paths: [/proc/driver]\n    env: [NODE_ZONE]\n  unverified:\n    image: registry.example.com/vendor/unverified@sha256:{sha}\n  kernel-check:\n    sha256: {sha}\n    containerRuntime: true\n    enabled: false\n",
            vendor_pub.display()
        ),
    )
    .unwrap();
    let out = stdout_of(nodestatus().args(["config", "check"]).arg(&file));
    let line = |name: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(name) && l.contains(": "))
            .filter(|l| l.contains("verify: "))
            .unwrap_or_else(|| panic!("no line for {name} in {out}"))
            .trim()
            .to_owned()
    };
    assert_eq!(
        line("disk-health"),
        format!(
            "disk-health: image registry.example.com/vendor/disk-health:1.0.0 (pullPolicy IfNotPresent, failurePolicy open); grants: /proc/driver, env NODE_ZONE; verify: signature by the key {}",
            vendor_pub.display()
        ),
        "{out}"
    );
    assert!(
        line("unverified").ends_with(
            "grants: none; verify: none: the signature is not checked (no verify key or policy)"
        ),
        "{out}"
    );
    assert_eq!(
        line("kernel-check"),
        format!(
            "kernel-check [disabled]: file /srv/plugins/kernel-check.wasm; grants: containerRuntime; verify: sha256 {sha}"
        ),
        "{out}"
    );
}

#[test]
fn a_misspelled_plugin_section_gets_did_you_mean_from_once_and_config_check() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    drop_plugin(
        &plugins,
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    let config = dir.path().join("config.yaml");
    // One typo of a plugin in the directory, one of a bundled setter, and a
    // section for a plugin not dropped yet, named like none (no typo).
    std::fs::write(
        &config,
        "plugins:\n  kernel-chekc: {}\n  disk-presure: {}\n  my-vendor-gpu: {}\n",
    )
    .unwrap();
    let kernel =
        "plugins.kernel-chekc: no plugin is named kernel-chekc (did you mean `kernel-check`?)";
    let disk =
        "plugins.disk-presure: no plugin is named disk-presure (did you mean `disk-pressure`?)";

    let check = nodestatus()
        .args(["config", "check"])
        .arg(&config)
        .arg("--plugin-dir")
        .arg(&plugins)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    assert!(stderr.contains(kernel) && stderr.contains(disk), "{stderr}");
    assert!(!stderr.contains("my-vendor-gpu (did you mean"), "{stderr}");
    // Without a plugin directory on this machine: the bundled names still.
    let check = nodestatus()
        .args(["config", "check"])
        .arg(&config)
        .args(["--plugin-dir", "/nonexistent/plugins"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    assert!(stderr.contains(disk), "{stderr}");

    let once = nodestatus()
        .args(["once", "--plugin-dir"])
        .arg(&plugins)
        .arg("--config")
        .arg(&config)
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&once.stderr);
    assert!(once.status.success(), "{stderr}");
    assert!(stderr.contains(kernel) && stderr.contains(disk), "{stderr}");
    assert!(!stderr.contains("my-vendor-gpu (did you mean"), "{stderr}");
}

#[test]
fn run_on_a_busy_http_port_fails_at_start_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    // A cluster that is never reached: the start must fail before it matters.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let mut child = nodestatus()
        .args(["run", "--address", &addr, "--plugin-dir"])
        .arg(dir.path())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let status = status.unwrap_or_else(|| panic!("still running on a busy port:\n{stderr}"));
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot serve /livez /readyz /metrics on --address {addr}"
        )) && stderr.contains("Address already in use"),
        "{stderr}"
    );
    drop(busy);
}

#[test]
fn the_default_config_loads_the_default_setters_without_a_warning() {
    // A fresh machine: no /var/lib/nodestatus yet (the images grant), and
    // `/` granted to disk-pressure and machine-info for statvfs. (The
    // kubelet host's credentials under `/`: config's unit test.)
    let dir = tempfile::tempdir().unwrap();
    for (file, src) in nodestatus_tests::DEFAULT_PLUGINS {
        drop_plugin(dir.path(), file, Path::new(src));
    }
    let out = nodestatus()
        .env("RUST_LOG", "info")
        .args(["once", "--strict", "--plugin-dir"])
        .arg(dir.path())
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("WARN") && !stderr.contains("warning"),
        "{stderr}"
    );
    let check = nodestatus()
        .args(["config", "check", "--plugin-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn perfmap_names_the_plugins_functions_for_a_profile() {
    // `NODESTATUS_PERFMAP=1`: wasmtime writes the plugins' code symbols to
    // /tmp/perf-<pid>.map, where `perf report` finds them
    // (docs/benchmarks.md, "Where the time goes"). kernel-check is built
    // without its names, so its functions are numbered.
    let child = nodestatus()
        .args([
            "once",
            "--node-name",
            "perfmap",
            "--plugin",
            built::KERNEL_CHECK,
        ])
        .args(["--cache-dir", built::TEST_CACHE_DIR])
        .env("NODESTATUS_PERFMAP", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let map = std::path::PathBuf::from(format!("/tmp/perf-{}.map", child.id()));
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&map).unwrap_or_default();
    let _ = std::fs::remove_file(&map);
    assert!(
        text.lines().any(|l| l.contains(" wasm[0]::")),
        "no plugin symbol in {}: {}",
        map.display(),
        &text[..text.len().min(2000)]
    );
}
