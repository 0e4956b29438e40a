//! The config's top-level `registries:` and what each entry's files hold.
//!
//! ```yaml
//! registries:
//!   registry.example.com:
//!     ca: /etc/nodestatus/registry-ca.pem     # a PEM bundle, added to the system roots
//!     auth: /etc/nodestatus/pull/.dockerconfigjson
//!   127.0.0.1:5000:
//!     insecure: true                          # plain HTTP, to this registry only
//! ```
//!
//! The settings hold paths, never secrets. The files are read at each
//! operation, so a rotated Secret or CA bundle is used at the next pull
//! without a restart. `auth` is a `kubernetes.io/dockerconfigjson` file:
//! `{"auths": {"HOST[:PORT]": {"auth": "<base64 of user:password>"}}}` or
//! `{"username": ..., "password": ...}` in place of `auth`; its entry for
//! the registry is matched by host and port, with or without a scheme
//! (`https://HOST/v1/` as `docker login` writes it). As the docker CLI reads
//! a `config.json`, an entry's `identitytoken` (an OAuth2 refresh token) is
//! used in place of its `auth`, and a credential helper named by
//! `credHelpers` for the registry, else by `credsStore`, in place of
//! `auths` ([`Auth`]; the helper is run by [`crate::credentials`]).
//!
//! No error of this module quotes the content of an auth file: a parse
//! error gives the line and column, never the text around it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;

/// Why a registry's settings or files are refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A `registries` key is not `HOST[:PORT]`.
    #[error(
        "registries: `{key}` is not HOST[:PORT] (no scheme, path or credentials: `registry.example.com:5000`)"
    )]
    InvalidHost {
        /// The key.
        key: String,
    },
    /// A file named by the settings could not be read.
    #[error("registries.{registry}.{field}: cannot read {}", path.display())]
    Read {
        /// The registry.
        registry: String,
        /// `ca` or `auth`.
        field: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The CA file holds no PEM certificate.
    #[error("registries.{registry}.ca: {} holds no PEM certificate", path.display())]
    NoCertificate {
        /// The registry.
        registry: String,
        /// The file.
        path: PathBuf,
    },
    /// The auth file is not a dockerconfigjson (the position only: its text
    /// is never quoted).
    #[error(
        "registries.{registry}.auth: {} is not a kubernetes.io/dockerconfigjson file ({what} at line {line}, column {column})",
        path.display()
    )]
    AuthSyntax {
        /// The registry.
        registry: String,
        /// The file.
        path: PathBuf,
        /// What kind of error, from serde_json's classification.
        what: &'static str,
        /// Where.
        line: usize,
        /// Where.
        column: usize,
    },
    /// The auth file has no entry for the registry.
    #[error(
        "registries.{registry}.auth: {} has no entry for {registry} under `auths`",
        path.display()
    )]
    NoAuthEntry {
        /// The registry.
        registry: String,
        /// The file.
        path: PathBuf,
    },
    /// The auth file's entry is not usable.
    #[error(
        "registries.{registry}.auth: the entry for {registry} in {} {reason}",
        path.display()
    )]
    BadAuthEntry {
        /// The registry.
        registry: String,
        /// The file.
        path: PathBuf,
        /// What is wrong (never the value).
        reason: &'static str,
    },
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The top-level `registries:` map, keyed by `HOST[:PORT]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Registries(pub BTreeMap<String, RegistrySettings>);

/// One registry's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrySettings {
    /// A PEM CA bundle trusted for this registry, beside the system roots.
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// Plain HTTP to this registry (and to no other).
    #[serde(default)]
    pub insecure: bool,
    /// A `kubernetes.io/dockerconfigjson` file with the pull credentials.
    #[serde(default)]
    pub auth: Option<PathBuf>,
}

impl Registries {
    /// Checks every key is `HOST[:PORT]`.
    pub fn validate(&self) -> Result<()> {
        match self.0.keys().find(|key| !is_host_port(key)) {
            Some(key) => Err(Error::InvalidHost { key: key.clone() }),
            None => Ok(()),
        }
    }

    /// The settings of `registry`, or the defaults (HTTPS with the system
    /// roots, anonymous).
    pub fn get(&self, registry: &str) -> RegistrySettings {
        self.0.get(registry).cloned().unwrap_or_default()
    }
}

fn is_host_port(key: &str) -> bool {
    let (host, port) = match key.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (key, None),
    };
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && port.is_none_or(|p| p.parse::<u16>().is_ok())
}

/// A password or token: shown as `<redacted>` by `Debug`, never by
/// `Display` (it has none).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the request that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A user name and password for one registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password (redacted in `Debug`).
    pub password: Secret,
}

impl RegistrySettings {
    /// The CA bundle's certificates, one PEM block each (none when `ca` is
    /// not set).
    pub fn read_ca(&self, registry: &str) -> Result<Vec<Vec<u8>>> {
        let Some(path) = &self.ca else {
            return Ok(Vec::new());
        };
        let pem = read(registry, "ca", path)?;
        let certs = pem_certificates(&String::from_utf8_lossy(&pem));
        if certs.is_empty() {
            return Err(Error::NoCertificate {
                registry: registry.to_owned(),
                path: path.clone(),
            });
        }
        Ok(certs)
    }

    /// The credentials for `registry` from the `auth` file, if set.
    pub fn read_credentials(&self, registry: &str) -> Result<Option<Credentials>> {
        let Some(path) = &self.auth else {
            return Ok(None);
        };
        let bytes = read(registry, "auth", path)?;
        credentials(registry, path, &bytes).map(Some)
    }
}

/// Each `CERTIFICATE` block of a PEM bundle (reqwest reads one per call).
fn pem_certificates(pem: &str) -> Vec<Vec<u8>> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut certs = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            break;
        };
        let end = start + len + END.len();
        certs.push(format!("{}\n", &rest[start..end]).into_bytes());
        rest = &rest[end..];
    }
    certs
}

fn read(registry: &str, field: &'static str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Read {
        registry: registry.to_owned(),
        field,
        path: path.to_owned(),
        source,
    })
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    /// A credential helper per registry (`docker-credential-<name>`).
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    /// The credential helper of every registry not in `credHelpers`.
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// Where a registry's credentials come from, as the docker CLI picks them
/// in a `config.json`: `credHelpers.<registry>`, else `credsStore`, else the
/// registry's entry under `auths` (its `identitytoken` before its `auth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// A user name and password (`auth`, or `username` and `password`),
    /// sent as Basic credentials, to the registry or to its token server.
    Basic(Credentials),
    /// An OAuth2 refresh token (`identitytoken`), exchanged at the
    /// registry's token server for an access token.
    IdentityToken(Secret),
    /// A credential helper: `docker-credential-<helper> get`.
    Helper {
        /// The helper's name (the program is `docker-credential-<helper>`).
        helper: String,
        /// `credHelpers` or `credsStore`.
        field: &'static str,
        /// The file that names it.
        path: PathBuf,
    },
}

impl RegistrySettings {
    /// Where the credentials for `registry` come from, by the `auth` file
    /// (none when `auth` is not set).
    pub fn read_auth(&self, registry: &str) -> Result<Option<Auth>> {
        let Some(path) = &self.auth else {
            return Ok(None);
        };
        let bytes = read(registry, "auth", path)?;
        auth(registry, path, &bytes).map(Some)
    }
}

impl Secret {
    /// A secret read elsewhere (a credential helper's answer).
    pub(crate) fn new(secret: String) -> Self {
        Self(secret)
    }
}

/// The key of a dockerconfigjson entry as `HOST[:PORT]`: without a scheme
/// or a path (`https://index.docker.io/v1/` is `index.docker.io`).
fn entry_host(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

/// Parses a dockerconfigjson and picks `registry`'s user name and
/// password (an identity token or a helper is refused here).
fn credentials(registry: &str, path: &Path, bytes: &[u8]) -> Result<Credentials> {
    match auth(registry, path, bytes)? {
        Auth::Basic(credentials) => Ok(credentials),
        Auth::IdentityToken(_) | Auth::Helper { .. } => Err(Error::BadAuthEntry {
            registry: registry.to_owned(),
            path: path.to_owned(),
            reason: "names an identity token or a credential helper, not a user name and password",
        }),
    }
}

/// Parses a dockerconfigjson and picks where `registry`'s credentials come
/// from.
fn auth(registry: &str, path: &Path, bytes: &[u8]) -> Result<Auth> {
    let bad = |reason| Error::BadAuthEntry {
        registry: registry.to_owned(),
        path: path.to_owned(),
        reason,
    };
    let config: DockerConfig = serde_json::from_slice(bytes).map_err(|e| Error::AuthSyntax {
        registry: registry.to_owned(),
        path: path.to_owned(),
        what: match e.classify() {
            serde_json::error::Category::Io => "a read error",
            serde_json::error::Category::Syntax => "a syntax error",
            serde_json::error::Category::Data => "a field of the wrong type",
            serde_json::error::Category::Eof => "an unexpected end",
        },
        line: e.line(),
        column: e.column(),
    })?;
    let helper = |helper: &String, field| Auth::Helper {
        helper: helper.clone(),
        field,
        path: path.to_owned(),
    };
    if let Some((_, name)) = config
        .cred_helpers
        .iter()
        .find(|(key, _)| entry_host(key) == registry)
    {
        return Ok(helper(name, "credHelpers"));
    }
    if let Some(name) = config.creds_store.as_ref().filter(|n| !n.is_empty()) {
        return Ok(helper(name, "credsStore"));
    }
    let entry = config
        .auths
        .iter()
        .find(|(key, _)| entry_host(key) == registry)
        .map(|(_, entry)| entry)
        .ok_or_else(|| Error::NoAuthEntry {
            registry: registry.to_owned(),
            path: path.to_owned(),
        })?;
    if let Some(token) = entry.identitytoken.as_ref().filter(|t| !t.is_empty()) {
        return Ok(Auth::IdentityToken(Secret(token.clone())));
    }
    if let Some(auth) = &entry.auth {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| bad("has an `auth` that is not base64"))?;
        let decoded =
            String::from_utf8(decoded).map_err(|_| bad("has an `auth` that is not UTF-8"))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| bad("has an `auth` that is not base64 of user:password"))?;
        return Ok(Auth::Basic(Credentials {
            username: user.to_owned(),
            password: Secret(password.to_owned()),
        }));
    }
    match (&entry.username, &entry.password) {
        (Some(username), Some(password)) => Ok(Auth::Basic(Credentials {
            username: username.clone(),
            password: Secret(password.clone()),
        })),
        _ => Err(bad(
            "has neither `auth`, `username` and `password`, nor `identitytoken`",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWORD: &str = "s3cret-Passw0rd";

    fn yaml(text: &str) -> std::result::Result<Registries, serde_yaml::Error> {
        serde_yaml::from_str(text)
    }

    #[test]
    fn the_settings_read_camel_case_and_refuse_unknown_keys() {
        let r = yaml("registry.example.com:\n  ca: /ca.pem\n  auth: /auth.json\n127.0.0.1:5000:\n  insecure: true\n").unwrap();
        r.validate().unwrap();
        assert!(r.get("127.0.0.1:5000").insecure);
        assert_eq!(
            r.get("registry.example.com").ca.unwrap(),
            Path::new("/ca.pem")
        );
        assert_eq!(r.get("elsewhere.example.com"), RegistrySettings::default());
        let err = yaml("r.example.com:\n  insecureSkipVerify: true\n").unwrap_err();
        assert!(err.to_string().contains("insecureSkipVerify"), "{err}");
        for key in [
            "https://r.example.com",
            "r.example.com/v2",
            "user:pw@r.example.com",
            "r.example.com:http",
        ] {
            let r = Registries(BTreeMap::from([(
                key.to_owned(),
                RegistrySettings::default(),
            )]));
            assert!(
                matches!(r.validate(), Err(Error::InvalidHost { .. })),
                "{key}"
            );
        }
    }

    #[test]
    fn credentials_come_from_a_dockerconfigjson_entry_matched_by_host_and_port() {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("vendor:{PASSWORD}"));
        let file = format!(
            r#"{{"auths":{{"https://other.example.com/v1/":{{"auth":"b3RoZXI6eA=="}},
                "127.0.0.1:5000":{{"auth":"{auth}"}},
                "https://r.example.com/v1/":{{"username":"u","password":"{PASSWORD}"}}}}}}"#
        );
        let path = Path::new("/pull/.dockerconfigjson");
        let c = credentials("127.0.0.1:5000", path, file.as_bytes()).unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.expose()),
            ("vendor", PASSWORD)
        );
        let c = credentials("r.example.com", path, file.as_bytes()).unwrap();
        assert_eq!((c.username.as_str(), c.password.expose()), ("u", PASSWORD));
        assert!(matches!(
            credentials("127.0.0.1:5001", path, file.as_bytes()),
            Err(Error::NoAuthEntry { .. })
        ));
    }

    #[test]
    fn helpers_and_identity_tokens_are_picked_as_the_docker_cli_picks_them() {
        let path = Path::new("/root/.docker/config.json");
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("vendor:{PASSWORD}"));
        let helper = |name: &str, field| Auth::Helper {
            helper: name.into(),
            field,
            path: path.to_owned(),
        };
        // credHelpers for the registry (a key with a scheme too), before
        // credsStore, before auths.
        let file = format!(
            r#"{{"credsStore":"desktop","credHelpers":{{"https://r.example.com/v1/":"ecr-login"}},
                "auths":{{"r.example.com":{{"auth":"{basic}"}},"s.example.com":{{"auth":"{basic}"}}}}}}"#
        );
        assert_eq!(
            auth("r.example.com", path, file.as_bytes()).unwrap(),
            helper("ecr-login", "credHelpers")
        );
        assert_eq!(
            auth("s.example.com", path, file.as_bytes()).unwrap(),
            helper("desktop", "credsStore")
        );
        // An empty credsStore is none; an identity token before `auth`.
        let file = format!(
            r#"{{"credsStore":"","auths":{{"r.example.com":{{"auth":"{basic}","identitytoken":"rt-{PASSWORD}"}}}}}}"#
        );
        let got = auth("r.example.com", path, file.as_bytes()).unwrap();
        assert_eq!(got, Auth::IdentityToken(Secret(format!("rt-{PASSWORD}"))));
        assert!(!format!("{got:?}").contains(PASSWORD), "{got:?}");
        // `read_credentials` wants a user name and password.
        let err = credentials("r.example.com", path, file.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("identity token"), "{err}");
        // An identity token alone is an entry; an empty entry is not.
        let file = r#"{"auths":{"r.example.com":{"identitytoken":"rt"}, "e.example.com":{}}}"#;
        assert!(matches!(
            auth("r.example.com", path, file.as_bytes()),
            Ok(Auth::IdentityToken(_))
        ));
        assert!(matches!(
            auth("e.example.com", path, file.as_bytes()),
            Err(Error::BadAuthEntry { .. })
        ));
    }

    #[test]
    fn a_ca_bundle_is_split_into_its_certificates() {
        let pem = "junk\n-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n# b\n-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----\n";
        let certs = pem_certificates(pem);
        assert_eq!(certs.len(), 2);
        assert!(String::from_utf8_lossy(&certs[1]).contains("BBB"));
        assert!(pem_certificates("-----BEGIN PUBLIC KEY-----\n").is_empty());
    }

    #[test]
    fn no_debug_or_error_shows_a_password() {
        let path = Path::new("/pull/.dockerconfigjson");
        let c = credentials(
            "r.example.com",
            path,
            format!(
                r#"{{"auths":{{"r.example.com":{{"username":"u","password":"{PASSWORD}"}}}}}}"#
            )
            .as_bytes(),
        )
        .unwrap();
        assert!(!format!("{c:?}").contains(PASSWORD));
        assert!(format!("{c:?}").contains("<redacted>"));

        // Broken files whose text holds the password: the errors give a
        // position, never the text.
        let broken = [
            format!(r#"{{"auths":{{"r.example.com":{{"auth":"{PASSWORD}"}}}}}}"#),
            format!(r#"{{"auths":{{"r.example.com":{{"password":["{PASSWORD}"]}}}}}}"#),
            format!(r#"{{"auths":{{"r.example.com":{{"username":"u","password":"{PASSWORD}" "#),
            format!(r#"{{"auths":{{"r.example.com":{{"password":"{PASSWORD}"}}}}}}"#),
            format!(r#"{{"auths": {PASSWORD}}}"#),
        ];
        for file in broken {
            let err = credentials("r.example.com", path, file.as_bytes()).unwrap_err();
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains(PASSWORD), "{shown}");
            assert!(shown.contains("/pull/.dockerconfigjson"), "{shown}");
        }
    }
}
