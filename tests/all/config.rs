//! Bad configuration files, each read from a real file the way `run` and
//! `config check` read them: every one is refused (or, where it is valid but
//! probably not meant, warned about) with a message that names the field and
//! says what to do. None crashes, hangs or is silently accepted.
//!
//! `cargo test --test all config:: -- --nocapture` prints the table of
//! docs/reliability.md.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodestatus_engine::config::{ConfigFile, MAX_CONFIG_BYTES, MAX_YAML_VALUES};
use proptest::prelude::*;

/// What a case writes at the config path.
enum Input {
    Yaml(String),
    Bytes(Vec<u8>),
    /// A sparse regular file of this many bytes.
    Sparse(u64),
    Fifo,
    Directory,
}

/// What the case must produce.
#[derive(Clone, Copy, PartialEq)]
enum Outcome {
    Error,
    Warning,
}

struct Case {
    name: &'static str,
    input: Input,
    /// The field the message must name.
    field: &'static str,
    /// A fragment of the advice the message must give.
    advice: &'static str,
    outcome: Outcome,
}

fn case(name: &'static str, yaml: &str, field: &'static str, advice: &'static str) -> Case {
    Case {
        name,
        input: Input::Yaml(yaml.to_owned()),
        field,
        advice,
        outcome: Outcome::Error,
    }
}

/// A "billion laughs": ten levels of ten aliases each.
fn billion_laughs() -> String {
    let mut entries =
        vec!["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]".to_string()];
    for i in 1..10 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        entries.push(format!("a{i}: &a{i} [{refs}]"));
    }
    format!("plugins: {{gpu: {{config: {{{}}}}}}}\n", entries.join(", "))
}

/// A wide alias bomb that stays under the parser's own repetition limit:
/// one list of 2,000 values, repeated by 2,000 aliases (4 million values).
fn wide_alias_bomb() -> String {
    let list = vec!["1"; 2000].join(", ");
    let refs = vec!["*l"; 2000].join(", ");
    format!("plugins: {{gpu: {{config: {{l: &l [{list}], r: [{refs}]}}}}}}\n")
}

fn cases() -> Vec<Case> {
    let deep = format!(
        "plugins: {{gpu: {{config: {}{}}}}}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let mut v = vec![
        // Unknown fields.
        case(
            "unknown field (typo)",
            "nodeStatusUpdateFrequncy: 10s\n",
            "nodeStatusUpdateFrequncy",
            "did you mean `nodeStatusUpdateFrequency`",
        ),
        case(
            "unknown plugin field (typo)",
            "plugins: {gpu: {timout: 1s}}\n",
            "plugins.gpu",
            "did you mean `timeout`",
        ),
        case(
            "unknown field, nothing close",
            "colour: blue\n",
            "colour",
            "expected one of `nodeName`",
        ),
        case(
            "KubeletConfiguration field not supported",
            "maxPods: 110\n",
            "maxPods",
            "expected one of",
        ),
        // Types.
        case(
            "string for an integer",
            "nodeLeaseDurationSeconds: forty\n",
            "nodeLeaseDurationSeconds",
            "expected an integer",
        ),
        case(
            "integer past i64",
            "nodeLeaseDurationSeconds: 99999999999999999999\n",
            "nodeLeaseDurationSeconds",
            "is too large: expected an integer",
        ),
        case(
            "word for a boolean",
            "registerNode: maybe\n",
            "registerNode",
            "expected true or false",
        ),
        case(
            "list for the plugins mapping",
            "plugins: [gpu, ready]\n",
            "plugins",
            "expected a mapping",
        ),
        case(
            "string for the paths list",
            "plugins: {gpu: {paths: /proc}}\n",
            "plugins.gpu.paths",
            "expected a list",
        ),
        case(
            "a scalar document",
            "just some text\n",
            "just some text",
            "expected a mapping of config fields",
        ),
        case(
            "unknown onUngranted value",
            "plugins: {gpu: {onUngranted: ignore}}\n",
            "plugins.gpu.onUngranted",
            "expected `load-without` or `refuse`",
        ),
        case(
            "taint without effect",
            "registerWithTaints: [{key: example.com/a}]\n",
            "registerWithTaints[0]",
            "missing field `effect`",
        ),
        // Durations.
        case(
            "duration overflow (panicked before)",
            "plugins: {gpu: {timeout: 99999999999999999999h}}\n",
            "plugins.gpu.timeout",
            "too long: the longest duration is 2562047h",
        ),
        case(
            "duration overflow in a sum",
            "nodeStatusUpdateFrequency: 2562047h2562047h\n",
            "nodeStatusUpdateFrequency",
            "too long",
        ),
        case(
            "duration without unit",
            "nodeStatusUpdateFrequency: 10\n",
            "nodeStatusUpdateFrequency",
            "add one of ns, us, ms, s, m, h",
        ),
        case(
            "duration in words",
            "nodeStatusReportFrequency: 5 minutes\n",
            "nodeStatusReportFrequency",
            "for example 10s, 5m",
        ),
        case(
            "negative duration",
            "nodeStatusUpdateFrequency: -10s\n",
            "nodeStatusUpdateFrequency",
            "negative: give a positive duration",
        ),
        // Ranges.
        case(
            "update period too long",
            "nodeStatusUpdateFrequency: 10m\n",
            "nodeStatusUpdateFrequency",
            "between 100ms and 5m",
        ),
        case(
            "update period too short",
            "nodeStatusUpdateFrequency: 1ms\n",
            "nodeStatusUpdateFrequency",
            "between 100ms and 5m",
        ),
        case(
            "report shorter than update",
            "nodeStatusUpdateFrequency: 1m\nnodeStatusReportFrequency: 10s\n",
            "nodeStatusReportFrequency",
            "must not be shorter than nodeStatusUpdateFrequency",
        ),
        case(
            "report period too long",
            "nodeStatusReportFrequency: 2h\n",
            "nodeStatusReportFrequency",
            "at most 1h",
        ),
        case(
            "zero plugin timeout",
            "plugins: {gpu: {timeout: 0s}}\n",
            "plugins.gpu.timeout",
            "between 10ms and 60s",
        ),
        case(
            "zero lease",
            "nodeLeaseDurationSeconds: 0\n",
            "nodeLeaseDurationSeconds",
            "between 1 and 3600",
        ),
        case(
            "negative lease",
            "nodeLeaseDurationSeconds: -5\n",
            "nodeLeaseDurationSeconds",
            "between 1 and 3600",
        ),
        case(
            "max images below -1",
            "nodeStatusMaxImages: -2\n",
            "nodeStatusMaxImages",
            "-1 means no limit",
        ),
        case(
            "memoryLimit not a quantity",
            "plugins: {gpu: {memoryLimit: lots}}\n",
            "plugins.gpu.memoryLimit",
            "not a quantity (for example",
        ),
        case(
            "memoryLimit too large",
            "plugins: {gpu: {memoryLimit: 1Ti}}\n",
            "plugins.gpu.memoryLimit",
            "between 1Mi and 4Gi",
        ),
        case(
            "cacheMaxSize too small",
            "cacheMaxSize: 1Mi\n",
            "cacheMaxSize",
            "between 16Mi and 1Ti",
        ),
        case(
            "compileTimeout too short",
            "compileTimeout: 10ms\n",
            "compileTimeout",
            "between 1s and 1h",
        ),
        case(
            "compileMemoryLimit too small",
            "compileMemoryLimit: 1Mi\n",
            "compileMemoryLimit",
            "between 64Mi and 64Gi",
        ),
        case(
            "compileMemoryLimit not a quantity",
            "compileMemoryLimit: plenty\n",
            "compileMemoryLimit",
            "not a quantity (for example",
        ),
        case(
            "memoryLimit negative",
            "plugins: {gpu: {memoryLimit: -64Mi}}\n",
            "plugins.gpu.memoryLimit",
            "between 1Mi and 4Gi",
        ),
        case(
            "memoryLimit zero",
            "plugins: {gpu: {memoryLimit: '0'}}\n",
            "plugins.gpu.memoryLimit",
            "between 1Mi and 4Gi",
        ),
        // Grants.
        case(
            "relative grant",
            "plugins: {gpu: {paths: [proc]}}\n",
            "plugins.gpu.paths[0]",
            "must be an absolute path",
        ),
        case(
            "grant climbing above /",
            "plugins: {gpu: {paths: [/../../etc]}}\n",
            "plugins.gpu.paths[0]",
            "climbs above /",
        ),
        case(
            "relative mapped grant",
            "plugins: {gpu: {paths: [{path: /proc, from: host/proc}]}}\n",
            "plugins.gpu.paths[0].from",
            "must be an absolute path",
        ),
        case(
            "grant of the node's credentials",
            "plugins: {gpu: {paths: [/etc/kubernetes]}}\n",
            "plugins.gpu.paths[0]",
            "never granted (the node's credentials)",
        ),
        case(
            "grant of the kubelet's pki through ..",
            "plugins: {gpu: {paths: [/var/lib/kubelet/../kubelet/pki/]}}\n",
            "plugins.gpu.paths[0]",
            "in /var/lib/kubelet/pki, which is never granted",
        ),
        case(
            "grant of every pod's secrets",
            "plugins: {gpu: {paths: [/var/lib/kubelet/pods]}}\n",
            "plugins.gpu.paths[0]",
            "secrets and tokens",
        ),
        case(
            "grant of /proc/self",
            "plugins: {gpu: {paths: [/proc/self]}}\n",
            "plugins.gpu.paths[0]",
            "the engine's own process",
        ),
        case(
            "grant of a process by pid",
            "plugins: {gpu: {paths: [/proc/1/root]}}\n",
            "plugins.gpu.paths[0]",
            "in /proc/<pid>, which is never granted",
        ),
        case(
            "mapped grant of the ServiceAccount token",
            "plugins: {gpu: {paths: [{path: /creds, from: /var/run/secrets/kubernetes.io}]}}\n",
            "plugins.gpu.paths[0].from",
            "ServiceAccount token",
        ),
        case(
            "bad environment variable name",
            "plugins: {gpu: {env: ['A=B']}}\n",
            "plugins.gpu.env[0]",
            "not an environment variable name",
        ),
        case(
            "bad sha256",
            "plugins: {gpu: {sha256: abc}}\n",
            "plugins.gpu.sha256",
            "64 hexadecimal characters",
        ),
        case(
            "bad field pattern",
            "plugins: {gpu: {fields: {allow: ['@x']}}}\n",
            "plugins.gpu.fields",
            "@x",
        ),
        Case {
            name: "section for a plugin not in pluginDir",
            input: Input::Yaml("plugins: {gpu-typo: {}}\n".into()),
            field: "plugins.gpu-typo",
            advice: "no gpu-typo.wasm in",
            outcome: Outcome::Warning,
        },
        // Duplicates.
        case(
            "duplicate top-level key",
            "nodeName: a\nnodeName: b\n",
            "\"nodeName\"",
            "appears twice in one mapping: keep one",
        ),
        case(
            "duplicate plugin section",
            "plugins:\n  gpu: {}\n  gpu: {timeout: 1s}\n",
            "plugins",
            "\"gpu\" appears twice",
        ),
        case(
            "duplicate label",
            "nodeLabels: {example.com/a: x, example.com/a: y}\n",
            "nodeLabels",
            "appears twice",
        ),
        case(
            "duplicate key in a plugin's own config",
            "plugins: {gpu: {config: {maxPods: 1, maxPods: 2}}}\n",
            "plugins.gpu.config",
            "\"maxPods\" appears twice",
        ),
        case(
            "duplicate taint",
            "registerWithTaints: [{key: example.com/a, effect: NoSchedule}, {key: example.com/a, value: x, effect: NoSchedule}]\n",
            "registerWithTaints[1]",
            "the apiserver refuses duplicates",
        ),
        // The YAML itself.
        case(
            "billion laughs",
            &billion_laughs(),
            "plugins.gpu.config",
            "aliases",
        ),
        case(
            "wide alias bomb (4 million values)",
            &wide_alias_bomb(),
            "plugins.gpu.config",
            "write the values out",
        ),
        case(
            "nesting 10,000 deep",
            &deep,
            "at line 2 column",
            "nested more than 128 levels deep",
        ),
        case(
            "two YAML documents",
            "nodeName: a\n---\nnodeName: b\n",
            "more than one document",
            "put every field in one document",
        ),
        case(
            "tab indentation",
            "plugins:\n\tgpu: {}\n",
            "line 2 column 1",
            "a tab? YAML indents with spaces",
        ),
        Case {
            name: "invalid UTF-8",
            input: Input::Bytes(b"nodeName: a\nnodeLabels: {x: \xff\xfe}\n".to_vec()),
            field: "invalid UTF-8 at line 2, column 17",
            advice: "save the file as UTF-8",
            outcome: Outcome::Error,
        },
        Case {
            name: "100 MB file",
            input: Input::Sparse(100 << 20),
            field: "104857600 bytes",
            advice: "over the limit of 1048576 bytes",
            outcome: Outcome::Error,
        },
        Case {
            name: "a FIFO as config",
            input: Input::Fifo,
            field: "FIFO",
            advice: "give the path of a YAML file",
            outcome: Outcome::Error,
        },
        Case {
            name: "a directory as config",
            input: Input::Directory,
            field: "directory",
            advice: "give the path of a YAML file",
            outcome: Outcome::Error,
        },
        // Node fields.
        case(
            "NodeRestriction label",
            "nodeLabels: {kubernetes.io/foo: x}\n",
            "nodeLabels[kubernetes.io/foo]",
            "NodeRestriction refuses this label",
        ),
        case(
            "node-restriction label",
            "nodeLabels: {node-restriction.kubernetes.io/pool: x}\n",
            "nodeLabels[node-restriction.kubernetes.io/pool]",
            "never allowed",
        ),
        case(
            "bad label key",
            "nodeLabels: {'bad key!': x}\n",
            "nodeLabels[bad key!]",
            "1 to 63 characters",
        ),
        case(
            "label value too long",
            &format!("nodeLabels: {{example.com/a: {}}}\n", "v".repeat(64)),
            "nodeLabels[example.com/a]",
            "at most 63 characters",
        ),
        case(
            "bad taint effect",
            "registerWithTaints: [{key: example.com/a, effect: Nope}]\n",
            "registerWithTaints[0]",
            "must be NoSchedule, PreferNoSchedule or NoExecute",
        ),
        case(
            "bad taint key",
            "registerWithTaints: [{key: -a-, effect: NoSchedule}]\n",
            "registerWithTaints[0]",
            "starting and ending with a letter or digit",
        ),
        case(
            "nodeIP not an IP",
            "nodeIP: worker-1\n",
            "nodeIP",
            "\"worker-1\" is not an IP address",
        ),
        case(
            "nodeIP loopback",
            "nodeIP: 127.0.0.1\n",
            "nodeIP",
            "loopback",
        ),
        case(
            "three node IPs",
            "nodeIP: 10.0.0.1,fd00::1,10.0.0.2\n",
            "nodeIP",
            "two of different families",
        ),
        case(
            "uppercase node name",
            "nodeName: Worker_1\n",
            "nodeName",
            "lowercase RFC 1123 DNS subdomain",
        ),
        case(
            "empty providerID",
            "providerID: ''\n",
            "providerID",
            "1 to 512 characters",
        ),
        case(
            "companion that registers",
            "companion: true\nregisterNode: true\n",
            "registerNode",
            "must be false (or unset) in companion mode",
        ),
        // Plugins by reference (issue 21).
        case(
            "image without a registry host",
            "plugins:\n  gpu: {image: vendor/gpu:1}\n",
            "plugins.gpu.image",
            "names no registry host",
        ),
        case(
            "image that is not a reference",
            "plugins:\n  gpu: {image: 'r.example.com/Vendor/GPU:1'}\n",
            "plugins.gpu.image",
            "is not an image reference",
        ),
        case(
            "image with a bad digest",
            "plugins:\n  gpu: {image: 'r.example.com/v/gpu@sha256:abc'}\n",
            "plugins.gpu.image",
            "sha256",
        ),
        case(
            "image with a missing key file",
            "plugins:\n  gpu: {image: r.example.com/v/gpu:1, verify: {key: /nonexistent/vendor.pub}}\n",
            "plugins.gpu.verify.key",
            "cannot read the key /nonexistent/vendor.pub",
        ),
        case(
            "a global key that is not a key",
            "verify: {key: /etc/hostname}\n",
            "verify.key",
            "/etc/hostname",
        ),
        case(
            "pullInterval without an image",
            "plugins:\n  gpu: {pullInterval: 1m}\n",
            "plugins.gpu.pullInterval",
            "add image:",
        ),
        case(
            "pullInterval of no time",
            "plugins:\n  gpu: {image: r.example.com/v/gpu:1, pullInterval: 0s}\n",
            "plugins.gpu.pullInterval",
            "between 1s and 24h",
        ),
        case(
            "sha256 beside an image",
            "plugins:\n  gpu: {image: r.example.com/v/gpu:1, sha256: 0000000000000000000000000000000000000000000000000000000000000000}\n",
            "plugins.gpu.sha256",
            "pin an image by its digest",
        ),
        case(
            "an image plugin named with '_'",
            "plugins:\n  gpu_x: {image: r.example.com/v/gpu:1}\n",
            "plugins.gpu_x",
            "no '_'",
        ),
        case(
            "a registry key that is a URL",
            "registries:\n  'https://r.example.com': {insecure: true}\n",
            "registries",
            "https://r.example.com",
        ),
        case(
            "an unknown registry setting",
            "registries:\n  r.example.com: {password: x}\n",
            "registries",
            "unknown field",
        ),
    ];
    // Each case's plugin sections name gpu: keep it out of the warnings.
    for c in &mut v {
        if let Input::Yaml(y) = &mut c.input
            && !y.contains("nodeName")
            && !y.starts_with("just")
            && !y.contains('\t')
        {
            y.insert_str(0, "nodeName: n\n");
        }
    }
    v
}

/// Writes the case's input at `dir/<i>.yaml`.
fn write_input(dir: &Path, i: usize, input: &Input) -> PathBuf {
    let path = dir.join(format!("{i}.yaml"));
    match input {
        Input::Yaml(y) => std::fs::write(&path, y).unwrap(),
        Input::Bytes(b) => std::fs::write(&path, b).unwrap(),
        Input::Sparse(n) => std::fs::File::create(&path).unwrap().set_len(*n).unwrap(),
        Input::Fifo => {
            let st = Command::new("mkfifo").arg(&path).status().unwrap();
            assert!(st.success());
        }
        Input::Directory => std::fs::create_dir(&path).unwrap(),
    }
    path
}

/// The library's verdict: the error, or the warnings of a valid config.
fn library(path: &Path, plugin_dir: &Path) -> (Outcome, String) {
    match ConfigFile::read(path).and_then(ConfigFile::validate) {
        Err(e) => (Outcome::Error, e.to_string()),
        Ok(mut c) => {
            c.plugin_dir = plugin_dir.to_owned();
            let w: Vec<String> = c.warnings().iter().map(ToString::to_string).collect();
            (Outcome::Warning, w.join("; "))
        }
    }
}

fn nodestatus(args: &[&OsStr]) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A generous bound that exists at all: a FIFO must not hang the start.
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("nodestatus {args:?} still running after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn cell(s: &str) -> String {
    let s = s
        .replace('|', "\\|")
        .replace('\n', "\\n")
        .replace('\t', "\\t");
    if s.chars().count() > 240 {
        format!("{}…", s.chars().take(240).collect::<String>())
    } else {
        s
    }
}

#[test]
fn every_bad_config_is_refused_with_its_field_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir(&plugin_dir).unwrap();
    std::fs::write(plugin_dir.join("gpu.wasm"), b"").unwrap();
    let cases = cases();
    assert!(cases.len() >= 25, "{} cases", cases.len());
    println!("| # | Case | Input | Outcome |\n|---|---|---|---|");
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let path = write_input(dir.path(), i, &c.input);
        let (outcome, message) = library(&path, &plugin_dir);
        let shown = message.replace(&format!("{}/", dir.path().display()), "");
        let input = match &c.input {
            Input::Yaml(y) => format!("`{}`", cell(y.trim_end())),
            Input::Bytes(_) => "bytes `ff fe` in a value".into(),
            Input::Sparse(n) => format!("a {n}-byte file"),
            Input::Fifo => "a FIFO without a writer".into(),
            Input::Directory => "a directory".into(),
        };
        let kind = match outcome {
            Outcome::Error => "refused",
            Outcome::Warning => "warning",
        };
        println!(
            "| {} | {} | {input} | {kind}: {} |",
            i + 1,
            c.name,
            cell(&shown)
        );
        if outcome != c.outcome || !message.contains(c.field) || !message.contains(c.advice) {
            failures.push(format!(
                "{}: wanted {} with {:?} and {:?}, got {kind}: {message}",
                c.name,
                if c.outcome == Outcome::Error {
                    "an error"
                } else {
                    "a warning"
                },
                c.field,
                c.advice
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn config_check_and_run_refuse_bad_files_with_the_same_message() {
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir(&plugin_dir).unwrap();
    let names = [
        "duration overflow (panicked before)",
        "unknown field (typo)",
        "grant of the node's credentials",
        "duplicate plugin section",
        "wide alias bomb (4 million values)",
        "invalid UTF-8",
        "100 MB file",
        "a FIFO as config",
    ];
    let cases = cases();
    for name in names {
        let (i, c) = cases
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name)
            .unwrap();
        let path = write_input(dir.path(), i, &c.input);
        for args in [
            vec![OsStr::new("config"), OsStr::new("check"), path.as_os_str()],
            vec![
                OsStr::new("run"),
                OsStr::new("--config"),
                path.as_os_str(),
                OsStr::new("--plugin-dir"),
                plugin_dir.as_os_str(),
                OsStr::new("--address"),
                OsStr::new(""),
            ],
        ] {
            let (ok, out) = nodestatus(&args);
            assert!(!ok, "{name}: {args:?} succeeded:\n{out}");
            assert!(
                out.contains(c.field) && out.contains(c.advice),
                "{name}: {args:?} gave:\n{out}"
            );
            assert!(!out.contains("panicked"), "{name}: {out}");
        }
    }
}

#[test]
fn config_check_prints_warnings_and_passes_a_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir(&plugin_dir).unwrap();
    std::fs::write(plugin_dir.join("ready.wasm"), b"").unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(
        &path,
        format!(
            "nodeName: n\npluginDir: {}\nplugins: {{ready: {{}}, redy: {{}}}}\n",
            plugin_dir.display()
        ),
    )
    .unwrap();
    let (ok, out) = nodestatus(&[OsStr::new("config"), OsStr::new("check"), path.as_os_str()]);
    assert!(ok, "{out}");
    assert!(
        out.contains("warning: plugins.redy: no plugin is named redy (did you mean `ready`?)"),
        "{out}"
    );
    assert!(!out.contains("plugins.ready:"), "{out}");
}

#[test]
fn the_limits_are_what_the_docs_say() {
    assert_eq!(MAX_CONFIG_BYTES, 1 << 20);
    assert_eq!(MAX_YAML_VALUES, 100_000);
}

/// YAML-ish text built from the schema's own field names, so that many
/// cases get past the first level.
fn yamlish() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("nodeName".to_string()),
        Just("nodeIP".to_string()),
        Just("nodeLabels".to_string()),
        Just("registerWithTaints".to_string()),
        Just("nodeStatusUpdateFrequency".to_string()),
        Just("nodeStatusReportFrequency".to_string()),
        Just("nodeLeaseDurationSeconds".to_string()),
        Just("nodeStatusMaxImages".to_string()),
        Just("companion".to_string()),
        Just("plugins".to_string()),
        Just("gpu".to_string()),
        Just("paths".to_string()),
        Just("from".to_string()),
        Just("path".to_string()),
        Just("timeout".to_string()),
        Just("memoryLimit".to_string()),
        Just("config".to_string()),
        Just("fields".to_string()),
        Just("allow".to_string()),
        Just("key".to_string()),
        Just("effect".to_string()),
        "[a-zA-Z./_-]{0,12}",
    ];
    let leaf = prop_oneof![
        "[0-9]{1,25}(ns|us|ms|s|m|h)?",
        "-?[0-9]{0,6}\\.?[0-9]{0,4}(Mi|Gi|Ti|m|k|e3|)",
        "/[a-z/.]{0,20}",
        "[ -~]{0,16}",
        Just("~".to_string()),
        Just("true".to_string()),
        Just("*a".to_string()),
        Just("&a x".to_string()),
        Just("!!binary aGk=".to_string()),
        "\\PC{0,8}",
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|v| {
                let body: Vec<String> = v.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", body.join(", "))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Parsing and validating never panics: it is Ok or an error.
    #[test]
    fn parsing_never_panics_on_yamlish_structures(body in yamlish(), block in any::<bool>()) {
        let text = if block { body.replace(", ", "\n") } else { body };
        if let Ok(c) = ConfigFile::parse(&text, Path::new("p.yaml")) {
            let _ = c.validate();
        }
    }

    #[test]
    fn parsing_never_panics_on_arbitrary_text(text in "\\PC{0,200}") {
        if let Ok(c) = ConfigFile::parse(&text, Path::new("p.yaml")) {
            let _ = c.validate();
        }
    }

    #[test]
    fn durations_never_panic_and_never_exceed_the_maximum(s in "[+-]?([0-9]{0,30}(\\.[0-9]{0,30})?(ns|us|µs|ms|s|m|h|x)?){1,4}") {
        if let Ok(d) = nodestatus_engine::config::GoDuration::parse(&s) {
            prop_assert!(d.0 <= nodestatus_engine::config::MAX_DURATION);
        }
    }
}
