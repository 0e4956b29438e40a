//! The config module's unit tests.

use std::path::Path;

use nodestatus_runtime::PathGrant;

use super::*;

fn check(yaml: &str) -> Result<Config> {
    ConfigFile::parse(yaml, Path::new("c.yaml"))?.validate()
}

#[test]
fn list_flags_parse_like_the_kubelets_and_name_a_bad_item() {
    let labels: Labels = "a=b,example.com/c=".parse().unwrap();
    assert_eq!(labels.0["a"], "b");
    assert_eq!(labels.0["example.com/c"], "");
    assert_eq!(
        "a=b,c".parse::<Labels>().unwrap_err(),
        "\"c\" is not key=value"
    );
    let taints: Taints = "k=v:NoSchedule,k2:NoExecute".parse().unwrap();
    assert_eq!(
        taints.0,
        [
            Taint {
                key: "k".into(),
                value: "v".into(),
                effect: "NoSchedule".into()
            },
            Taint {
                key: "k2".into(),
                value: "".into(),
                effect: "NoExecute".into()
            }
        ]
    );
    assert!(
        "k=v"
            .parse::<Taints>()
            .unwrap_err()
            .contains("key=value:Effect")
    );
}

#[test]
fn flags_replace_the_files_values_and_keep_its_plugins() {
    let file = ConfigFile::parse(
        "nodeName: from-file\nnodeLabels: {a: b}\nnodeLeaseDurationSeconds: 30\nplugins: {gpu: {}}\n",
        Path::new("c.yaml"),
    )
    .unwrap();
    let flags = ConfigFile {
        node_name: Some("from-flag".into()),
        node_labels: Some("c=d".parse().unwrap()),
        ..ConfigFile::default()
    };
    let c = file.over(flags).validate().unwrap();
    assert_eq!(c.node_name, "from-flag");
    assert_eq!(c.node_labels, BTreeMap::from([("c".into(), "d".into())]));
    assert_eq!(c.node_lease_duration_seconds, 30);
    assert!(c.plugins.contains_key("gpu"));
}

#[test]
fn the_embedded_default_is_valid_and_grants_the_default_setters() {
    let c = Layers::default().load().unwrap();
    // The kubelet's ten setters, ready, and features (NFD's labels).
    assert_eq!(c.plugins.len(), 12);
    assert!(
        c.plugin_settings("machine-info")
            .sandbox
            .paths
            .iter()
            .any(|g| g.path == Path::new("/proc"))
    );
    assert!(
        c.plugin_settings("features")
            .sandbox
            .paths
            .iter()
            .any(|g| g.path == Path::new("/etc/kubernetes/node-feature-discovery/features.d"))
    );
}

#[test]
fn a_path_grant_can_name_its_host_directory() {
    let c = check(
        "nodeName: n\nplugins: {gpu: {paths: [/sys, {path: /proc/driver/nvidia, from: /host/proc/driver/nvidia/}]}}",
    )
    .unwrap();
    assert_eq!(
        c.plugin_settings("gpu").sandbox.paths,
        vec![
            PathGrant::same("/sys"),
            PathGrant {
                path: "/proc/driver/nvidia".into(),
                from: "/host/proc/driver/nvidia".into(),
            },
        ]
    );
}

#[test]
fn durations_parse() {
    assert_eq!(
        GoDuration::parse("1m30s").unwrap().0,
        Duration::from_secs(90)
    );
    assert_eq!(
        GoDuration::parse("250ms").unwrap().0,
        Duration::from_millis(250)
    );
    assert!(GoDuration::parse("10").is_err());
    assert!(GoDuration::parse("5x").is_err());
}

#[test]
fn durations_are_checked_not_panicking() {
    // Panicked in Duration::from_secs_f64 before.
    let e = GoDuration::parse("99999999999999999999h").unwrap_err();
    assert!(e.contains("too long"), "{e}");
    assert!(GoDuration::parse("2562047h47m16.854775807s").is_ok());
    assert!(GoDuration::parse("2562047h47m16.854775808s").is_err());
    assert_eq!(
        GoDuration::parse("1.5h").unwrap().0,
        Duration::from_secs(5400)
    );
    assert_eq!(
        GoDuration::parse(".5s").unwrap().0,
        Duration::from_millis(500)
    );
    assert_eq!(
        GoDuration::parse("0.000000001s").unwrap().0,
        Duration::from_nanos(1)
    );
    assert_eq!(
        GoDuration::parse("1us2\u{b5}s").unwrap().0,
        Duration::from_micros(3)
    );
    assert!(GoDuration::parse("-1s").unwrap_err().contains("negative"));
    assert!(
        GoDuration::parse("1")
            .unwrap_err()
            .contains("without a unit")
    );
    for bad in ["", ".", "s", "1.2.3s", "1e3s", "NaNs", "infh", "1 s"] {
        assert!(GoDuration::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn defaults_follow_the_kubelet() {
    let c = check("nodeName: n1\n").unwrap();
    assert_eq!(c.node_status_update_frequency, Duration::from_secs(10));
    assert_eq!(c.node_status_report_frequency, Duration::from_secs(300));
    assert_eq!(c.node_lease_duration_seconds, 40);
    assert_eq!(c.node_status_max_images, 50);
    assert!(c.register_node);
    let c = check("nodeName: n1\nnodeStatusUpdateFrequency: 20s\n").unwrap();
    assert_eq!(c.node_status_report_frequency, Duration::from_secs(20));
}

#[test]
fn kubelet_fields_reach_the_setters_that_use_them() {
    let c = check("nodeName: n\nhostnameOverride: host-a\nnodeIP: 10.0.0.7\nnodeStatusMaxImages: 7\nplugins: {node-address: {config: {nodeIP: ''}}}\n").unwrap();
    let na = c.plugin_settings("node-address").sandbox.config;
    assert_eq!(na["hostnameOverride"], "host-a");
    assert_eq!(na["nodeIP"], "10.0.0.7");
    assert_eq!(c.plugin_settings("images").sandbox.config["maxImages"], 7);
    let own =
        check("nodeName: n\nnodeStatusMaxImages: 7\nplugins: {images: {config: {maxImages: 3}}}\n")
            .unwrap();
    assert_eq!(own.plugin_settings("images").sandbox.config["maxImages"], 3);
    assert!(
        c.plugin_settings("gpu")
            .sandbox
            .config
            .as_object()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn each_mistake_names_its_field() {
    let cases = [
        (
            "nodeStatusUpdateFrequncy: 10s",
            "did you mean `nodeStatusUpdateFrequency`",
        ),
        ("nodeName: Bad_Name", "nodeName"),
        ("nodeName: n\nnodeIP: 127.0.0.1", "nodeIP"),
        (
            "nodeName: n\nnodeLabels: {node-role.kubernetes.io/master: ''}",
            "nodeLabels[node-role.kubernetes.io/master]",
        ),
        (
            "nodeName: n\nnodeLeaseDurationSeconds: 0",
            "nodeLeaseDurationSeconds",
        ),
        (
            "nodeName: n\nnodeStatusMaxImages: -2",
            "nodeStatusMaxImages",
        ),
        (
            "nodeName: n\nnodeStatusUpdateFrequency: 1m\nnodeStatusReportFrequency: 10s",
            "nodeStatusReportFrequency",
        ),
        (
            "nodeName: n\nnodeStatusUpdateFrequency: 1ms",
            "nodeStatusUpdateFrequency",
        ),
        (
            "nodeName: n\nregisterWithTaints: [{key: a, effect: Nope}]",
            "registerWithTaints[0]",
        ),
        (
            "nodeName: n\nplugins: {gpu: {timeout: 5m}}",
            "plugins.gpu.timeout",
        ),
        (
            "nodeName: n\nplugins: {gpu: {memoryLimit: 1Ti}}",
            "plugins.gpu.memoryLimit",
        ),
        (
            "nodeName: n\nplugins: {gpu: {sha256: abc}}",
            "plugins.gpu.sha256",
        ),
        (
            "nodeName: n\nplugins: {gpu: {fields: {allow: ['@x']}}}",
            "plugins.gpu.fields",
        ),
        (
            "nodeName: n\nplugins: {gpu: {paths: [relative]}}",
            "plugins.gpu.paths[0]",
        ),
        (
            "nodeName: n\nplugins: {gpu: {paths: [{path: /proc, from: host/proc}]}}",
            "plugins.gpu.paths[0].from",
        ),
        (
            "nodeName: n\nplugins: {gpu: {paths: [{path: /proc}]}}",
            "plugins.gpu",
        ),
        (
            "nodeName: n\nplugins: {gpu: {timout: 1s}}",
            "did you mean `timeout`",
        ),
        (
            "nodeName: n\ncompiler: llvm",
            "compiler: \"llvm\": one of \"tiered\", \"cranelift\", \"winch\"",
        ),
    ];
    for (yaml, want) in cases {
        let err = check(yaml).unwrap_err().to_string();
        assert!(err.contains(want), "{yaml:?} gave {err:?}, wanted {want:?}");
    }
}

/// The one list of settings drives the file's keys, the flags, `config
/// check` and the live-reload classes: a setting in it is in each.
#[test]
fn every_setting_is_a_key_a_flag_a_row_and_a_class() {
    use clap::CommandFactory;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        layers: Layers,
    }
    let flags: Vec<String> = Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .collect();
    let c = check("nodeName: n1\n").unwrap();
    let rows = c.provenance(&ConfigFile::default(), &ConfigFile::default());
    assert_eq!(rows.len(), SETTINGS.len());
    for (s, (key, _, source)) in SETTINGS.iter().zip(&rows) {
        assert_eq!(s.key, *key);
        assert_eq!(*source, "default");
        // The key is the file's: a file that sets only it parses, and a
        // misspelling of it is refused with it as the suggestion.
        let typo = format!("{}x", s.key);
        let e = ConfigFile::parse(&format!("{typo}: null\n"), Path::new("c.yaml")).unwrap_err();
        assert!(
            e.to_string().contains(&format!("did you mean `{}`", s.key)),
            "{e}"
        );
        assert!(ConfigFile::parse(&format!("{}: null\n", s.key), Path::new("c.yaml")).is_ok());
        // The flag is the key in kebab case (`nodeIP` is `node-ip`).
        if !s.has_flag() {
            assert!(
                !flags
                    .iter()
                    .any(|f| f.replace('-', "") == s.key.to_lowercase())
            );
            continue;
        }
        let mut kebab = String::new();
        for (i, ch) in s.key.char_indices() {
            let prev_upper = i > 0 && s.key[..i].ends_with(|p: char| p.is_ascii_uppercase());
            if ch.is_ascii_uppercase() && i > 0 && !prev_upper {
                kebab.push('-');
            }
            kebab.push(ch.to_ascii_lowercase());
        }
        assert!(flags.contains(&kebab), "no flag --{kebab} for {}", s.key);
    }
    assert_eq!(top_keys().len(), SETTINGS.len() + 1);
}

#[test]
fn a_change_is_named_by_its_class_from_the_values_in_force() {
    let old = check("nodeName: n1\n").unwrap();
    // The report frequency follows the update frequency when unset: both
    // change, and both are live.
    let new = check("nodeName: n1\nnodeStatusUpdateFrequency: 20s\n").unwrap();
    assert_eq!(
        old.changed(&new, Class::Live),
        ["nodeStatusUpdateFrequency", "nodeStatusReportFrequency"]
    );
    assert!(old.changed(&new, Class::Restart).is_empty());
    let new = check("nodeName: n2\ncompileTimeout: 30s\nnodeStatusMaxImages: 3\n").unwrap();
    assert_eq!(
        old.changed(&new, Class::Restart),
        ["nodeName", "compileTimeout"]
    );
    assert_eq!(old.changed(&new, Class::Live), ["nodeStatusMaxImages"]);
    // A registry's settings, not only its name: a change of them is named
    // (the paths are shown, never what the files hold).
    let plain = check("nodeName: n1\nregistries: {reg.example:5000: {}}\n").unwrap();
    let insecure =
        check("nodeName: n1\nregistries: {reg.example:5000: {insecure: true}}\n").unwrap();
    assert_eq!(plain.changed(&insecure, Class::Live), ["registries"]);
    // The same values written differently are no change.
    let same =
        check("nodeName: n1\nnodeStatusReportFrequency: 300s\nnodeStatusMaxImages: 50\n").unwrap();
    assert!(old.changed(&same, Class::Live).is_empty());
}

/// A build without the `cri` feature refuses a set endpoint, saying how to
/// build one that takes it (checked here with the rule's input, so that no
/// second build of the crate is needed to test it).
#[test]
fn without_the_cri_feature_a_set_runtime_endpoint_is_refused() {
    let sock = "unix:///run/containerd/containerd.sock";
    assert!(super::validate::runtime_endpoint(sock, true).is_ok());
    let err = super::validate::runtime_endpoint(sock, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("built without its container runtime client")
            && err.contains("containerRuntimeEndpoint"),
        "{err}"
    );
    // A bad endpoint is refused as bad first, in either build.
    let bad = super::validate::runtime_endpoint("tcp://10.0.0.1:1", false)
        .unwrap_err()
        .to_string();
    assert!(!bad.contains("built without"), "{bad}");
}

#[cfg(feature = "cri")]
#[test]
fn the_runtime_endpoint_defaults_to_the_kubelets_and_empty_turns_it_off() {
    let unset = check("nodeName: n\n").unwrap();
    assert_eq!(
        unset.container_runtime_endpoint.as_deref(),
        Some(DEFAULT_CONTAINER_RUNTIME_ENDPOINT)
    );
    assert!(unset.container_runtime_defaulted);
    let set = check("nodeName: n\ncontainerRuntimeEndpoint: unix:///run/crio/crio.sock\n").unwrap();
    assert_eq!(
        set.container_runtime_endpoint.as_deref(),
        Some("unix:///run/crio/crio.sock")
    );
    assert!(!set.container_runtime_defaulted);
    let off = check("nodeName: n\ncontainerRuntimeEndpoint: \"\"\n").unwrap();
    assert_eq!(off.container_runtime_endpoint, None);
    assert!(off.cri_client().is_none());
    // The default socket that is not there is no runtime; a set one is
    // always asked.
    let absent = "unix:///nonexistent/containerd.sock";
    let client = |optional| {
        crate::cri::Client::new(absent, Duration::from_secs(1))
            .unwrap()
            .optional(optional)
    };
    assert!(!client(true).present());
    assert!(client(false).present());
}

#[test]
fn the_default_grants_expose_no_protected_path_even_on_a_kubelet_host() {
    use std::path::PathBuf;
    // As if /etc/kubernetes, /var/lib/kubelet/pki, ... all existed.
    let cfg = ConfigFile::parse(DEFAULT_CONFIG, Path::new("default"))
        .unwrap()
        .validate()
        .unwrap();
    let mut seen = 0;
    for (name, p) in &cfg.plugins {
        for (i, g) in p.sandbox.paths.iter().enumerate() {
            seen += 1;
            let w = warnings::exposed_protected_paths(name, i, g, &|_| true);
            assert!(w.is_empty(), "{name}: {w:?}");
        }
    }
    assert!(seen > 0);
    // A plain directory that holds the kubelet's credentials still warns.
    let g = PathGrant::same(PathBuf::from("/var/lib/kubelet"));
    let w = warnings::exposed_protected_paths("disk-pressure", 0, &g, &|_| true);
    assert!(
        w.iter().any(|w| w
            .message
            .contains("/var/lib/kubelet/pki (the node's credentials)")),
        "{w:?}"
    );
}

#[test]
fn the_compiler_is_tiered_unless_the_config_says_otherwise() {
    use nodestatus_runtime::Tiers;
    assert_eq!(check("nodeName: n\n").unwrap().compiler, Tiers::Tiered);
    assert_eq!(
        check("nodeName: n\ncompiler: winch\n").unwrap().compiler,
        Tiers::Winch
    );
    let options = check("nodeName: n\ncompiler: cranelift\n")
        .unwrap()
        .runtime_options(None);
    assert_eq!(options.tiers, Tiers::Cranelift);
}
