//! Registry credentials as operators have them, against a real registry
//! with token auth: Debian's `docker-registry` 2.8 configured with `auth:
//! token` behind distribution's own token server (v2.8.3, built from its Go
//! module by `scripts/ensure-registries.sh`; htpasswd users, each granted
//! the repositories under `<user>/`), and the real `nodestatus` binary:
//!
//! - Basic credentials of a docker config go to the token server, for a
//!   pull token and a push token (`plugin push`, `pull`, `sign`);
//! - wrong or missing credentials, and a token that does not grant the
//!   repository, are refused with errors that say which;
//! - an `identitytoken` (an OAuth2 refresh token from the token server) is
//!   exchanged by `POST grant_type=refresh_token`;
//! - `credHelpers` and `credsStore` run `docker-credential-<name> get` (a
//!   script on `PATH` here: the protocol is what is real), the former
//!   first; a helper missing, failing or hanging is an error under a
//!   deadline.
//!
//! A token server that is not built fails the test with the command that
//! builds it; `scripts/test.sh` builds it and names it in
//! `NODESTATUS_TOKEN_SERVER`. Needs `scripts/ensure-packages.sh
//! docker-registry apache2-utils openssl curl`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use nodestatus_tests::built;
use nodestatus_tests::registry::{
    OTHER_PASSWORD, OTHER_USER, Options, PASSWORD, Registry, TOKEN_SERVICE, USER, docker_auth,
    key_pair,
};

/// A registry with token auth, and a directory for configs and helpers.
struct Setup {
    dir: tempfile::TempDir,
    registry: Registry,
}

impl Setup {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            registry: Registry::start_with(Options {
                token: true,
                ..Default::default()
            }),
        }
    }

    fn d(&self) -> &Path {
        self.dir.path()
    }

    /// `HOST/path`.
    fn reference(&self, path: &str) -> String {
        format!("{}/{path}", self.registry.host())
    }

    /// A nodestatus config whose `registries:` names the registry's CA and
    /// `auth_json` (a docker config) as its auth file; `None`: no auth.
    fn config(&self, name: &str, auth_json: Option<&str>) -> PathBuf {
        let config = self.d().join(format!("{name}.yaml"));
        let mut yaml = format!(
            "registries:\n  {}:\n    ca: {}\n",
            self.registry.host(),
            self.registry.ca().display()
        );
        if let Some(json) = auth_json {
            let auth = self.d().join(format!("{name}.json"));
            std::fs::write(&auth, json).unwrap();
            yaml += &format!("    auth: {}\n", auth.display());
        }
        std::fs::write(&config, yaml).unwrap();
        config
    }

    /// A docker config with `user:password` as `auth` for the registry.
    fn basic(&self, user: &str, password: &str) -> String {
        let auth = docker_auth(user, password);
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#,
            self.registry.host()
        )
    }

    /// `nodestatus ARGS --config CONFIG`, with the helpers of
    /// [`Setup::helpers`] first on `PATH`.
    fn run(&self, config: &Path, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.d().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args(args)
            .arg("--config")
            .arg(config)
            .env("NO_COLOR", "1")
            .env("PATH", path)
            .output()
            .unwrap()
    }

    /// [`Setup::run`], which must succeed: its stdout.
    fn ok(&self, config: &Path, args: &[&str]) -> String {
        let out = self.run(config, args);
        assert!(
            out.status.success(),
            "nodestatus {args:?} failed: {}\ntoken server: {}",
            String::from_utf8_lossy(&out.stderr),
            self.registry.token_server_log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// [`Setup::run`], which must fail: its stderr, checked to show no
    /// password.
    fn fails(&self, config: &Path, args: &[&str]) -> String {
        let out = self.run(config, args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !out.status.success(),
            "nodestatus {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        for secret in [PASSWORD, OTHER_PASSWORD] {
            assert!(
                !stderr.contains(secret),
                "the error shows a password: {stderr}"
            );
        }
        stderr
    }

    /// `plugin push PROBE HOST/<path>`: the pinned reference.
    fn push(&self, config: &Path, path: &str) -> String {
        let reference = self.reference(path);
        self.ok(config, &["plugin", "push", built::PROBE, &reference])
            .trim()
            .to_owned()
    }

    /// `plugin pull HOST/<path>`: its JSON.
    fn pull(&self, config: &Path, path: &str) -> serde_json::Value {
        let out = self.ok(config, &["plugin", "pull", &self.reference(path)]);
        serde_json::from_str(&out).unwrap()
    }

    /// An OAuth2 refresh token for `user`, as the token server hands them
    /// out: `GET <realm>?offline_token=true` with Basic credentials (with
    /// curl, the registry's CA trusted).
    fn refresh_token(&self, user: &str, password: &str) -> String {
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--cacert"])
            .arg(self.registry.ca())
            .args(["-u", &format!("{user}:{password}")])
            .arg(format!(
                "{}?service={TOKEN_SERVICE}&offline_token=true&client_id=nodestatus-test",
                self.registry.realm()
            ))
            .output()
            .expect("curl is missing: scripts/ensure-packages.sh curl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        answer["refresh_token"].as_str().unwrap().to_owned()
    }

    /// Writes `docker-credential-<name>` into the directory put first on
    /// `PATH`: a shell script that logs `$1` and its stdin, then runs
    /// `body`.
    fn helper(&self, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        let bin = self.d().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let path = bin.join(format!("docker-credential-{name}"));
        let log = self.d().join("helpers.log");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nserver=$(cat)\nprintf '%s %s %s\\n' {name} \"$1\" \"$server\" >>{}\n{body}\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// What the helpers were asked, one `NAME ARG STDIN` a line.
    fn helper_log(&self) -> String {
        std::fs::read_to_string(self.d().join("helpers.log")).unwrap_or_default()
    }
}

/// `plugin push`, `pull` and `sign` with Basic credentials go through the
/// token server: a token for `pull`, and one for `pull,push`.
#[test]
fn basic_credentials_go_through_the_token_server_for_push_pull_and_sign() {
    let s = Setup::new();
    let config = s.config("vendor", Some(&s.basic(USER, PASSWORD)));
    let pinned = s.push(&config, "vendor/probe:1.0.0");
    let pulled = s.pull(&config, "vendor/probe:1.0.0");
    assert_eq!(pulled["pinned"], pinned.as_str(), "{pulled}");

    // The signature tag, written and read through tokens too.
    let (key, public) = key_pair(s.d(), "vendor");
    s.ok(
        &config,
        &["plugin", "sign", &pinned, "--key", key.to_str().unwrap()],
    );
    let out = s.ok(
        &config,
        &["plugin", "pull", &pinned, "--key", public.to_str().unwrap()],
    );
    let pulled: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pulled["signature"]["verified"], true, "{pulled}");

    // The token server was asked for both scopes, and granted them.
    let log = s.registry.token_server_log();
    for scope in ["pull", "pull%2Cpush"] {
        assert!(
            log.contains(&format!("scope=repository%3Avendor%2Fprobe%3A{scope}&")),
            "{log}"
        );
    }
    assert!(
        log.contains(
            "grantedAccess=\"[{{repository  vendor/probe} pull} {{repository  vendor/probe} push}]\""
        ),
        "{log}"
    );
}

/// A wrong password, or none, is refused by the token server, and the
/// error says so and where the credentials came from.
#[test]
fn wrong_or_missing_credentials_are_refused_by_the_token_server() {
    let s = Setup::new();
    let config = s.config("vendor", Some(&s.basic(USER, PASSWORD)));
    s.push(&config, "vendor/probe:1.0.0");
    let host = s.registry.host();

    let wrong = s.config("wrong", Some(&s.basic(USER, "not-the-password")));
    for args in [
        vec!["plugin", "pull", &*s.reference("vendor/probe:1.0.0")],
        vec![
            "plugin",
            "push",
            built::PROBE,
            &*s.reference("vendor/probe:2.0.0"),
        ],
    ] {
        let err = s.fails(&wrong, &args);
        assert!(
            err.contains(&format!(
                "the token server of {host} refused access with the credentials of vendor in"
            )) && err.contains("wrong.json")
                && err.contains("authentication failure"),
            "{args:?}: {err}"
        );
    }

    let none = s.config("none", None);
    let err = s.fails(
        &none,
        &["plugin", "pull", &s.reference("vendor/probe:1.0.0")],
    );
    assert!(
        err.contains(&format!(
            "refused access with no credentials (registries.{host}.auth is not set)"
        )),
        "{err}"
    );
}

/// The token server grants a user only its own repositories: a pull or a
/// push elsewhere gets a token without that access, which the registry
/// refuses, and the error says the account has no access to that
/// repository (not that the password is wrong).
#[test]
fn a_token_without_access_to_the_repository_is_refused() {
    let s = Setup::new();
    let other = s.config("other", Some(&s.basic(OTHER_USER, OTHER_PASSWORD)));
    s.push(&other, "other/probe:1.0.0");
    assert_eq!(
        s.pull(&other, "other/probe:1.0.0")["reference"],
        s.reference("other/probe:1.0.0")
    );

    let vendor = s.config("vendor", Some(&s.basic(USER, PASSWORD)));
    let err = s.fails(
        &vendor,
        &["plugin", "pull", &s.reference("other/probe:1.0.0")],
    );
    assert!(
        err.contains("does not grant pull on the repository other/probe")
            && err.contains("insufficient_scope for repository:other/probe:pull")
            && err.contains("the credentials of vendor in"),
        "{err}"
    );
    let err = s.fails(
        &vendor,
        &[
            "plugin",
            "push",
            built::PROBE,
            &s.reference("other/probe:2.0.0"),
        ],
    );
    assert!(
        err.contains("does not grant push on the repository other/probe"),
        "{err}"
    );
}

/// docker's `identitytoken`: a refresh token of the token server,
/// exchanged by `POST grant_type=refresh_token` for a pull token and a push
/// token; one the server does not know is refused with a message that says
/// to log in again; a registry without a token server cannot take one.
#[test]
fn an_identity_token_is_exchanged_at_the_token_server() {
    let s = Setup::new();
    let host = s.registry.host();
    let token = s.refresh_token(USER, PASSWORD);
    // As docker writes it: the user name in `auth`, no password.
    let user = docker_auth(USER, "");
    let config = s.config(
        "identity",
        Some(&format!(
            r#"{{"auths":{{"{host}":{{"auth":"{user}","identitytoken":"{token}"}}}}}}"#
        )),
    );
    let pinned = s.push(&config, "vendor/probe:1.0.0");
    assert_eq!(
        s.pull(&config, "vendor/probe:1.0.0")["pinned"],
        pinned.as_str()
    );
    let log = s.registry.token_server_log();
    assert!(
        log.contains("post token complete") && log.contains("http.request.method=POST"),
        "{log}"
    );
    // Its user's repositories only.
    let other = s.config("other", Some(&s.basic(OTHER_USER, OTHER_PASSWORD)));
    s.push(&other, "other/probe:1.0.0");
    let err = s.fails(
        &config,
        &["plugin", "pull", &s.reference("other/probe:1.0.0")],
    );
    assert!(
        err.contains("does not grant pull on the repository other/probe")
            && err.contains("the identity token in"),
        "{err}"
    );

    let unknown = s.config(
        "unknown",
        Some(&format!(
            r#"{{"auths":{{"{host}":{{"identitytoken":"not-a-refresh-token"}}}}}}"#
        )),
    );
    let err = s.fails(
        &unknown,
        &["plugin", "pull", &s.reference("vendor/probe:1.0.0")],
    );
    assert!(
        err.contains(&format!(
            "the token server {} of {host} refused the identity token",
            s.registry.realm()
        )) && err.contains("invalid refresh token")
            && err.contains("log in again")
            && !err.contains("not-a-refresh-token"),
        "{err}"
    );

    // htpasswd at the registry itself: no token server to exchange it at.
    let plain = Registry::start();
    let plain_config = s.d().join("plain.yaml");
    let auth = s.d().join("plain.json");
    std::fs::write(
        &auth,
        format!(
            r#"{{"auths":{{"{}":{{"identitytoken":"{token}"}}}}}}"#,
            plain.host()
        ),
    )
    .unwrap();
    std::fs::write(&plain_config, plain.config_yaml(&auth)).unwrap();
    let err = s.fails(
        &plain_config,
        &[
            "plugin",
            "pull",
            &format!("{}/vendor/probe:1.0.0", plain.host()),
        ],
    );
    assert!(
        err.contains("asks for no bearer token") && err.contains("cannot be used there"),
        "{err}"
    );
}

/// `credHelpers` and `credsStore`, run as the docker CLI runs them.
#[test]
fn credential_helpers_are_run_as_the_docker_cli_runs_them() {
    let s = Setup::new();
    let host = s.registry.host();
    let vendor = s.config("vendor", Some(&s.basic(USER, PASSWORD)));
    s.push(&vendor, "vendor/probe:1.0.0");
    let pull = ["plugin", "pull", &*s.reference("vendor/probe:1.0.0")];

    s.helper(
        "nstest",
        &format!(
            "[ \"$1\" = get ] && [ \"$server\" = '{host}' ] || exit 9\nprintf '{{\"ServerURL\":\"%s\",\"Username\":\"{USER}\",\"Secret\":\"{PASSWORD}\"}}\\n' \"$server\""
        ),
    );
    let token = s.refresh_token(USER, PASSWORD);
    s.helper(
        "nstoken",
        &format!("printf '{{\"ServerURL\":\"%s\",\"Username\":\"<token>\",\"Secret\":\"{token}\"}}' \"$server\""),
    );
    s.helper("nsfail", "echo 'the keychain is locked'; exit 3");
    s.helper("nshang", "exec sleep 120");
    s.helper(
        "nsnone",
        "echo 'credentials not found in native keychain'; exit 1",
    );
    let helpers = |name: &str, json: &str| s.config(name, Some(json));

    // credHelpers for this registry: asked `get` with the registry on
    // stdin; its user name and password go to the token server.
    let config = helpers(
        "helper",
        &format!(r#"{{"credHelpers":{{"{host}":"nstest"}}}}"#),
    );
    s.ok(&config, &pull);
    assert!(
        s.helper_log().contains(&format!("nstest get {host}\n")),
        "{}",
        s.helper_log()
    );

    // credHelpers before credsStore; credsStore before `auths` (here a
    // wrong password), as the docker CLI picks them.
    let config = helpers(
        "first",
        &format!(r#"{{"credsStore":"nsfail","credHelpers":{{"https://{host}/v1/":"nstest"}}}}"#),
    );
    s.ok(&config, &pull);
    let wrong = docker_auth(USER, "wrong");
    let config = helpers(
        "store",
        &format!(r#"{{"credsStore":"nstest","auths":{{"{host}":{{"auth":"{wrong}"}}}}}}"#),
    );
    s.ok(&config, &pull);
    assert!(!s.helper_log().contains("nsfail"), "{}", s.helper_log());

    // `<token>` as the user name: the secret is an identity token.
    let config = helpers(
        "token",
        &format!(r#"{{"credHelpers":{{"{host}":"nstoken"}}}}"#),
    );
    s.ok(&config, &pull);
    assert!(
        s.registry
            .token_server_log()
            .contains("post token complete")
    );

    // Missing, failing, answering "not found" (then anonymous, as docker).
    let config = helpers(
        "missing",
        &format!(r#"{{"credHelpers":{{"{host}":"nsmissing"}}}}"#),
    );
    let err = s.fails(&config, &pull);
    assert!(
        err.contains("credHelpers in")
            && err.contains("docker-credential-nsmissing is not on PATH"),
        "{err}"
    );
    let config = helpers("fail", r#"{"credsStore":"nsfail"}"#);
    let err = s.fails(&config, &pull);
    assert!(
        err.contains("'docker-credential-nsfail get' failed for")
            && err.contains("exit status: 3")
            && err.contains("the keychain is locked"),
        "{err}"
    );
    let config = helpers(
        "none",
        &format!(r#"{{"credHelpers":{{"{host}":"nsnone"}}}}"#),
    );
    let err = s.fails(&config, &pull);
    assert!(
        err.contains("refused access with no credentials (docker-credential-nsnone has none"),
        "{err}"
    );

    // A helper that never answers: killed at its deadline (10 s), well
    // before the operation's (60 s).
    let config = helpers(
        "hang",
        &format!(r#"{{"credHelpers":{{"{host}":"nshang"}}}}"#),
    );
    let start = Instant::now();
    let err = s.fails(&config, &pull);
    let took = start.elapsed();
    assert!(
        err.contains("'docker-credential-nshang get' did not answer for")
            && err.contains("within 10s; it was killed"),
        "{err}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
}
