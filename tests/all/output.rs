//! Plugin output that the API server would refuse, or that would slip past
//! the policy. Each hostile setter runs in one pass beside a good one
//! (`kernel-check`, last): it is dropped alone with a typed reason that names
//! it, and the good setter's fields reach the real API server. Each bad
//! output is also sent to the real API server as a status patch, to check
//! that the validator follows the server rather than a guess: the server
//! refuses what [`validate`] calls the API server's rules, and accepts what
//! it calls nodestatus's own.
//!
//! The tests print one table row per case (`cargo test --test all output::
//! -- --nocapture`); `docs/reliability.md` holds a run's rows.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nodestatus_engine::config::PluginConfig;
use nodestatus_engine::pipeline::{SetterErrorKind, pass};
use nodestatus_model::node::patch;
use nodestatus_model::policy::Allowance;
use nodestatus_model::validate::{self, Origin};
use nodestatus_runtime::{CallContext, PluginSettings};
use nodestatus_tests::hostile::{self, Behaviour};
use nodestatus_tests::{built, drop_bytes, drop_plugin};
use serde_json::{Value, json};

use crate::common::{plugin_dir, settings};
use crate::kube::admin;

/// What the real API server is expected to say to the bad output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    /// It refuses the patch: the rule is the API server's.
    Refuses,
    /// It accepts the patch: the rule is nodestatus's own.
    Accepts,
    /// Not sent (not a node, or a field the status subresource ignores).
    NotSent,
}

/// One hostile setter.
struct Case {
    /// The plugin's name (and file name).
    plugin: &'static str,
    /// What the issue calls it.
    what: &'static str,
    /// Its output, given its input node.
    output: Box<dyn Fn(&Value) -> String>,
    /// The kind of error the host must report.
    kind: SetterErrorKind,
    /// Text the error message must hold.
    text: &'static str,
    /// Its allowance (allow, deny), when not the default.
    fields: Option<(&'static [&'static str], &'static [&'static str])>,
    server: Server,
}

fn edit(f: impl Fn(&mut Value) + 'static) -> Box<dyn Fn(&Value) -> String> {
    Box::new(move |n| {
        let mut n = n.clone();
        f(&mut n);
        serde_json::to_string(&n).unwrap()
    })
}

fn text(s: String) -> Box<dyn Fn(&Value) -> String> {
    Box::new(move |_| s.clone())
}

fn case(
    plugin: &'static str,
    what: &'static str,
    output: Box<dyn Fn(&Value) -> String>,
    kind: SetterErrorKind,
    text: &'static str,
    server: Server,
) -> Case {
    Case {
        plugin,
        what,
        output,
        kind,
        text,
        fields: None,
        server,
    }
}

fn conditions(n: &mut Value) -> &mut Vec<Value> {
    n["status"]["conditions"].as_array_mut().unwrap()
}

/// A registered node's status, as a kubelet would have written it.
fn base_node(name: &str) -> Value {
    let t = "2026-01-01T00:00:00Z";
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"example.com/pool": "blue"}, "annotations": {"example.com/note": "n"}},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "ok", "lastHeartbeatTime": t, "lastTransitionTime": t},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok", "lastHeartbeatTime": t, "lastTransitionTime": t}
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "3Gi", "pods": "110"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kernelVersion": "6.1.0", "osImage": "Debian", "operatingSystem": "linux", "architecture": "amd64",
                "machineID": "m", "systemUUID": "s", "bootID": "b", "containerRuntimeVersion": "containerd://1.7", "kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2"},
            "images": [{"names": ["registry.example.com/a:1"], "sizeBytes": 1000}],
            "volumesInUse": ["kubernetes.io/csi/driver^vol-1"]
        }
    })
}

fn nodes() -> Api<Node> {
    Api::all(admin())
}

/// Deletes `name` if it exists and creates it from `node` as the admin;
/// returns the node as stored.
pub async fn fresh_node(name: &str, node: &Value) -> Value {
    let api = nodes();
    if api.get_opt(name).await.unwrap().is_some() {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let n: Node = serde_json::from_value(node.clone()).unwrap();
    api.create(&PostParams::default(), &n).await.unwrap();
    get(name).await
}

pub async fn get(name: &str) -> Value {
    serde_json::to_value(nodes().get(name).await.unwrap()).unwrap()
}

/// Sends `p` to `nodes/<name>/status` as a strategic merge patch; the error
/// is the server's code and message.
pub async fn patch_status(name: &str, p: &Value) -> Result<Value, String> {
    nodes()
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(p))
        .await
        .map(|n| serde_json::to_value(n).unwrap())
        .map_err(|e| match e {
            kube::Error::Api(r) => {
                let mut m = r.message;
                m.truncate(160);
                format!("{} {}: {m}", r.code, r.reason)
            }
            other => other.to_string(),
        })
}

/// Runs `cases` in one pass beside `kernel-check` over node `name`, checks
/// each report, each server verdict, and that the pass's patch lands.
async fn run_cases(name: &str, cases: Vec<Case>) {
    let stored = fresh_node(name, &base_node(name)).await;
    let allowances: HashMap<String, Allowance> = cases
        .iter()
        .filter_map(|c| {
            let (allow, deny) = c.fields?;
            let s = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            Some((
                c.plugin.to_owned(),
                Allowance::parse(&s(allow), &s(deny)).unwrap(),
            ))
        })
        .collect();
    let allowances = Arc::new(allowances);
    let (tmp, dir) = plugin_dir(settings(move |n| PluginConfig {
        // The good setter runs last, after every hostile one.
        order: (n == "kernel-check").then_some(5000),
        fields: allowances.get(n).cloned().unwrap_or_default(),
        ..Default::default()
    }));
    drop_plugin(
        tmp.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    for c in &cases {
        let out = (c.output)(&stored);
        drop_bytes(
            tmp.path(),
            &format!("{}.wasm", c.plugin),
            &hostile::component(c.plugin, &Behaviour::Return(out)),
        );
    }
    dir.rescan();
    assert_eq!(dir.current().setters().len(), cases.len() + 1);

    let started = Instant::now();
    let (out, report) = pass(
        dir.runtime(),
        &dir.current(),
        &stored,
        &CallContext::default(),
        Default::default(),
    );
    let pass = started.elapsed();

    let mut rows = Vec::new();
    for c in &cases {
        let s = report
            .setters
            .iter()
            .find(|s| s.plugin == c.plugin)
            .unwrap_or_else(|| panic!("{} did not run", c.plugin));
        let e = s.outcome.clone().expect_err(c.plugin);
        assert_eq!(e.kind, c.kind, "{}: {e}", c.plugin);
        assert!(
            e.message.contains(c.text),
            "{}: {:?} lacks {:?}",
            c.plugin,
            e.message,
            c.text
        );
        rows.push((c, e));
    }
    let good = report
        .setters
        .iter()
        .find(|s| s.plugin == "kernel-check")
        .unwrap();
    assert!(good.outcome.is_ok(), "{:?}", good.outcome);
    assert!(out["metadata"]["labels"]["kernel.example.com/version"].is_string());
    assert_eq!(validate::update(&stored, &out), Ok(()));

    // What the real API server says to each bad output, sent alone.
    let mut verdicts = Vec::new();
    for c in &cases {
        if c.server == Server::NotSent {
            verdicts.push("not sent".to_owned());
            continue;
        }
        let cur = get(name).await;
        let bad: Value = serde_json::from_str(&(c.output)(&cur)).unwrap();
        let p = patch::two_way(&cur, &bad).expect("the case changes the node");
        let verdict = patch_status(name, &p).await;
        let ours = validate::problems(&bad);
        let origins: Vec<Origin> = validate::introduced(&validate::problems(&cur), ours)
            .iter()
            .map(|p| p.rule.origin())
            .collect();
        match c.server {
            Server::Refuses => {
                let e = verdict.expect_err(&format!("{}: the API server accepted it", c.plugin));
                assert!(
                    origins.contains(&Origin::ApiServer),
                    "{}: {origins:?}",
                    c.plugin
                );
                verdicts.push(format!("refused: {e}"));
            }
            Server::Accepts => {
                let stored = verdict
                    .unwrap_or_else(|e| panic!("{}: the API server refused it: {e}", c.plugin));
                assert!(
                    !origins.contains(&Origin::ApiServer),
                    "{}: {origins:?}",
                    c.plugin
                );
                let ready: Vec<&str> = stored["status"]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c["type"] == "Ready")
                    .filter_map(|c| c["status"].as_str())
                    .collect();
                verdicts.push(format!(
                    "accepted (Ready on the server: {})",
                    ready.join(", ")
                ));
            }
            Server::NotSent => unreachable!(),
        }
    }

    // The pass's own patch, from the node it started from, lands.
    let p = patch::two_way(&stored, &out).unwrap();
    let landed = patch_status(name, &p)
        .await
        .expect("the pass's patch lands");
    assert!(landed["metadata"]["labels"]["kernel.example.com/version"].is_string());
    assert!(
        landed["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "KernelSupported")
    );
    assert_eq!(
        landed["status"]["volumesInUse"],
        stored["status"]["volumesInUse"]
    );
    assert_eq!(validate::node(&landed), Ok(()));

    println!(
        "pass of {} hostile setters and kernel-check: {pass:?}",
        cases.len()
    );
    println!("| Output | Plugin | Kind | Host's reason (start) | Real API server, sent alone |");
    println!("|---|---|---|---|---|");
    for ((c, e), v) in rows.iter().zip(&verdicts) {
        let mut m = e.message.replace('|', "\\|");
        m.truncate(110);
        println!(
            "| {} | `{}` | `{}` | {m} | {} |",
            c.what,
            c.plugin,
            e.kind.as_str(),
            v.replace('|', "\\|")
        );
    }
    // A generous bound that the checks are cheap: the 20,000-condition case
    // took 20 s after the call before the bound existed.
    assert!(pass < Duration::from_secs(30), "{pass:?}");
}

/// The ten outputs of issue 13, each seen to send a node NotReady.
#[tokio::test(flavor = "multi_thread")]
async fn the_ten_refused_outputs_are_dropped_alone_and_the_node_is_still_written() {
    use Server::Refuses;
    use SetterErrorKind::Invalid;
    let cases = vec![
        case(
            "untyped-condition",
            "a condition without a type",
            edit(|n| conditions(n).push(json!({"status": "True", "reason": "NoType"}))),
            Invalid,
            "must have a type",
            Refuses,
        ),
        case(
            "duplicate-address",
            "duplicate addresses",
            edit(|n| {
                let a = n["status"]["addresses"][0].clone();
                n["status"]["addresses"].as_array_mut().unwrap().push(a);
            }),
            Invalid,
            "listed more than once",
            Refuses,
        ),
        case(
            "negative-capacity",
            "a negative capacity",
            edit(|n| n["status"]["capacity"]["memory"] = json!("-1Gi")),
            Invalid,
            "is negative",
            Refuses,
        ),
        case(
            "fractional-pods",
            "a fractional `pods`",
            edit(|n| n["status"]["capacity"]["pods"] = json!("1.5")),
            Invalid,
            "not a whole number",
            Refuses,
        ),
        case(
            "big-annotation",
            "a 300 KB annotation",
            edit(|n| n["metadata"]["annotations"]["example.com/big"] = json!("x".repeat(300_000))),
            Invalid,
            "over the API server's limit of 262144",
            Refuses,
        ),
        case(
            "huge-volumes",
            "a 2 MB `volumesInUse`",
            edit(|n| {
                n["status"]["volumesInUse"] = (0..27_000)
                    .map(|i| json!(format!("kubernetes.io/csi/driver^volume-{i:040}")))
                    .collect();
            }),
            SetterErrorKind::Call(nodestatus_runtime::CallErrorKind::OutputTooLarge),
            "over the 1048576-byte bound",
            Refuses,
        ),
        case(
            "leap-second",
            "a leap-second timestamp",
            edit(|n| conditions(n)[1]["lastHeartbeatTime"] = json!("2016-12-31T23:59:60Z")),
            Invalid,
            "second out of range",
            Refuses,
        ),
        case(
            "string-port",
            "a port given as a string",
            edit(|n| n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = json!("10250")),
            Invalid,
            "must be an integer, not a string",
            Refuses,
        ),
        case(
            "avoid-pods",
            "a non-JSON `preferAvoidPods`",
            edit(|n| {
                n["metadata"]["annotations"][validate::PREFER_AVOID_PODS_ANNOTATION] =
                    json!("avoid: everything")
            }),
            Invalid,
            "preferAvoidPods is not JSON",
            Refuses,
        ),
        case(
            "numeric-address-type",
            "an address type given as a number",
            edit(|n| n["status"]["addresses"][0]["type"] = json!(3)),
            Invalid,
            "must be a string, not a number",
            Refuses,
        ),
    ];
    run_cases("policy-ten", cases).await;
}

/// The other hostile outputs of issue 13's suite, and the policy bypasses.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_outputs_are_dropped_with_a_typed_reason() {
    use Server::{Accepts, NotSent, Refuses};
    use SetterErrorKind::{Invalid, Limit, Output, Policy};
    let mut cases = vec![
        case(
            "not-json",
            "output that is not JSON",
            text("<node>not json</node>".into()),
            Output,
            "not JSON",
            NotSent,
        ),
        case(
            "not-a-node",
            "JSON but not a Node",
            text(r#"{"kind":"Pod","metadata":{"name":"x"}}"#.into()),
            Output,
            "not \"Node\"",
            NotSent,
        ),
        case(
            "deep",
            "nested 10,000 levels deep",
            text(format!("{}{}", "[".repeat(10_000), "]".repeat(10_000))),
            Output,
            "recursion limit exceeded",
            NotSent,
        ),
        case(
            "deep-field",
            "a field nested 10,000 levels deep",
            Box::new(|n| {
                let s = serde_json::to_string(n).unwrap();
                let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
                s.replacen("\"status\":{", &format!("\"status\":{{\"deep\":{deep},"), 1)
            }),
            Output,
            "recursion limit exceeded",
            NotSent,
        ),
        case(
            "renamer",
            "a changed metadata.name",
            edit(|n| n["metadata"]["name"] = json!("someone-else")),
            Policy,
            "metadata.name may not be changed",
            NotSent,
        ),
        case(
            "spec-writer",
            "a forbidden field: spec",
            edit(|n| n["spec"]["unschedulable"] = json!(true)),
            Policy,
            "spec.unschedulable",
            NotSent,
        ),
        case(
            "role-label",
            "a label outside the allowance",
            edit(|n| n["metadata"]["labels"]["node-role.kubernetes.io/master"] = json!("")),
            Policy,
            "NodeRestriction",
            NotSent,
        ),
        case(
            "bad-status",
            "a condition status the API server accepts but means nothing",
            edit(|n| conditions(n).push(json!({"type": "Example", "status": "Maybe"}))),
            Invalid,
            "must be True, False or Unknown",
            Accepts,
        ),
        case(
            "bad-quantity",
            "a quantity the API server refuses",
            edit(|n| n["status"]["capacity"]["example.com/widgets"] = json!("lots")),
            Invalid,
            "is not a quantity",
            Refuses,
        ),
        case(
            "long-label",
            "a label key longer than 63 characters",
            edit(|n| {
                n["metadata"]["labels"][format!("example.com/{}", "k".repeat(64))] = json!("v")
            }),
            Invalid,
            "invalid label key",
            Refuses,
        ),
        case(
            "long-label-value",
            "a label value longer than 63 characters",
            edit(|n| n["metadata"]["labels"]["example.com/long"] = json!("v".repeat(64))),
            Invalid,
            "invalid label value",
            Refuses,
        ),
        case(
            "bad-label-chars",
            "a label with bad characters",
            edit(|n| n["metadata"]["labels"]["example.com/x"] = json!("a b/c")),
            Invalid,
            "invalid label value",
            Refuses,
        ),
        case(
            "many-conditions",
            "20,000 condition types",
            edit(|n| {
                conditions(n).extend(
                    (0..20_000).map(|i| json!({"type": format!("Flood{i}"), "status": "True"})),
                )
            }),
            Limit,
            "over the bound of 512 fields",
            NotSent,
        ),
    ];
    let mut gpu = case(
        "other-condition",
        "another plugin's condition (allowance `status.conditions[GPU*]`)",
        edit(|n| conditions(n)[1]["status"] = json!("False")),
        Policy,
        "status.conditions[Ready] is outside this plugin's allowance",
        NotSent,
    );
    gpu.fields = Some((&["status.conditions[GPU*]"], &[]));
    cases.push(gpu);
    // Denied Ready, it adds a second Ready entry: the API server accepts
    // that patch and flips Ready, so the policy must see it.
    let mut second = case(
        "second-ready",
        "a second Ready entry from a plugin denied Ready",
        edit(|n| {
            conditions(n).push(json!({"type": "Ready", "status": "False", "reason": "Bypass"}))
        }),
        Policy,
        "status.conditions[Ready] is denied to this plugin",
        Accepts,
    );
    second.fields = Some((&["@default"], &["status.conditions[Ready]"]));
    cases.push(second);
    run_cases("policy-hostile", cases).await;
}

/// A setter whose valid output changes on every call. Nothing damps it: the
/// node changes on every pass, so the status loop writes once a period, and
/// never more (one pass, at most one patch).
#[tokio::test(flavor = "multi_thread")]
async fn a_flapping_setter_costs_one_patch_a_pass_and_no_more() {
    let name = "policy-flap";
    let mut node = base_node(name);
    // The toggled byte: the first label's value, at a fixed offset while the
    // node keeps its key order (the host keeps JSON key order).
    node["metadata"] = json!({"labels": {"example.com/flap": "a"}, "name": name});
    let stored = fresh_node(name, &node).await;
    let mut current = node.clone();
    let at = serde_json::to_string(&current)
        .unwrap()
        .find("\"example.com/flap\":\"")
        .unwrap()
        + "\"example.com/flap\":\"".len();
    let (tmp, dir) = plugin_dir(settings(|n| PluginConfig {
        order: (n == "kernel-check").then_some(5000),
        ..Default::default()
    }));
    drop_plugin(
        tmp.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_bytes(
        tmp.path(),
        "flap.wasm",
        &hostile::component(
            "flap",
            &Behaviour::Toggle {
                at: at as u32,
                a: b'a',
                b: b'b',
            },
        ),
    );
    dir.rescan();
    let mut server = stored;
    let (passes, mut patches, mut values) = (10, 0, Vec::new());
    for _ in 0..passes {
        let (out, report) = pass(
            dir.runtime(),
            &dir.current(),
            &current,
            &CallContext::default(),
            Default::default(),
        );
        assert_eq!(report.failures().count(), 0, "{:?}", report.setters);
        // The status loop's rule: patch when the status changed.
        if patch::changed(&server, &out) {
            let p = patch::two_way(&server, &out).unwrap();
            server = patch_status(name, &p).await.unwrap();
            patches += 1;
        }
        values.push(
            server["metadata"]["labels"]["example.com/flap"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        current = out;
    }
    println!(
        "flapping setter: {patches} patches in {passes} passes; label on the server: {}",
        values.join(",")
    );
    assert_eq!(patches, passes);
    assert!(values.windows(2).all(|w| w[0] != w[1]), "{values:?}");
    assert!(server["metadata"]["labels"]["kernel.example.com/version"].is_string());
}

/// A node may already hold what nodestatus's rules refuse (written by
/// another agent, or stored before a rule existed): a setter that adds
/// nothing wrong is not blamed for it.
#[test]
fn a_setter_is_not_blamed_for_what_the_node_already_holds() {
    let mut node = base_node("policy-inherited");
    conditions(&mut node).push(json!({"type": "Foreign", "status": "Maybe"}));
    conditions(&mut node).push(json!({"type": "Foreign", "status": "True"}));
    node["metadata"]["labels"]["bad label"] = json!("x");
    assert!(!validate::problems(&node).is_empty());
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    drop_plugin(
        tmp.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_bytes(
        tmp.path(),
        "adds-bad.wasm",
        &hostile::component(
            "adds-bad",
            &Behaviour::Return({
                let mut bad = node.clone();
                bad["metadata"]["labels"]["worse label"] = json!("y");
                bad.to_string()
            }),
        ),
    );
    dir.rescan();
    let (out, report) = pass(
        dir.runtime(),
        &dir.current(),
        &node,
        &CallContext::default(),
        Default::default(),
    );
    let outcome = |p: &str| {
        report
            .setters
            .iter()
            .find(|s| s.plugin == p)
            .unwrap()
            .outcome
            .clone()
    };
    assert!(
        outcome("kernel-check").is_ok(),
        "{:?}",
        outcome("kernel-check")
    );
    let e = outcome("adds-bad").unwrap_err();
    assert_eq!(e.kind, SetterErrorKind::Invalid);
    assert!(e.message.contains("worse label"), "{e}");
    assert!(!e.message.contains("bad label"), "{e}");
    assert!(out["metadata"]["labels"]["kernel.example.com/version"].is_string());
}

/// A setter says only type, status and reason: the host stamps the times of
/// each condition it wrote (heartbeat now; transition kept while the status
/// holds, now on a flip or for a new type), over any time the setter wrote.
/// The os and arch labels are the host's built-in step, diffed and
/// reported like a setter's write.
#[test]
fn the_host_stamps_condition_times_and_forces_os_and_arch_as_a_reported_step() {
    use nodestatus_engine::pipeline::OS_ARCH_LABELS;
    use nodestatus_model::node::{FieldPath, condition_time};

    let node = base_node("host-stamps");
    let mut bare = node.clone();
    conditions(&mut bare)[0] = json!({"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "ok"});
    conditions(&mut bare)[1] =
        json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "down"});
    conditions(&mut bare).push(json!({"type": "GPU", "status": "True", "reason": "Fine", "message": "m", "lastHeartbeatTime": "1999-01-01T00:00:00Z"}));
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    drop_bytes(
        tmp.path(),
        "bare.wasm",
        &hostile::component("bare", &Behaviour::Return(bare.to_string())),
    );
    dir.rescan();
    let before = condition_time(std::time::SystemTime::now());
    let (out, report) = pass(
        dir.runtime(),
        &dir.current(),
        &node,
        &CallContext::default(),
        Default::default(),
    );
    let after = condition_time(std::time::SystemTime::now());

    let condition = |t: &str| FieldPath::Condition(t.into());
    assert_eq!(
        report.setters[0].outcome.as_ref().unwrap(),
        &vec![
            condition("MemoryPressure"),
            condition("Ready"),
            condition("GPU")
        ]
    );
    let now = |v: &Value| {
        let t = v.as_str().unwrap();
        assert!(
            before.as_str() <= t && t <= after.as_str(),
            "{t} not in {before}..{after}"
        );
    };
    let c = &out["status"]["conditions"];
    for i in 0..3 {
        now(&c[i]["lastHeartbeatTime"]);
    }
    assert_eq!(
        c[0]["lastTransitionTime"], "2026-01-01T00:00:00Z",
        "status held"
    );
    now(&c[1]["lastTransitionTime"]);
    now(&c[2]["lastTransitionTime"]);
    assert!(
        validate::problems(&out).is_empty(),
        "{:?}",
        validate::problems(&out)
    );

    let os_arch = &report.builtins[0];
    assert_eq!(os_arch.plugin, OS_ARCH_LABELS);
    assert_eq!(
        os_arch.outcome.as_ref().unwrap(),
        &vec![
            FieldPath::Label("kubernetes.io/os".into()),
            FieldPath::Label("kubernetes.io/arch".into())
        ]
    );
    assert_eq!(
        out["metadata"]["labels"]["kubernetes.io/os"],
        std::env::consts::OS
    );
    assert_eq!(out["metadata"]["labels"]["example.com/pool"], "blue");
}
