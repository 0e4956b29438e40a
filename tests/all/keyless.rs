//! Keyless signatures, verified offline, against a real private Sigstore: a
//! Fulcio with an ephemeral CA and a Rekor v1 on Trillian and MariaDB
//! (built from their Go modules by `scripts/ensure-sigstore.sh`, started by
//! `scripts/sigstore-stack.sh` with a test OIDC issuer), the real cosign v3
//! signing keyless with an ID token of that issuer, Debian's docker-registry
//! 2.8 (no referrers API: the bundle is listed under the referrers tag), and
//! the real `nodestatus` binary.
//!
//! - `nodestatus plugin pull` accepts a plugin whose identity meets the
//!   config's policy (genericIssuer with an exact subject or a URL prefix,
//!   required annotations, anyOf with minimumMatches), and refuses one that
//!   does not, saying which entry no signature matched and who signed;
//! - a trusted root of another Sigstore refuses it;
//! - `cosign verify` with the offline flags of docs/publishing.md accepts
//!   the same signature with the same trusted root, and refuses another
//!   identity;
//! - on a node, an image plugin whose signature does not meet the policy is
//!   withheld while the others run, and runs once the policy names its
//!   signer (a live config change).
//!
//! These need the stack: `scripts/ensure-sigstore.sh` (about 8 minutes of
//! Go builds when cold, which is why `scripts/test.sh` runs them only with
//! `NODESTATUS_TEST_SIGSTORE=1`; see docs/publishing.md) and the Debian
//! packages `mariadb-server` and `python3-cryptography`. They are
//! `#[ignore]`d so that a plain `cargo test` does not start it: run them
//! with `cargo test -p nodestatus --test all -- --ignored keyless`. The
//! verification itself is tested by default on bundles made by the same
//! stack (crates/registry's keyless and policy tests, their fixtures and
//! the script that made them in crates/registry/tests/fixtures/keyless).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nodestatus_tests::built;
use nodestatus_tests::registry::{PASSWORD, Registry, USER};

use crate::kube::until;
use crate::registry::{LABEL, REPO, cli, engine, free_addr, get, label, pulls, warnings};

/// The directory `scripts/ensure-sigstore.sh` builds into (its versions).
const SIGSTORE: &str = "sigstore-fulcio1.8.8-rekor1.5.4-trillian1.7.2";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn cache() -> PathBuf {
    std::env::var_os("NODESTATUS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/nodestatus")
        })
}

/// Fulcio, Rekor and Trillian: `$NODESTATUS_SIGSTORE`, else where
/// `scripts/ensure-sigstore.sh` leaves them. Missing: the test fails with
/// the command that builds them.
fn sigstore_binaries() -> PathBuf {
    let dir = std::env::var_os("NODESTATUS_SIGSTORE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache().join(SIGSTORE));
    assert!(
        dir.join("fulcio").is_file() && dir.join("rekor-server").is_file(),
        "Fulcio and Rekor are missing at {} ($NODESTATUS_SIGSTORE): build them with scripts/ensure-sigstore.sh",
        dir.display()
    );
    dir
}

fn shown(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A private Sigstore under `dir`, stopped when dropped.
struct Stack {
    dir: PathBuf,
    oidc: String,
}

impl Stack {
    fn start(dir: &Path) -> Self {
        let out = Self::script(&["start", dir.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "sigstore-stack.sh start failed: {}",
            shown(&out)
        );
        let env = std::fs::read_to_string(dir.join("env")).unwrap();
        let oidc = env
            .lines()
            .find_map(|l| l.strip_prefix("OIDC_URL="))
            .unwrap()
            .to_owned();
        Self {
            dir: dir.to_owned(),
            oidc,
        }
    }

    fn script(args: &[&str]) -> Output {
        Command::new(repo_root().join("scripts/sigstore-stack.sh"))
            .args(args)
            .env("NODESTATUS_SIGSTORE", sigstore_binaries())
            .output()
            .unwrap()
    }

    fn trusted_root(&self) -> PathBuf {
        self.dir.join("trusted_root.json")
    }

    /// The issuer URL of `kind` (`email`, `github`).
    fn issuer(&self, kind: &str) -> String {
        format!("{}/{kind}", self.oidc)
    }

    /// A fresh ID token of `kind`, with `claims` over the defaults.
    fn token(&self, kind: &str, claims: &str) -> PathBuf {
        let file = self.dir.join(format!("{kind}.token"));
        let out = Self::script(&[
            "token",
            self.dir.to_str().unwrap(),
            kind,
            file.to_str().unwrap(),
            claims,
        ]);
        assert!(
            out.status.success(),
            "sigstore-stack.sh token failed: {}",
            shown(&out)
        );
        file
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = Self::script(&["stop", self.dir.to_str().unwrap()]);
    }
}

/// cosign v3 against `registry` (its CA, its credentials) and `stack`.
struct Cosign {
    binary: PathBuf,
    home: PathBuf,
    ca: PathBuf,
}

impl Cosign {
    fn new(dir: &Path, registry: &Registry) -> Self {
        let home = dir.join("cosign-home");
        std::fs::create_dir_all(home.join(".docker")).unwrap();
        std::fs::copy(
            registry.auth_file(USER, PASSWORD),
            home.join(".docker/config.json"),
        )
        .unwrap();
        Self {
            binary: crate::cosign::cosign_binary("v3"),
            home,
            ca: registry.ca(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.binary)
            .args(args)
            .env("HOME", &self.home)
            .env("DOCKER_CONFIG", self.home.join(".docker"))
            .env("SSL_CERT_FILE", &self.ca)
            .env("TUF_ROOT", self.home.join(".sigstore/root"))
            .env_remove("SIGSTORE_ROOT_FILE")
            .output()
            .unwrap()
    }

    /// `cosign sign` keyless: a Fulcio certificate for `token`, a Rekor
    /// entry, a Sigstore bundle attached as a referrer; `extra` before the
    /// reference (`-a KEY=VALUE`).
    fn sign(&self, stack: &Stack, token: &Path, reference: &str, extra: &[&str]) {
        let signing_config = stack.dir.join("signing_config.json");
        let root = stack.trusted_root();
        let mut args = vec![
            "sign",
            "--yes",
            "--signing-config",
            signing_config.to_str().unwrap(),
            "--trusted-root",
            root.to_str().unwrap(),
            "--identity-token",
            token.to_str().unwrap(),
        ];
        args.extend(extra);
        args.push(reference);
        let out = self.run(&args);
        assert!(
            out.status.success(),
            "cosign {args:?} failed: {}",
            shown(&out)
        );
    }

    /// `cosign sign` keyless with cosign v2's defaults: the signature in
    /// the `sha256-<hex>.sig` layout, its Fulcio certificate and Rekor's
    /// signed entry timestamp in the layer's annotations (no bundle). The
    /// test Fulcio has no CT log, so its certificate's SCT is not checked
    /// at signing (`--insecure-skip-verify`).
    fn sign_v2(&self, stack: &Stack, token: &Path, reference: &str) {
        let env = std::fs::read_to_string(stack.dir.join("env")).unwrap();
        let url = |key: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap()
                .to_owned()
        };
        let (fulcio, rekor) = (url("FULCIO_URL="), url("REKOR_URL="));
        let v2 = Cosign {
            binary: crate::cosign::cosign_binary("v2"),
            home: self.home.clone(),
            ca: self.ca.clone(),
        };
        let args = [
            "sign",
            "--yes",
            "--insecure-skip-verify",
            "--fulcio-url",
            &fulcio,
            "--rekor-url",
            &rekor,
            "--identity-token",
            token.to_str().unwrap(),
            reference,
        ];
        let out = v2.run(&args);
        assert!(
            out.status.success(),
            "cosign v2 {args:?} failed: {}",
            shown(&out)
        );
    }

    /// `cosign verify` offline, as docs/publishing.md writes it.
    fn verify(&self, root: &Path, identity: &str, issuer: &str, reference: &str) -> Output {
        self.run(&[
            "verify",
            "--trusted-root",
            root.to_str().unwrap(),
            "--certificate-identity",
            identity,
            "--certificate-oidc-issuer",
            issuer,
            "--insecure-ignore-sct",
            reference,
        ])
    }
}

/// A registry with two plugins pushed (`probe` as `:1.0.0` and its second
/// version as `:2.0.0`), a config of it, and a private Sigstore.
struct Setup {
    // Dropped in this order: the stack stops (its pids are in `dir`)
    // before `dir` goes.
    stack: Stack,
    registry: Registry,
    cosign: Cosign,
    auth: PathBuf,
    first: String,
    second: String,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let registry = Registry::start();
        let stack = Stack::start(&d.join("sigstore"));
        let cosign = Cosign::new(d, &registry);
        let auth = d.join("auth.json");
        std::fs::copy(registry.auth_file(USER, PASSWORD), &auth).unwrap();
        let publish = d.join("publish.yaml");
        std::fs::write(&publish, registry.config_yaml(&auth)).unwrap();
        let push = |file: &str, tag: &str| {
            let reference = format!("{}/{REPO}:{tag}", registry.host());
            cli(&[
                "plugin",
                "push",
                file,
                &reference,
                "--config",
                publish.to_str().unwrap(),
            ])
            .trim()
            .to_owned()
        };
        let first = push(built::PROBE, "1.0.0");
        let v2 = d.join("v2/probe.wasm");
        std::fs::create_dir_all(v2.parent().unwrap()).unwrap();
        std::fs::copy(built::PROBE_V2, &v2).unwrap();
        let second = push(v2.to_str().unwrap(), "2.0.0");
        Self {
            dir,
            registry,
            stack,
            cosign,
            auth,
            first,
            second,
        }
    }

    fn d(&self) -> &Path {
        self.dir.path()
    }

    /// A config whose plugin `probe` is `image`, verified with `verify`
    /// (YAML lines of the `verify:` map, indented by six).
    fn config(&self, name: &str, image: &str, verify: &str) -> PathBuf {
        let path = self.d().join(name);
        std::fs::write(
            &path,
            format!(
                "{}plugins:\n  probe:\n    image: {image}\n    verify:\n{verify}",
                self.registry.config_yaml(&self.auth)
            ),
        )
        .unwrap();
        path
    }

    /// `nodestatus plugin pull REFERENCE --config CONFIG`: the signature's
    /// JSON, or the error it was refused with.
    fn pull(&self, reference: &str, config: &Path) -> Result<serde_json::Value, String> {
        let out = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args([
                "plugin",
                "pull",
                reference,
                "--config",
                config.to_str().unwrap(),
            ])
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let pulled: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        Ok(pulled["signature"].clone())
    }

    /// The `verify:` lines of a policy of `entries` (YAML flow maps) in
    /// `allOf`, with this stack's trusted root.
    fn all_of(&self, entries: &[String]) -> String {
        let mut text = format!(
            "      trustedRoot: {}\n      allOf:\n",
            self.stack.trusted_root().display()
        );
        for e in entries {
            text += &format!("        - {e}\n");
        }
        text
    }

    /// Why `plugin pull` refuses the first plugin when the policy names
    /// its signer (alice) but trusts another Sigstore's root (a second
    /// stack, stopped after).
    fn refused_with_another_root(&self) -> String {
        let other = Stack::start(&self.d().join("other-sigstore"));
        let config = self.config(
            "other-root.yaml",
            &self.first,
            &self.all_of(&[self.email("alice@example.com")]).replace(
                &self.stack.trusted_root().display().to_string(),
                &other.trusted_root().display().to_string(),
            ),
        );
        self.pull(&self.first, &config).unwrap_err()
    }

    fn email(&self, subject: &str) -> String {
        self.email_with(subject, "{}")
    }

    /// A genericIssuer entry of the email issuer, with `annotations`.
    fn email_with(&self, subject: &str, annotations: &str) -> String {
        format!(
            "{{kind: genericIssuer, issuer: '{}', subject: {{equal: {subject}}}, annotations: {annotations}}}",
            self.stack.issuer("email")
        )
    }

    fn workflow(&self, prefix: &str) -> String {
        format!(
            "{{kind: genericIssuer, issuer: '{}', subject: {{urlPrefix: '{prefix}'}}}}",
            self.stack.issuer("github")
        )
    }
}

#[test]
#[ignore = "needs the live Sigstore stack: scripts/ensure-sigstore.sh, then --ignored"]
fn a_plugin_signed_keyless_by_cosign_is_pulled_when_its_identity_meets_the_policy() {
    let s = Setup::new();
    let alice = s.stack.token("email", "{}");
    s.cosign
        .sign(&s.stack, &alice, &s.first, &["-a", "env=prod"]);

    // The exact subject and issuer, and the annotation cosign -a wrote.
    let config = s.config(
        "alice.yaml",
        &s.first,
        &s.all_of(&[s.email_with("alice@example.com", "{env: prod}")]),
    );
    let signature = s.pull(&s.first, &config).unwrap();
    assert_eq!(signature["verified"], true, "{signature}");
    assert_eq!(signature["keyless"], true, "{signature}");
    assert_eq!(signature["policy"], "plugins.probe.verify", "{signature}");

    // Another subject: refused, saying which entry and who signed.
    let config = s.config(
        "bob.yaml",
        &s.first,
        &s.all_of(&[s.email("bob@example.com")]),
    );
    let refused = s.pull(&s.first, &config).unwrap_err();
    assert!(
        refused.contains("does not meet the signature policy")
            && refused.contains("allOf[0] (genericIssuer")
            && refused.contains("with subject bob@example.com) is matched by no signature")
            && refused.contains("a keyless signature by subject alice@example.com"),
        "{refused}"
    );
    // Another annotation value.
    let config = s.config(
        "dev.yaml",
        &s.first,
        &s.all_of(&[s.email_with("alice@example.com", "{env: dev}")]),
    );
    assert!(s.pull(&s.first, &config).is_err());

    // The trusted root of another Sigstore (a second stack).
    let refused = s.refused_with_another_root();
    assert!(
        refused.contains("refused: its transparency log entry is from a log the trusted root")
            && refused.contains("does not list"),
        "{refused}"
    );

    // The real cosign verifies the same signature offline with the same
    // trusted root, and refuses another identity.
    let root = s.stack.trusted_root();
    let out = s.cosign.verify(
        &root,
        "alice@example.com",
        &s.stack.issuer("email"),
        &s.first,
    );
    assert!(out.status.success(), "cosign verify: {}", shown(&out));
    let out = s
        .cosign
        .verify(&root, "bob@example.com", &s.stack.issuer("email"), &s.first);
    assert!(
        !out.status.success(),
        "cosign verify accepted bob: {}",
        shown(&out)
    );
}

/// cosign v2's default keyless signature (the `.sig` layout, its
/// certificate and Rekor's signed entry timestamp in annotations, a
/// hashedrekord entry) is checked against the same trusted root and policy
/// as cosign v3's bundle.
#[test]
#[ignore = "needs the live Sigstore stack: scripts/ensure-sigstore.sh, then --ignored"]
fn cosign_v2s_default_keyless_signature_in_the_sig_layout_meets_the_policy_too() {
    let s = Setup::new();
    let alice = s.stack.token("email", "{}");
    s.cosign.sign_v2(&s.stack, &alice, &s.first);

    let config = s.config(
        "alice.yaml",
        &s.first,
        &s.all_of(&[s.email("alice@example.com")]),
    );
    let signature = s.pull(&s.first, &config).unwrap();
    assert_eq!(signature["verified"], true, "{signature}");
    assert_eq!(signature["keyless"], true, "{signature}");

    let config = s.config(
        "bob.yaml",
        &s.first,
        &s.all_of(&[s.email("bob@example.com")]),
    );
    let refused = s.pull(&s.first, &config).unwrap_err();
    assert!(
        refused.contains("does not meet the signature policy")
            && refused.contains("a keyless signature by subject alice@example.com"),
        "{refused}"
    );
    // Another Sigstore's trusted root: its log is not this one.
    let refused = s.refused_with_another_root();
    assert!(
        refused.contains("refused: its transparency log entry is from a log the trusted root"),
        "{refused}"
    );
}

#[test]
#[ignore = "needs the live Sigstore stack: scripts/ensure-sigstore.sh, then --ignored"]
fn a_github_workflow_identity_meets_a_url_prefix_with_the_trailing_slash_rule_and_any_of_counts() {
    let s = Setup::new();
    // Fulcio's github-workflow issuer type: the token's claims become the
    // certificate's subject and GitHub extensions.
    let workflow = s.stack.token("github", "{}");
    s.cosign.sign(&s.stack, &workflow, &s.second, &[]);
    for (prefix, accepted) in [
        ("https://github.com/vendor", true),
        ("https://github.com/vendor/gpu-setter", true),
        ("https://github.com/vend", false),
        ("https://github.com/vendor/gpu", false),
    ] {
        let config = s.config("prefix.yaml", &s.second, &s.all_of(&[s.workflow(prefix)]));
        assert_eq!(s.pull(&s.second, &config).is_ok(), accepted, "{prefix}");
    }
    // githubAction needs GitHub's own issuer: this Fulcio wrote the test
    // issuer, so the repository extension alone does not make it one.
    let config = s.config(
        "action.yaml",
        &s.second,
        &s.all_of(&["{kind: githubAction, owner: vendor, repo: gpu-setter}".into()]),
    );
    let refused = s.pull(&s.second, &config).unwrap_err();
    assert!(
        refused.contains("githubAction vendor/gpu-setter) is matched by no signature")
            && refused.contains("GitHub repository vendor/gpu-setter"),
        "{refused}"
    );

    // anyOf: two of alice and the workflow; the second has only the
    // workflow's signature until alice signs it too.
    let any = format!(
        "      trustedRoot: {}\n      anyOf:\n        minimumMatches: 2\n        signatures:\n          - {}\n          - {}\n",
        s.stack.trusted_root().display(),
        s.email("alice@example.com"),
        s.workflow("https://github.com/vendor"),
    );
    let config = s.config("any.yaml", &s.second, &any);
    let refused = s.pull(&s.second, &config).unwrap_err();
    assert!(
        refused.contains("anyOf needs 2 of") && refused.contains("1 are"),
        "{refused}"
    );
    let alice = s.stack.token("email", "{}");
    s.cosign.sign(&s.stack, &alice, &s.second, &[]);
    let signature = s.pull(&s.second, &config).unwrap();
    assert_eq!(signature["verified"], true, "{signature}");
}

/// The node's config: the registry, a plugin directory with `ready`, the
/// image plugin `probe` at `image`, checked every second, with `verify`.
fn write_node_config(s: &Setup, image: &str, verify: &str) -> PathBuf {
    let d = s.d();
    let plugins = d.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(built::READY, plugins.join("ready.wasm")).unwrap();
    let path = d.join("node.yaml");
    let text = format!(
        "pluginDir: {}\ncacheDir: {}\n{}plugins:\n  probe:\n    image: {image}\n    pullInterval: 1s\n    pullPolicy: Always\n    verify:\n{verify}",
        plugins.display(),
        d.join("cache").display(),
        s.registry.config_yaml(&s.auth),
    );
    let tmp = d.join(".node.yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the live Sigstore stack: scripts/ensure-sigstore.sh, then --ignored"]
async fn on_a_node_a_plugin_whose_keyless_signer_the_policy_does_not_name_is_withheld_while_the_others_run()
 {
    let s = tokio::task::spawn_blocking(Setup::new).await.unwrap();
    let alice = s.stack.token("email", "{}");
    s.cosign.sign(&s.stack, &alice, &s.first, &[]);
    let config = write_node_config(&s, &s.first, &s.all_of(&[s.email("bob@example.com")]));
    let node = "keyless-node";
    let addr: SocketAddr = free_addr();
    let mut engine = engine(s.d(), node, &config, addr);
    let log = s.d().join(format!("{node}.log"));
    // Empty until the engine listens.
    let readyz = || async {
        match std::net::TcpStream::connect(addr) {
            Ok(_) => get(addr, "/readyz").await.1,
            Err(_) => String::new(),
        }
    };
    assert!(
        until(60, || async {
            readyz()
                .await
                .contains("does not meet the signature policy")
        })
        .await,
        "/readyz never said the policy refused probe: {:?}\n{}",
        readyz().await,
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let body = readyz().await;
    assert!(
        body.contains("plugin probe:") && body.contains("bob@example.com"),
        "{body}"
    );
    // Counted as a bad signature, and a Warning event says why.
    assert!(pulls(addr, "bad-signature").await >= 1.0);
    assert!(
        until(10, || async {
            warnings(node)
                .await
                .iter()
                .any(|m| m.contains("does not meet the signature policy"))
        })
        .await,
        "no Warning event: {:?}",
        warnings(node).await
    );
    // The other plugins run: the node is Ready, and no probe label.
    assert!(
        until(30, || async {
            crate::kube::server_node(node).await.is_some_and(|n| {
                n["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
        })
        .await,
        "the node never turned Ready: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(label(node).await, None, "probe ran: {LABEL}");

    // The policy names alice (a live change): the plugin reaches the node.
    write_node_config(&s, &s.first, &s.all_of(&[s.email("alice@example.com")]));
    assert!(
        until(60, || async { label(node).await.as_deref() == Some("1") }).await,
        "the keyless-signed plugin never labelled the node: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    engine.kill().unwrap();
    engine.wait().unwrap();
}
