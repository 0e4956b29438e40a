//! A real registry for the tests (the registry crate's, and tests/all): Debian's `docker-registry` (the CNCF
//! distribution registry 2.8) on a free loopback port, with its own storage,
//! TLS from a CA made here with the openssl CLI, and htpasswd (bcrypt)
//! authentication. Stopped on drop.
//!
//! Two other kinds, with the tools `scripts/ensure-registries.sh` builds
//! (`scripts/test.sh` names them in `NODESTATUS_TOKEN_SERVER` and
//! `NODESTATUS_GGCR_REGISTRY`): [`Options::token`], the same registry with
//! `auth: token` behind distribution's own token server (users [`USER`] and
//! [`OTHER_USER`], each granted the repositories under `<user>/`); and
//! [`Options::referrers`], go-containerregistry's registry with the OCI 1.1
//! referrers API (in memory, no authentication).
//!
//! Needs `scripts/ensure-packages.sh docker-registry apache2-utils openssl`.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use nodestatus_registry::{Digest, Reference, Registries, RegistrySettings};

/// The user the registries accept.
pub const USER: &str = "vendor";
/// Its password: the tests check that no error or Debug shows it.
pub const PASSWORD: &str = "pw-Zq8-never-shown";
/// A second user of the token server ([`Options::token`]): granted
/// `other/...`, not `vendor/...`.
pub const OTHER_USER: &str = "other";
/// Its password.
pub const OTHER_PASSWORD: &str = "pw-other-Xk3";
/// The token server's `service`, and the registry's.
pub const TOKEN_SERVICE: &str = "nodestatus-test-registry";

/// How a registry is started.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// HTTPS with a CA of its own (else plain HTTP).
    pub tls: bool,
    /// htpasswd authentication (else anonymous).
    pub auth: bool,
    /// With `auth`: bearer tokens from distribution's token server
    /// (`auth: token`) in place of htpasswd at the registry; the token
    /// server checks the htpasswd file.
    pub token: bool,
    /// go-containerregistry's registry, with the referrers API, in place
    /// of docker-registry (no `auth`, no storage on disk).
    pub referrers: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            tls: true,
            auth: true,
            token: false,
            referrers: false,
        }
    }
}

/// A Go tool of `scripts/ensure-registries.sh`: `$VAR`, else where that
/// script leaves it. A missing one fails the test with the command that
/// builds it.
pub fn ensured_tool(var: &str, tool: &str, version: &str) -> PathBuf {
    let path = match std::env::var_os(var) {
        Some(path) => PathBuf::from(path),
        None => std::env::var_os("NODESTATUS_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/nodestatus")
            })
            .join(format!("{tool}-{version}"))
            .join(tool),
    };
    assert!(
        path.is_file(),
        "{tool} is missing at {} (${var}): build it with scripts/ensure-registries.sh {tool} (scripts/test.sh does)",
        path.display()
    );
    path
}

/// distribution's token server (v2.8.3).
pub fn token_server_binary() -> PathBuf {
    ensured_tool("NODESTATUS_TOKEN_SERVER", "token-server", "2.8.3")
}

/// go-containerregistry's registry with the referrers API (v0.21.7).
pub fn ggcr_registry_binary() -> PathBuf {
    ensured_tool("NODESTATUS_GGCR_REGISTRY", "ggcr-registry", "0.21.7")
}

/// A running registry.
pub struct Registry {
    /// Its storage, certificates and config.
    pub dir: tempfile::TempDir,
    /// Where it listens.
    pub addr: SocketAddr,
    /// How it was started.
    pub options: Options,
    /// Where the token server listens ([`Options::token`]).
    pub token_addr: Option<SocketAddr>,
    child: Option<Child>,
    token_server: Option<Child>,
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn need(tool: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    assert!(
        found,
        "{tool} is missing: run `scripts/ensure-packages.sh docker-registry apache2-utils openssl` (package {package})"
    );
}

/// A free port on 127.0.0.1 (the registry binds it right after).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A CA and a server certificate for 127.0.0.1, made with the openssl CLI.
fn make_certs(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    run(Command::new("openssl")
        .current_dir(dir)
        .args(["req", "-x509"])
        .args(ec)
        .args([
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=nodestatus test CA",
        ])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]));
    run(Command::new("openssl")
        .current_dir(dir)
        .arg("req")
        .args(ec)
        .args([
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]));
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    run(Command::new("openssl")
        .current_dir(dir)
        .args([
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
        ])
        .args([
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ]));
}

impl Registry {
    /// Starts a registry with TLS and authentication.
    pub fn start() -> Self {
        Self::start_with(Options::default())
    }

    /// Starts a registry as `options` say.
    pub fn start_with(options: Options) -> Self {
        need("docker-registry", "docker-registry");
        need("htpasswd", "apache2-utils");
        need("openssl", "openssl");
        assert!(
            !(options.referrers && options.auth),
            "the referrers registry has no authentication"
        );
        let dir = tempfile::tempdir().unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let token_addr: Option<SocketAddr> = (options.auth && options.token)
            .then(|| format!("127.0.0.1:{}", free_port()).parse().unwrap());
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n  secret: test-secret\n",
            dir.path().join("storage").display()
        );
        if options.tls {
            make_certs(dir.path());
            config += &format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                dir.path().join("server.pem").display(),
                dir.path().join("server.key").display()
            );
        }
        if options.auth {
            let mut htpasswd = Vec::new();
            for (user, password) in [(USER, PASSWORD), (OTHER_USER, OTHER_PASSWORD)] {
                let out = Command::new("htpasswd")
                    .args(["-Bbn", user, password])
                    .output()
                    .unwrap();
                assert!(out.status.success());
                htpasswd.extend(out.stdout.trim_ascii_end());
                htpasswd.push(b'\n');
            }
            std::fs::write(dir.path().join("htpasswd"), htpasswd).unwrap();
            if let Some(token_addr) = token_addr {
                // The token server's signing key, and its certificate as
                // the registry's root bundle.
                let d = dir.path();
                run(Command::new("openssl").current_dir(d).args([
                    "ecparam",
                    "-genkey",
                    "-name",
                    "prime256v1",
                    "-noout",
                    "-out",
                    "token.key",
                ]));
                run(Command::new("openssl").current_dir(d).args([
                    "req",
                    "-x509",
                    "-key",
                    "token.key",
                    "-out",
                    "token.pem",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=nodestatus test token signer",
                ]));
                let scheme = if options.tls { "https" } else { "http" };
                config += &format!(
                    "auth:\n  token:\n    realm: {scheme}://{token_addr}/token/\n    service: {TOKEN_SERVICE}\n    issuer: nodestatus-test-issuer\n    rootcertbundle: {}\n",
                    d.join("token.pem").display()
                );
            } else {
                config += &format!(
                    "auth:\n  htpasswd:\n    realm: nodestatus-test\n    path: {}\n",
                    dir.path().join("htpasswd").display()
                );
            }
        }
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let mut registry = Self {
            dir,
            addr,
            options,
            token_addr,
            child: None,
            token_server: None,
        };
        registry.restart();
        registry
    }

    /// Starts the registry again (same port, same storage).
    /// Starts the registry again (same port, same storage; the referrers
    /// registry keeps nothing), and its token server.
    pub fn restart(&mut self) {
        self.stop();
        let d = self.dir.path().to_owned();
        let mut command = match self.options.referrers {
            false => {
                let mut c = Command::new("docker-registry");
                c.arg("serve").arg(d.join("config.yml"));
                c
            }
            true => {
                let mut c = Command::new(ggcr_registry_binary());
                c.arg("-addr").arg(self.addr.to_string());
                if self.options.tls {
                    c.arg("-tlscert")
                        .arg(d.join("server.pem"))
                        .arg("-tlskey")
                        .arg(d.join("server.key"));
                }
                c
            }
        };
        self.child = Some(spawn(&mut command, &d.join("registry.log")));
        if let Some(token_addr) = self.token_addr {
            let mut command = Command::new(token_server_binary());
            command
                .arg("-addr")
                .arg(token_addr.to_string())
                .arg("-key")
                .arg(d.join("token.key"))
                .arg("-passwd")
                .arg(d.join("htpasswd"))
                .args([
                    "-realm",
                    "nodestatus-test",
                    "-issuer",
                    "nodestatus-test-issuer",
                ]);
            if self.options.tls {
                command
                    .arg("-tlscert")
                    .arg(d.join("server.pem"))
                    .arg("-tlskey")
                    .arg(d.join("server.key"));
            }
            let log = d.join("token-server.log");
            let child = self.token_server.insert(spawn(&mut command, &log));
            wait_listening(token_addr, child, &log);
        }
        let log = d.join("registry.log");
        wait_listening(self.addr, self.child.as_mut().unwrap(), &log);
    }

    /// Stops the registry (its storage stays) and its token server.
    pub fn stop(&mut self) {
        for child in [self.child.take(), self.token_server.take()]
            .into_iter()
            .flatten()
        {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Logs every request from now on (distribution's access log, in the
    /// combined log format, to [`Registry::log`]), so that a test can count
    /// the pulls: restarts the registry. docker-registry only.
    pub fn log_requests(&mut self) {
        assert!(!self.options.referrers, "docker-registry only");
        let path = self.dir.path().join("config.yml");
        let config = std::fs::read_to_string(&path).unwrap().replace(
            "accesslog:\n    disabled: true",
            "accesslog:\n    disabled: false",
        );
        std::fs::write(&path, config).unwrap();
        self.restart();
    }

    /// The registry's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The token server's log.
    pub fn token_server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("token-server.log")).unwrap_or_default()
    }

    /// The token server's realm ([`Options::token`]).
    pub fn realm(&self) -> String {
        let scheme = if self.options.tls { "https" } else { "http" };
        format!(
            "{scheme}://{}/token/",
            self.token_addr.expect("a token server")
        )
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// A reference in this registry: `path` is `repo[:tag][@digest]`.
    pub fn reference(&self, path: &str) -> Reference {
        Reference::parse(&format!("{}/{path}", self.host())).unwrap()
    }

    /// The CA certificate (TLS only).
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A dockerconfigjson file with `user:password` for this registry.
    pub fn auth_file(&self, user: &str, password: &str) -> PathBuf {
        let path = self
            .dir
            .path()
            .join(format!("auth-{user}-{}.json", password.len()));
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut f = std::fs::File::create(&path).unwrap();
        write!(
            f,
            r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#,
            self.host()
        )
        .unwrap();
        path
    }

    /// The `registries:` section of an engine config for this registry:
    /// its CA and the credentials in `auth` (a file of [`Registry::auth_file`]).
    pub fn config_yaml(&self, auth: &Path) -> String {
        format!(
            "registries:\n  {}:\n    ca: {}\n    auth: {}\n",
            self.host(),
            self.ca().display(),
            auth.display()
        )
    }

    /// This registry's settings as the config would give them: its CA, the
    /// right credentials, `insecure` without TLS.
    pub fn settings(&self) -> RegistrySettings {
        RegistrySettings {
            ca: self.options.tls.then(|| self.ca()),
            insecure: !self.options.tls,
            auth: self.options.auth.then(|| self.auth_file(USER, PASSWORD)),
        }
    }

    /// `registries:` with this registry's settings.
    pub fn registries(&self) -> Registries {
        self.registries_with(self.settings())
    }

    /// `registries:` with other settings for this registry.
    pub fn registries_with(&self, settings: RegistrySettings) -> Registries {
        Registries([(self.host(), settings)].into())
    }

    /// The registry's file for the blob `digest`.
    pub fn blob_file(&self, digest: &Digest) -> PathBuf {
        let hex = digest.hex();
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The registry's directory for the tag `tag` of `repo`.
    pub fn tag_dir(&self, repo: &str, tag: &str) -> PathBuf {
        self.dir
            .path()
            .join("storage/docker/registry/v2/repositories")
            .join(repo)
            .join("_manifests/tags")
            .join(tag)
    }
}

/// `command` started with its output in `log`.
fn spawn(command: &mut Command, log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"))
}

/// Waits until `addr` accepts connections, or panics with the `log` file
/// when `child` exits or 20 s pass.
fn wait_listening(addr: SocketAddr, child: &mut Child, log: &Path) {
    let log = || std::fs::read_to_string(log).unwrap_or_default();
    let start = Instant::now();
    while TcpStream::connect(addr).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{child:?} exited ({status}): {}", log());
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "nothing listened on {addr} within 20 s: {}",
            log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A docker config's `auth`: the base64 of `user:password`.
pub fn docker_auth(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// A fake component: the Wasm magic and version, then `n` bytes.
pub fn component(seed: u8, n: usize) -> Vec<u8> {
    let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
    bytes.extend((0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    bytes
}

/// The error and all its causes, as a log line would show them, and its
/// Debug.
pub fn shown(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = format!("{err} | {err:?}");
    let mut source = err.source();
    while let Some(e) = source {
        text += &format!(" | {e}");
        source = e.source();
    }
    text
}

/// Checks that `err` names `reference` and shows no password.
pub fn assert_names(err: &(dyn std::error::Error + 'static), reference: &Reference) {
    let top = err.to_string();
    let repo = reference.repository_path();
    assert!(top.contains(&repo), "the error does not name {repo}: {top}");
    let all = shown(err);
    assert!(
        !all.contains(PASSWORD),
        "the error shows the password: {all}"
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    assert!(
        !all.contains(&encoded),
        "the error shows the credentials: {all}"
    );
}

/// A private key file made by `openssl genpkey` (PKCS#8, P-256), and its
/// public key file.
pub fn key_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    run(Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&private));
    run(Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(&private)
        .arg("-out")
        .arg(&public));
    (private, public)
}

/// oci-client used directly, to write what `Client::push` never would: other
/// layouts, a declared size that lies, a signature by hand.
pub mod oci {
    use nodestatus_registry::{Digest, Reference};
    use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
    use oci_client::secrets::RegistryAuth;

    use super::{PASSWORD, Registry, USER};

    /// A raw client for one test registry.
    pub struct Oci {
        client: oci_client::Client,
        auth: RegistryAuth,
    }

    impl Oci {
        /// A client with the registry's CA and credentials.
        pub fn new(registry: &Registry) -> Self {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut config = ClientConfig {
                protocol: match registry.options.tls {
                    true => ClientProtocol::Https,
                    false => ClientProtocol::Http,
                },
                ..ClientConfig::default()
            };
            if registry.options.tls {
                config.extra_root_certificates.push(Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: std::fs::read(registry.ca()).unwrap(),
                });
            }
            let auth = match registry.options.auth {
                true => RegistryAuth::Basic(USER.into(), PASSWORD.into()),
                false => RegistryAuth::Anonymous,
            };
            Self {
                client: oci_client::Client::try_from(config).unwrap(),
                auth,
            }
        }

        /// Uploads a blob; returns its digest.
        pub async fn blob(&self, reference: &Reference, bytes: &[u8]) -> Digest {
            let r = oci(reference);
            self.client
                .store_auth_if_needed(r.resolve_registry(), &self.auth)
                .await;
            let digest = Digest::of(bytes);
            self.client
                .push_blob(&r, bytes.to_vec(), digest.as_str())
                .await
                .unwrap();
            digest
        }

        /// Uploads a manifest (JSON) at `reference`'s tag; returns its digest.
        pub async fn manifest(
            &self,
            reference: &Reference,
            manifest: &serde_json::Value,
        ) -> Digest {
            let oci_manifest = "application/vnd.oci.image.manifest.v1+json";
            self.manifest_of_type(reference, manifest, oci_manifest)
                .await
        }

        /// Uploads a manifest of `media_type` (an index, say).
        pub async fn manifest_of_type(
            &self,
            reference: &Reference,
            manifest: &serde_json::Value,
            media_type: &'static str,
        ) -> Digest {
            let r = oci(reference);
            self.client
                .store_auth_if_needed(r.resolve_registry(), &self.auth)
                .await;
            let body = serde_json::to_vec(manifest).unwrap();
            let digest = Digest::of(&body);
            self.client
                .push_manifest_raw(&r, body, http::HeaderValue::from_static(media_type))
                .await
                .unwrap();
            digest
        }

        /// Uploads an artifact: a config of `config_type` and `layers`
        /// (media type, bytes, and a declared size in place of the real
        /// one); returns the manifest digest.
        pub async fn push(
            &self,
            reference: &Reference,
            config_type: &str,
            layers: &[(&str, &[u8], Option<u64>)],
        ) -> Digest {
            let config = self.blob(reference, b"{}").await;
            let mut descriptors = Vec::new();
            for (media_type, bytes, declared) in layers {
                let digest = self.blob(reference, bytes).await;
                descriptors.push(serde_json::json!({
                    "mediaType": media_type,
                    "digest": digest.as_str(),
                    "size": declared.unwrap_or(bytes.len() as u64),
                }));
            }
            let manifest = serde_json::json!({
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": config_type, "digest": config.as_str(), "size": 2},
                "layers": descriptors,
            });
            self.manifest(reference, &manifest).await
        }

        /// The tags of `reference`'s repository, sorted.
        pub async fn tags(&self, reference: &Reference) -> Vec<String> {
            let mut tags = self
                .client
                .list_tags(&oci(reference), &self.auth, None, None)
                .await
                .unwrap()
                .tags;
            tags.sort();
            tags
        }

        /// The manifest or index at `reference`.
        pub async fn get_any_manifest(&self, reference: &Reference) -> serde_json::Value {
            let (body, _) = self
                .client
                .pull_manifest_raw(
                    &oci(reference),
                    &self.auth,
                    &[
                        "application/vnd.oci.image.manifest.v1+json",
                        "application/vnd.oci.image.index.v1+json",
                    ],
                )
                .await
                .unwrap();
            serde_json::from_slice(&body).unwrap()
        }

        /// The JSON blob `digest` of `reference`'s repository.
        pub async fn get_blob(&self, reference: &Reference, digest: &str) -> serde_json::Value {
            let mut body = Vec::new();
            let r = oci(reference);
            self.client
                .store_auth_if_needed(r.resolve_registry(), &self.auth)
                .await;
            self.client.pull_blob(&r, digest, &mut body).await.unwrap();
            serde_json::from_slice(&body).unwrap()
        }

        /// The raw manifest at `reference`.
        pub async fn get_manifest(&self, reference: &Reference) -> serde_json::Value {
            let (body, _) = self
                .client
                .pull_manifest_raw(
                    &oci(reference),
                    &self.auth,
                    &["application/vnd.oci.image.manifest.v1+json"],
                )
                .await
                .unwrap();
            serde_json::from_slice(&body).unwrap()
        }
    }

    fn oci(reference: &Reference) -> oci_client::Reference {
        reference.to_string().parse().unwrap()
    }
}
