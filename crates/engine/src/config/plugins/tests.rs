//! Tests of the parent module.

use std::path::Path;

use super::super::{Config, ConfigFile};
use super::*;

const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn check(yaml: &str) -> super::Result<Config> {
    ConfigFile::parse(yaml, Path::new("c.yaml"))?.validate()
}

fn image(section: &str) -> ImageSource {
    check(&format!("nodeName: n\nplugins:\n  gpu: {section}\n"))
        .unwrap()
        .plugins["gpu"]
        .image
        .clone()
        .unwrap()
}

fn refused(section: &str) -> String {
    check(&format!("nodeName: n\nplugins:\n  gpu: {section}\n"))
        .unwrap_err()
        .to_string()
}

#[test]
fn a_tag_is_resolved_once_unless_it_is_latest_or_the_policy_is_always() {
    let pinned = format!("{{image: 'r.example.com/v/gpu@sha256:{HEX}'}}");
    for (section, policy) in [
        ("{image: r.example.com/v/gpu:1.4}", PullPolicy::IfNotPresent),
        (pinned.as_str(), PullPolicy::IfNotPresent),
        ("{image: r.example.com/v/gpu:latest}", PullPolicy::Always),
        ("{image: r.example.com/v/gpu}", PullPolicy::Always),
        (
            "{image: r.example.com/v/gpu:1.4, pullPolicy: Always}",
            PullPolicy::Always,
        ),
        (
            "{image: r.example.com/v/gpu:latest, pullPolicy: IfNotPresent}",
            PullPolicy::IfNotPresent,
        ),
    ] {
        assert_eq!(image(section).pull_policy, policy, "{section}");
    }
    let err = refused("{image: r.example.com/v/gpu:1, pullPolicy: always}");
    assert!(
        err.contains("plugins.gpu.pullPolicy")
            && err.contains("\"always\"")
            && err.contains("IfNotPresent")
            && err.contains("Always"),
        "{err}"
    );
    let err = refused("{pullPolicy: Always}");
    assert!(
        err.contains("plugins.gpu.pullPolicy") && err.contains("add image:"),
        "{err}"
    );
}

#[test]
fn a_plugin_never_pulled_fails_open_unless_its_section_says_closed() {
    let section = "{image: r.example.com/v/gpu:1}";
    assert_eq!(image(section).failure_policy, FailurePolicy::Open);
    assert_eq!(
        image("{image: r.example.com/v/gpu:1, failurePolicy: closed}").failure_policy,
        FailurePolicy::Closed
    );
    let err = refused("{image: r.example.com/v/gpu:1, failurePolicy: Fail}");
    assert!(
        err.contains("plugins.gpu.failurePolicy")
            && err.contains("\"Fail\"")
            && err.contains("open")
            && err.contains("closed"),
        "{err}"
    );
    let err = refused("{failurePolicy: closed}");
    assert!(
        err.contains("plugins.gpu.failurePolicy") && err.contains("add image:"),
        "{err}"
    );
}

#[test]
fn an_image_with_a_registry_or_oci_prefix_is_the_image_without_it() {
    let plain = image("{image: r.example.com/v/gpu:1}");
    for prefixed in [
        "{image: 'registry://r.example.com/v/gpu:1'}",
        "{image: 'oci://r.example.com/v/gpu:1'}",
    ] {
        assert_eq!(image(prefixed), plain, "{prefixed}");
    }
    let err = refused("{image: 'http://r.example.com/v/gpu:1'}");
    assert!(
        err.contains("plugins.gpu.image") && err.contains("insecure: true"),
        "{err}"
    );
}

#[test]
fn the_registry_cache_is_bounded_and_aged_by_default_and_as_set() {
    let c = check("nodeName: n\n").unwrap();
    assert_eq!(
        c.registry_cache,
        nodestatus_registry::cache::Limits {
            max_bytes: 1 << 30,
            max_unused: Duration::from_secs(7 * 24 * 3600),
        }
    );
    let c = check("nodeName: n\nregistryCacheMaxSize: 256Mi\nregistryCacheMaxAge: 24h\n").unwrap();
    assert_eq!(c.registry_cache.max_bytes, 256 << 20);
    assert_eq!(c.registry_cache.max_unused, Duration::from_secs(24 * 3600));
    for (yaml, field, says) in [
        (
            "registryCacheMaxSize: 1Ki",
            "registryCacheMaxSize",
            "between 1Mi and 1Ti",
        ),
        ("registryCacheMaxSize: lots", "registryCacheMaxSize", "lots"),
        (
            "registryCacheMaxAge: 10s",
            "registryCacheMaxAge",
            "between 1m and 8760h",
        ),
    ] {
        let err = check(&format!("nodeName: n\n{yaml}\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(field) && err.contains(says), "{yaml}: {err}");
    }
}

/// The messages of the warnings about `field` of the config whose plugin
/// `gpu` is `section`.
fn gpu_warnings(section: &str, field: &str) -> Vec<String> {
    check(&format!(
        "nodeName: n\npluginDir: /nonexistent\nplugins:\n  gpu: {section}\n"
    ))
    .unwrap()
    .warnings()
    .into_iter()
    .filter(|w| w.field == format!("plugins.gpu.{field}"))
    .map(|w| w.message)
    .collect()
}

#[test]
fn a_pull_interval_on_a_tag_resolved_once_is_warned_about() {
    let warned = |section: &str| gpu_warnings(section, "pullInterval");
    let w = warned("{image: r.example.com/v/gpu:1, pullInterval: 1m}");
    assert!(w.len() == 1 && w[0].contains("pullPolicy: Always"), "{w:?}");
    for quiet in [
        "{image: r.example.com/v/gpu:1, pullInterval: 1m, pullPolicy: Always}",
        "{image: r.example.com/v/gpu:latest, pullInterval: 1m}",
        "{image: r.example.com/v/gpu:1}",
    ] {
        assert!(warned(quiet).is_empty(), "{quiet}: {:?}", warned(quiet));
    }
}

#[test]
fn stateless_without_a_kept_instance_is_warned_about() {
    let warned = |section: &str| gpu_warnings(section, "stateless").len();
    assert_eq!(warned("{stateless: true}"), 1);
    assert_eq!(warned("{stateless: true, reuseInstance: true}"), 0);
    assert_eq!(warned("{reuseInstance: true}"), 0);
}

/// A trusted root made by the real Fulcio and Rekor (the registry
/// crate's keyless fixtures), in a file.
fn trusted_root(dir: &Path) -> PathBuf {
    let path = dir.join("trusted_root.json");
    std::fs::write(
        &path,
        include_str!("../../../../registry/tests/fixtures/keyless/trusted_root.json"),
    )
    .unwrap();
    path
}

#[test]
fn verify_takes_a_key_or_a_kubewarden_policy_with_a_trusted_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = trusted_root(dir.path());
    let root = root.display();
    let policy = format!(
        "{{image: r.example.com/v/gpu:1, verify: {{trustedRoot: {root}, allOf: [{{kind: githubAction, owner: vendor, repo: gpu-setter}}], anyOf: {{minimumMatches: 1, signatures: [{{kind: genericIssuer, issuer: 'https://accounts.example.com', subject: {{urlPrefix: 'https://ci.example.com/vendor'}}, annotations: {{env: prod}}}}]}}}}}}"
    );
    let source = image(&policy);
    assert_eq!(source.key, None);
    let p = source.policy.clone().unwrap();
    assert_eq!(p.field, "plugins.gpu.verify");
    assert_eq!(
        p.trusted_root.as_deref(),
        Some(dir.path().join("trusted_root.json").as_path())
    );
    p.build().unwrap();
    // The top-level policy applies to a plugin without its own verify.
    let c = check(&format!(
        "nodeName: n\nverify: {{trustedRoot: {root}, allOf: [{{kind: githubAction, owner: vendor}}]}}\nplugins:\n  gpu: {{image: r.example.com/v/gpu:1}}\n"
    ))
    .unwrap();
    assert_eq!(c.verify_key, None);
    assert_eq!(
        c.plugins["gpu"].image.as_ref().unwrap().policy,
        c.verify_policy
    );
    assert_eq!(c.verify_policy.as_ref().unwrap().field, "verify");
    for (section, field, says) in [
        (
            "{image: r.example.com/v/gpu:1, verify: {key: /k.pub, allOf: [{kind: githubAction, owner: o}]}}".into(),
            "plugins.gpu.verify",
            "not both",
        ),
        (
            format!("{{image: r.example.com/v/gpu:1, verify: {{key: /k.pub, trustedRoot: {root}}}}}"),
            "plugins.gpu.verify.trustedRoot",
            "applies to a policy's keyless entries",
        ),
        (
            format!("{{image: r.example.com/v/gpu:1, verify: {{trustedRoot: {root}}}}}"),
            "plugins.gpu.verify",
            "needs key",
        ),
        (
            "{image: r.example.com/v/gpu:1, verify: {allOf: [{kind: githubAction, owner: o}]}}".into(),
            "plugins.gpu.verify.trustedRoot",
            "is required by a genericIssuer or githubAction entry",
        ),
        (
            "{image: r.example.com/v/gpu:1, verify: {trustedRoot: /nonexistent/root.json, allOf: [{kind: githubAction, owner: o}]}}".into(),
            "plugins.gpu.verify.trustedRoot",
            "cannot read the trusted root /nonexistent/root.json",
        ),
        (
            format!("{{image: r.example.com/v/gpu:1, verify: {{trustedRoot: {}, allOf: [{{kind: githubAction, owner: o}}]}}}}", dir.path().display()),
            "plugins.gpu.verify.trustedRoot",
            "cannot read the trusted root",
        ),
        (
            format!("{{image: r.example.com/v/gpu:1, verify: {{trustedRoot: {root}, anyOf: {{minimumMatches: 3, signatures: [{{kind: githubAction, owner: o}}]}}}}}}"),
            "plugins.gpu.verify.anyOf.minimumMatches",
            "3 must be between 1 and the 1 signatures listed",
        ),
        (
            format!("{{image: r.example.com/v/gpu:1, verify: {{trustedRoot: {root}, allOf: [{{kind: genericIssuer, issuer: i, subject: {{urlPrefix: nope}}}}]}}}}"),
            "plugins.gpu.verify.allOf[0].subject.urlPrefix",
            "is not a URL",
        ),
    ] {
        let err = refused(&section);
        assert!(err.contains(field) && err.contains(says), "{section}: {err}");
    }
    // A file that is not a trusted root.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"mediaType": "application/json"}"#).unwrap();
    let err = refused(&format!(
        "{{image: r.example.com/v/gpu:1, verify: {{trustedRoot: {}, allOf: [{{kind: githubAction, owner: o}}]}}}}",
        bad.display()
    ));
    assert!(
        err.contains("plugins.gpu.verify.trustedRoot")
            && err.contains("is not a Sigstore trusted root"),
        "{err}"
    );
    // Kubewarden's kinds only.
    let err =
        refused("{image: r.example.com/v/gpu:1, verify: {allOf: [{kind: keyless, issuer: i}]}}");
    assert!(err.contains("unknown variant `keyless`"), "{err}");
}

#[test]
fn streams_and_the_event_budget_are_granted_as_written_and_bad_ones_named() {
    let c = check("nodeName: n\nplugins:\n  gpu: {streams: [kmsg, /var/log/kern.log, kmsg], eventsPerMinute: 60}\n")
        .unwrap();
    let s = &c.plugins["gpu"].sandbox;
    assert_eq!(
        s.streams,
        vec![
            nodestatus_runtime::reactor::StreamGrant::Kmsg,
            nodestatus_runtime::reactor::StreamGrant::File("/var/log/kern.log".into())
        ]
    );
    assert_eq!(s.events_per_minute, 60);
    assert_eq!(
        check("nodeName: n\nplugins:\n  gpu: {}\n").unwrap().plugins["gpu"]
            .sandbox
            .events_per_minute,
        10
    );
    for (section, says) in [
        ("{streams: [syslog]}", "plugins.gpu.streams[0]"),
        ("{streams: [kmsg, var/log/x]}", "plugins.gpu.streams[1]"),
        ("{streams: [/etc/kubernetes/admin.conf]}", "never granted"),
        ("{eventsPerMinute: 0}", "plugins.gpu.eventsPerMinute"),
        ("{eventsPerMinute: 601}", "between 1 and 600"),
    ] {
        let err = refused(section);
        assert!(err.contains(says), "{section}: {err}");
    }
}

#[test]
fn features_d_may_be_granted_while_the_credentials_beside_it_stay_protected() {
    let grant = |path: &str| {
        check(&format!(
            "nodeName: n\nplugins:\n  features: {{paths: [{path}]}}\n"
        ))
    };
    let ok = grant("/etc/kubernetes/node-feature-discovery/features.d").unwrap();
    assert_eq!(
        ok.plugins["features"].sandbox.paths[0].from,
        Path::new("/etc/kubernetes/node-feature-discovery/features.d")
    );
    // A file in it too (a stream of one feature file, say).
    assert!(grant("/etc/kubernetes/node-feature-discovery/features.d/gpu").is_ok());
    for path in [
        "/etc/kubernetes",
        "/etc/kubernetes/pki",
        "/etc/kubernetes/kubelet.conf",
        "/etc/kubernetes/node-feature-discovery",
        "/etc/kubernetes/node-feature-discovery/features.d.bak",
        // '..' is resolved before the check: it climbs out of features.d.
        "/etc/kubernetes/node-feature-discovery/features.d/../../pki",
    ] {
        let err = grant(path).unwrap_err().to_string();
        assert!(
            err.contains("in /etc/kubernetes, which is never granted (the node's credentials)"),
            "{path}: {err}"
        );
    }
    assert_eq!(
        protected_root(Path::new("/etc/kubernetes/admin.conf")),
        Some("/etc/kubernetes")
    );
    assert_eq!(
        protected_root(Path::new(
            "/etc/kubernetes/node-feature-discovery/features.d/x"
        )),
        None
    );
}

#[test]
fn a_grant_whose_links_lead_into_a_protected_path_is_refused() {
    // A link named as a harmless directory that leads to /etc/kubernetes
    // (the machine need not have it: the link's target is what is checked).
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("features.d");
    std::os::unix::fs::symlink("/proc/self", &link).unwrap();
    let err = check(&format!(
        "nodeName: n\nplugins:\n  features: {{paths: [{}]}}\n",
        link.display()
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("its links lead to /proc/") && err.contains("never granted"),
        "{err}"
    );
    // A plain directory is granted as before.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert!(
        check(&format!(
            "nodeName: n\nplugins:\n  features: {{paths: [{}]}}\n",
            plain.display()
        ))
        .is_ok()
    );
}
