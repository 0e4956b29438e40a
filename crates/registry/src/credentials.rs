//! Credentials as the docker CLI gets them: credential helpers, and identity
//! tokens exchanged at the registry's token server.
//!
//! [`crate::settings`] says where a registry's credentials come from
//! ([`Auth`](crate::settings::Auth)); this module turns that into what a request carries.
//!
//! # Credential helpers
//!
//! `credHelpers.<registry>` (else `credsStore`) in the `auth` file names a
//! helper, run as the docker CLI runs it: `docker-credential-<name> get`,
//! found on `PATH`, with the registry (`HOST[:PORT]`) on its stdin; it
//! answers `{"ServerURL": ..., "Username": ..., "Secret": ...}` on stdout.
//! A `Username` of `<token>` makes `Secret` an identity token; an answer of
//! `credentials not found in native keychain` (with a failed exit) means no
//! credentials, and the request goes anonymous, as docker's does. A helper
//! that is missing, fails, answers something else, or has not answered
//! within [`HELPER_TIMEOUT`] (or half the operation's deadline, if less) is
//! an [`Error`] naming it; one past its deadline is killed with its process
//! group.
//!
//! # Identity tokens
//!
//! An `identitytoken` (docker's name for an OAuth2 refresh token) is
//! exchanged at the realm of the registry's `WWW-Authenticate: Bearer`
//! challenge ([`Challenge`]), as distribution's OAuth2 token spec says: a
//! `POST` of `grant_type=refresh_token`, `refresh_token`, `service`,
//! `scope` and `client_id=nodestatus`, answered with an `access_token`
//! (or `token`) for that scope, which the registry's requests then carry.

use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::settings::{Credentials, Secret};

/// The longest a credential helper may take, unless the operation's
/// deadline is shorter (then half of it).
pub const HELPER_TIMEOUT: Duration = Duration::from_secs(10);

/// The `client_id` of an identity token's exchange.
pub const CLIENT_ID: &str = "nodestatus";

/// The largest answer read from a helper or a token server.
const MAX_ANSWER_BYTES: u64 = 64 << 10;

/// What docker-credential-helpers answers when it has no credentials.
const NOT_FOUND: &str = "credentials not found in native keychain";

/// Why credentials could not be had. None shows a secret: a helper's answer
/// is quoted only when it failed, a token server's error only in part.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The helper's program is not on `PATH`.
    #[error(
        "{field} in {path} names the credential helper `{helper}`, but {program} is not on PATH: install it, or remove `{helper}` from {field}"
    )]
    HelperMissing {
        /// The helper's name.
        helper: String,
        /// `docker-credential-<helper>`.
        program: String,
        /// `credHelpers` or `credsStore`.
        field: &'static str,
        /// The auth file.
        path: String,
    },
    /// The helper could not be started (other than missing).
    #[error("cannot run the credential helper {program}")]
    HelperSpawn {
        /// `docker-credential-<helper>`.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The helper exited with an error.
    #[error("the credential helper '{program} get' failed for {registry} ({status}): {output}")]
    HelperFailed {
        /// `docker-credential-<helper>`.
        program: String,
        /// The registry asked for.
        registry: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it printed (at most 300 characters of it).
        output: String,
    },
    /// The helper did not answer in time; it was killed.
    #[error(
        "the credential helper '{program} get' did not answer for {registry} within {after:?}; it was killed"
    )]
    HelperTimeout {
        /// `docker-credential-<helper>`.
        program: String,
        /// The registry asked for.
        registry: String,
        /// Its deadline.
        after: Duration,
    },
    /// The helper answered something else than its JSON (not quoted: it
    /// may hold the secret).
    #[error(
        "the credential helper '{program} get' answered for {registry} with something else than {{\"Username\", \"Secret\"}} ({reason})"
    )]
    HelperAnswer {
        /// `docker-credential-<helper>`.
        program: String,
        /// The registry asked for.
        registry: String,
        /// What is wrong.
        reason: String,
    },
    /// An identity token needs a token server, and the registry named none.
    #[error(
        "{registry} asks for no bearer token (its /v2/ answered {status} without a `WWW-Authenticate: Bearer` challenge), so the identity token from {origin} cannot be used there"
    )]
    NoTokenServer {
        /// The registry.
        registry: String,
        /// What its `/v2/` answered.
        status: u16,
        /// Where the identity token came from.
        origin: String,
    },
    /// The token server could not be reached.
    #[error("cannot reach the token server {realm} of {registry}")]
    TokenServerUnreachable {
        /// The token server.
        realm: String,
        /// The registry.
        registry: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The token server refused the identity token.
    #[error(
        "the token server {realm} of {registry} refused the identity token from {origin} ({status}: {detail}); it may have expired or been revoked: log in again"
    )]
    IdentityTokenRefused {
        /// The token server.
        realm: String,
        /// The registry.
        registry: String,
        /// Where the token came from.
        origin: String,
        /// Its status.
        status: u16,
        /// The first error's message and detail, from its JSON (at most
        /// 300 characters).
        detail: String,
    },
    /// The token server answered 200 without an access token.
    #[error("the token server {realm} of {registry} answered without an access_token")]
    TokenAnswer {
        /// The token server.
        realm: String,
        /// The registry.
        registry: String,
    },
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A short, bounded name of the failure, for a metric label: a helper
    /// that cannot answer is `settings`, a token refused `unauthorized`, a
    /// token server down `unreachable`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::HelperMissing { .. }
            | Error::HelperSpawn { .. }
            | Error::HelperFailed { .. }
            | Error::HelperTimeout { .. }
            | Error::HelperAnswer { .. }
            | Error::NoTokenServer { .. } => "settings",
            Error::TokenServerUnreachable { .. } => "unreachable",
            Error::IdentityTokenRefused { .. } | Error::TokenAnswer { .. } => "unauthorized",
        }
    }
}

/// What a request carries: nothing, Basic credentials, or an identity
/// token to exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No credentials.
    Anonymous,
    /// A user name and password.
    Basic(Credentials),
    /// An OAuth2 refresh token.
    IdentityToken(Secret),
}

#[derive(Deserialize)]
struct HelperAnswer {
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

/// Runs `docker-credential-<helper> get` for `registry`, under `deadline`.
/// `field` and `path` say where the helper is named, for the errors.
pub async fn helper_get(
    helper: &str,
    field: &'static str,
    path: &std::path::Path,
    registry: &str,
    deadline: Duration,
) -> Result<Found> {
    let program = format!("docker-credential-{helper}");
    let mut command = tokio::process::Command::new(&program);
    command
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        // Its own process group, so that a helper's children go with it.
        .process_group(0);
    let mut child = command.spawn().map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => Error::HelperMissing {
            helper: helper.to_owned(),
            program: program.clone(),
            field,
            path: path.display().to_string(),
        },
        _ => Error::HelperSpawn {
            program: program.clone(),
            source,
        },
    })?;
    let pid = child.id();
    let talk = async {
        let mut stdin = child.stdin.take().expect("stdin is piped");
        // A helper that does not read its input is not waited for here.
        let _ = stdin.write_all(registry.as_bytes()).await;
        drop(stdin);
        let mut out = Vec::new();
        let stdout = child.stdout.take().expect("stdout is piped");
        stdout
            .take(MAX_ANSWER_BYTES)
            .read_to_end(&mut out)
            .await
            .map_err(|source| Error::HelperSpawn {
                program: program.clone(),
                source,
            })?;
        let status = child.wait().await.map_err(|source| Error::HelperSpawn {
            program: program.clone(),
            source,
        })?;
        Ok::<_, Error>((status, out))
    };
    let (status, out) = match tokio::time::timeout(deadline, talk).await {
        Ok(done) => done?,
        Err(_) => {
            if let Some(pid) = pid.and_then(|p| libc::pid_t::try_from(p).ok()) {
                // SAFETY: a signal to the process group this helper leads.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            return Err(Error::HelperTimeout {
                program,
                registry: registry.to_owned(),
                after: deadline,
            });
        }
    };
    parse_helper_answer(&program, registry, status, &out)
}

/// A helper's exit status and stdout, read as docker-credential-helpers'
/// client reads them.
fn parse_helper_answer(
    program: &str,
    registry: &str,
    status: std::process::ExitStatus,
    out: &[u8],
) -> Result<Found> {
    let text = String::from_utf8_lossy(out);
    if !status.success() {
        if text.trim() == NOT_FOUND {
            return Ok(Found::Anonymous);
        }
        return Err(Error::HelperFailed {
            program: program.to_owned(),
            registry: registry.to_owned(),
            status,
            output: text.trim().chars().take(300).collect(),
        });
    }
    let bad = |reason: String| Error::HelperAnswer {
        program: program.to_owned(),
        registry: registry.to_owned(),
        reason,
    };
    let answer: HelperAnswer = serde_json::from_slice(out).map_err(|e| {
        bad(format!(
            "not JSON at line {}, column {}",
            e.line(),
            e.column()
        ))
    })?;
    match (answer.username.as_str(), answer.secret) {
        (_, secret) if secret.is_empty() => Err(bad("an empty Secret".to_owned())),
        ("<token>", secret) => Ok(Found::IdentityToken(Secret::new(secret))),
        ("", _) => Err(bad("an empty Username".to_owned())),
        (username, secret) => Ok(Found::Basic(Credentials {
            username: username.to_owned(),
            password: Secret::new(secret),
        })),
    }
}

/// A `WWW-Authenticate: Bearer` challenge: where the token server is, the
/// service, and, after a refused token, the scope and the error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// The token server's URL.
    pub realm: String,
    /// The `service` to ask a token for.
    pub service: Option<String>,
    /// The scope the request needed.
    pub scope: Option<String>,
    /// `insufficient_scope`, `invalid_token`, ...
    pub error: Option<String>,
}

impl Challenge {
    /// Reads a `Bearer` challenge (`None` for another scheme, or one
    /// without a realm): comma-separated `key=value` or `key="value"`
    /// parameters, `\` escaping in quoted values.
    pub fn parse(header: &str) -> Option<Self> {
        let header = header.trim();
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let mut challenge = Challenge::default();
        let mut chars = rest.chars().peekable();
        loop {
            while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
                chars.next();
            }
            let key: String = chars
                .by_ref()
                .take_while(|c| *c != '=')
                .collect::<String>()
                .trim()
                .to_ascii_lowercase();
            if key.is_empty() {
                break;
            }
            let mut value = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next()),
                        '"' => break,
                        c => value.push(c),
                    }
                }
            } else {
                value = chars.by_ref().take_while(|c| *c != ',').collect();
                value = value.trim().to_owned();
            }
            match key.as_str() {
                "realm" => challenge.realm = value,
                "service" => challenge.service = Some(value),
                "scope" => challenge.scope = Some(value),
                "error" => challenge.error = Some(value),
                _ => {}
            }
        }
        (!challenge.realm.is_empty()).then_some(challenge)
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    token: Option<String>,
}

/// Exchanges `refresh_token` at `challenge`'s realm for an access token of
/// `scope` (`repository:<name>:pull` or `pull,push`). `origin` says where
/// the token came from, for the errors.
pub(crate) async fn exchange(
    http: &reqwest::Client,
    registry: &str,
    challenge: &Challenge,
    refresh_token: &Secret,
    scope: &str,
    origin: &str,
) -> Result<Secret> {
    let mut form = reqwest::Url::parse("http://form.invalid/").expect("a valid URL");
    {
        let mut pairs = form.query_pairs_mut();
        pairs.append_pair("grant_type", "refresh_token");
        pairs.append_pair("refresh_token", refresh_token.expose());
        if let Some(service) = &challenge.service {
            pairs.append_pair("service", service);
        }
        pairs.append_pair("scope", scope);
        pairs.append_pair("client_id", CLIENT_ID);
    }
    let unreachable = |source| Error::TokenServerUnreachable {
        realm: challenge.realm.clone(),
        registry: registry.to_owned(),
        source,
    };
    let response = http
        .post(&challenge.realm)
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form.query().unwrap_or_default().to_owned())
        .send()
        .await
        .map_err(unreachable)?;
    let status = response.status();
    let mut body = Vec::new();
    let mut response = response;
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > MAX_ANSWER_BYTES {
            break;
        }
    }
    if !status.is_success() {
        return Err(Error::IdentityTokenRefused {
            realm: challenge.realm.clone(),
            registry: registry.to_owned(),
            origin: origin.to_owned(),
            status: status.as_u16(),
            detail: error_detail(&body),
        });
    }
    token_answer(&body, challenge, registry)
}

/// The access token of a token server's 200 answer (`access_token`, else
/// `token`), for `challenge` of `registry`.
pub(crate) fn token_answer(body: &[u8], challenge: &Challenge, registry: &str) -> Result<Secret> {
    serde_json::from_slice::<TokenAnswer>(body)
        .ok()
        .and_then(|answer| answer.access_token.or(answer.token))
        .filter(|t| !t.is_empty())
        .map(Secret::new)
        .ok_or_else(|| Error::TokenAnswer {
            realm: challenge.realm.clone(),
            registry: registry.to_owned(),
        })
}

/// The first error of a distribution error body, `message: detail`, or
/// the OAuth2 `error` and `error_description`; at most 300 characters.
pub(crate) fn error_detail(body: &[u8]) -> String {
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    let detail = if let Some(first) = value["errors"].get(0) {
        [text(&first["message"]), text(&first["detail"])]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ")
    } else {
        [text(&value["error"]), text(&value["error_description"])]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ")
    };
    match detail.is_empty() {
        true => "no error message".to_owned(),
        false => detail.chars().take(300).collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::ExitStatus;

    use super::*;

    #[test]
    fn a_bearer_challenge_is_read_with_quoted_and_bare_values() {
        let c = Challenge::parse(
            r#"Bearer realm="https://auth.example.com/token/",service="registry.example.com",scope="repository:other/x:pull",error="insufficient_scope""#,
        )
        .unwrap();
        assert_eq!(c.realm, "https://auth.example.com/token/");
        assert_eq!(c.service.as_deref(), Some("registry.example.com"));
        assert_eq!(c.scope.as_deref(), Some("repository:other/x:pull"));
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        let c = Challenge::parse(r#"bearer realm=https://a/t, service="s\"q""#).unwrap();
        assert_eq!(
            (c.realm.as_str(), c.service.as_deref()),
            ("https://a/t", Some("s\"q"))
        );
        assert_eq!(Challenge::parse(r#"Basic realm="registry""#), None);
        assert_eq!(Challenge::parse(r#"Bearer service="s""#), None);
    }

    #[test]
    fn a_helper_answer_is_read_as_docker_reads_it() {
        let ok = ExitStatus::from_raw(0);
        let failed = ExitStatus::from_raw(1 << 8);
        let read = |status, out: &str| {
            parse_helper_answer("docker-credential-t", "r:5000", status, out.as_bytes())
        };
        assert_eq!(
            read(ok, r#"{"ServerURL":"r:5000","Username":"u","Secret":"p"}"#).unwrap(),
            Found::Basic(Credentials {
                username: "u".into(),
                password: Secret::new("p".into())
            })
        );
        assert_eq!(
            read(
                ok,
                r#"{"ServerURL":"r:5000","Username":"<token>","Secret":"rt"}"#
            )
            .unwrap(),
            Found::IdentityToken(Secret::new("rt".into()))
        );
        assert_eq!(
            read(failed, "credentials not found in native keychain\n").unwrap(),
            Found::Anonymous
        );
        let err = read(failed, "no keyring\n").unwrap_err();
        assert!(matches!(err, Error::HelperFailed { .. }), "{err}");
        assert!(err.to_string().contains("no keyring"), "{err}");
        // A broken answer is not quoted: it may hold the secret.
        let err = read(ok, r#"{"Username":"u","Secret":"hunter2"#).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = read(ok, r#"{"Username":"u","Secret":""}"#).unwrap_err();
        assert!(err.to_string().contains("an empty Secret"), "{err}");
    }

    #[test]
    fn a_token_servers_error_is_summed_up() {
        assert_eq!(
            error_detail(br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":"invalid refresh token"}]}"#),
            "authentication required: invalid refresh token"
        );
        assert_eq!(
            error_detail(br#"{"error":"invalid_grant","error_description":"expired"}"#),
            "invalid_grant: expired"
        );
        assert_eq!(error_detail(b"<html>"), "no error message");
    }
}
