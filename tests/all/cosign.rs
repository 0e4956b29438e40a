//! Signatures as vendors make them today: the real cosign (v2 and v3, built
//! from their Go modules by `scripts/ensure-cosign.sh`) against a real
//! registry (Debian's `docker-registry` 2.8, TLS and htpasswd) and the real
//! `nodestatus` binary, both ways:
//!
//! - `cosign verify --key` accepts what `nodestatus plugin sign` writes, and
//!   refuses it with another key;
//! - `nodestatus plugin pull --key` accepts what `cosign sign --key` writes
//!   (alone, or appended to nodestatus's own signature), with the public key
//!   of a `cosign generate-key-pair`, and refuses it with another key.
//!
//! Both run offline: `--tlog-upload=false` and `--insecure-ignore-tlog=true`
//! (no Rekor), and for v3 the classic `.sig` layout
//! (`--new-bundle-format=false --use-signing-config=false`). What v3 does by
//! default (a Sigstore bundle as an OCI 1.1 referrer, which nodestatus
//! verifies with the key too) has its own test, as has v2's
//! `--new-bundle-format`, so that a change on either side is seen.
//!
//! The bundle tests run twice: on docker-registry 2.8, which has no OCI 1.1
//! referrers API (cosign lists the bundle under the referrers tag
//! `sha256-<hex>`), and on go-containerregistry's registry with the API on
//! (`scripts/ensure-registries.sh ggcr-registry`; cosign writes no tag, the
//! registry lists the bundle), so that nodestatus is seen finding it both
//! ways.
//!
//! A cosign that is not built fails the test with the command that builds
//! it; `scripts/test.sh` builds both and names them in
//! `NODESTATUS_COSIGN_V2` and `NODESTATUS_COSIGN_V3` (and the registry in
//! `NODESTATUS_GGCR_REGISTRY`).
//!
//! Needs `scripts/ensure-packages.sh docker-registry apache2-utils openssl curl`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nodestatus_registry::PublicKey;
use nodestatus_registry::signature::{SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE};
use nodestatus_tests::built;
use nodestatus_tests::registry::oci::Oci;
use nodestatus_tests::registry::{Options, PASSWORD, Registry, USER, key_pair};

const REPO: &str = "vendor/probe";

/// The version `scripts/ensure-cosign.sh MAJOR` builds by default.
fn default_version(major: &str) -> &'static str {
    match major {
        "v2" => "2.6.5",
        "v3" => "3.1.3",
        _ => unreachable!("cosign {major}"),
    }
}

/// The cosign binary of `major` (`v2`, `v3`): `$NODESTATUS_COSIGN_V2` (or
/// `_V3`), else the one `scripts/ensure-cosign.sh` leaves in the cache. A
/// missing one fails the test with the command that builds it.
pub(crate) fn cosign_binary(major: &str) -> PathBuf {
    let var = format!("NODESTATUS_COSIGN_{}", major.to_uppercase());
    let path = match std::env::var_os(&var) {
        Some(path) => PathBuf::from(path),
        None => {
            let cache = std::env::var_os("NODESTATUS_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/nodestatus")
                });
            cache
                .join(format!("cosign-{}", default_version(major)))
                .join("cosign")
        }
    };
    assert!(
        path.is_file(),
        "cosign {major} is missing at {} (${var}): build it with scripts/ensure-cosign.sh {major} (scripts/test.sh does)",
        path.display()
    );
    path
}

/// One cosign, run offline against one registry: its CA in
/// `SSL_CERT_FILE`, the credentials in a docker `config.json` of its own,
/// and a `HOME` of its own (cosign keeps a TUF cache there).
pub(crate) struct Cosign {
    binary: PathBuf,
    home: PathBuf,
    ca: PathBuf,
}

impl Cosign {
    pub(crate) fn new(major: &str, dir: &Path, registry: &Registry) -> Self {
        let home = dir.join(format!("cosign-{major}-home"));
        let docker = home.join(".docker");
        std::fs::create_dir_all(&docker).unwrap();
        std::fs::copy(
            registry.auth_file(USER, PASSWORD),
            docker.join("config.json"),
        )
        .unwrap();
        Self {
            binary: cosign_binary(major),
            home,
            ca: registry.ca(),
        }
    }

    /// `cosign ARGS` in `dir`.
    fn run(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new(&self.binary)
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env("DOCKER_CONFIG", self.home.join(".docker"))
            .env("SSL_CERT_FILE", &self.ca)
            .env("TUF_ROOT", self.home.join(".sigstore/root"))
            .env("COSIGN_PASSWORD", "cosign-test-password")
            .env_remove("SIGSTORE_ROOT_FILE")
            .output()
            .unwrap()
    }

    /// `cosign ARGS`; its stdout, or a panic with both outputs.
    pub(crate) fn ok(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.run(dir, args);
        assert!(
            out.status.success(),
            "cosign {args:?} failed: {}",
            shown(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `cosign ARGS`, which must fail; its stderr.
    fn fails(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.run(dir, args);
        assert!(
            !out.status.success(),
            "cosign {args:?} succeeded: {}",
            shown(&out)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

pub(crate) fn shown(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `nodestatus ARGS`.
pub(crate) fn nodestatus(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// `nodestatus ARGS`; its stdout, or a panic with its stderr.
fn nodestatus_ok(args: &[&str]) -> String {
    let out = nodestatus(args);
    assert!(
        out.status.success(),
        "nodestatus {args:?} failed: {}",
        shown(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The registry a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// Debian's docker-registry 2.8 (TLS, htpasswd): no referrers API, so
    /// cosign keeps the referrers tag scheme.
    TagScheme,
    /// go-containerregistry's registry with the referrers API (TLS, no
    /// authentication).
    Referrers,
}

/// A registry, a config with its CA and credentials, and two plugins pushed
/// (`probe` as `:1.0.0` and its second version as `:2.0.0`), by digest.
pub(crate) struct Setup {
    dir: tempfile::TempDir,
    pub(crate) registry: Registry,
    config: PathBuf,
    pub(crate) first: String,
    second: String,
}

impl Setup {
    pub(crate) fn new() -> Self {
        Self::on(Api::TagScheme)
    }

    pub(crate) fn on(api: Api) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let registry = match api {
            Api::TagScheme => Registry::start(),
            Api::Referrers => Registry::start_with(Options {
                auth: false,
                referrers: true,
                ..Default::default()
            }),
        };
        let d = dir.path();
        let auth = d.join("auth.json");
        std::fs::copy(registry.auth_file(USER, PASSWORD), &auth).unwrap();
        let config = d.join("publish.yaml");
        std::fs::write(&config, registry.config_yaml(&auth)).unwrap();
        let push = |file: &str, tag: &str| {
            let reference = format!("{}/{REPO}:{tag}", registry.host());
            let pinned = nodestatus_ok(&[
                "plugin",
                "push",
                file,
                &reference,
                "--config",
                config.to_str().unwrap(),
            ]);
            pinned.trim().to_owned()
        };
        let first = push(built::PROBE, "1.0.0");
        // A plugin is named by its file.
        let v2 = d.join("v2/probe.wasm");
        std::fs::create_dir_all(v2.parent().unwrap()).unwrap();
        std::fs::copy(built::PROBE_V2, &v2).unwrap();
        let second = push(v2.to_str().unwrap(), "2.0.0");
        assert_ne!(first, second);
        Self {
            first,
            second,
            dir,
            registry,
            config,
        }
    }

    pub(crate) fn d(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn config(&self) -> &str {
        self.config.to_str().unwrap()
    }

    /// `nodestatus plugin sign REFERENCE --key KEY` with this config.
    fn sign(&self, reference: &str, key: &Path) -> Output {
        nodestatus(&[
            "plugin",
            "sign",
            reference,
            "--key",
            key.to_str().unwrap(),
            "--config",
            self.config(),
        ])
    }

    /// [`Setup::sign`], which must succeed.
    pub(crate) fn signed(&self, reference: &str, key: &Path) {
        let out = self.sign(reference, key);
        assert!(out.status.success(), "plugin sign failed: {}", shown(&out));
    }

    /// `nodestatus plugin pull REFERENCE --key KEY`: the signature's JSON
    /// when it verifies, else the error it was refused with.
    fn pull(&self, reference: &str, key: &Path) -> Result<serde_json::Value, String> {
        let out = nodestatus(&[
            "plugin",
            "pull",
            reference,
            "--key",
            key.to_str().unwrap(),
            "--config",
            self.config(),
        ]);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let pulled: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        Ok(pulled["signature"].clone())
    }

    /// `op` on the registry, with a raw OCI client.
    fn oci<T>(&self, op: impl AsyncFnOnce(Oci) -> T) -> T {
        let oci = Oci::new(&self.registry);
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(op(oci))
    }

    /// The tags of the repository, sorted.
    fn tags(&self) -> Vec<String> {
        let repo = self.registry.reference(REPO);
        self.oci(async |oci| oci.tags(&repo).await)
    }

    /// The manifest or index a tag names.
    fn manifest(&self, tag: &str) -> serde_json::Value {
        let reference = self.registry.reference(&format!("{REPO}:{tag}"));
        self.oci(async |oci| oci.get_any_manifest(&reference).await)
    }

    /// A JSON blob, or a manifest, by digest.
    fn blob(&self, digest: &str) -> serde_json::Value {
        let repo = self.registry.reference(REPO);
        match self.manifest_by_digest(digest) {
            Some(manifest) => manifest,
            None => self.oci(async |oci| oci.get_blob(&repo, digest).await),
        }
    }

    /// The manifest `digest` names, if it is one.
    fn manifest_by_digest(&self, digest: &str) -> Option<serde_json::Value> {
        let out = self.curl(&format!("manifests/{digest}"));
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    /// What the registry's referrers API lists for the pinned reference
    /// `pinned` (`GET /v2/<name>/referrers/<digest>`), or `None` when it
    /// answers 404: it has no such API.
    fn referrers_api(&self, pinned: &str) -> Option<serde_json::Value> {
        let (_, digest) = pinned.split_once('@').unwrap();
        let out = self.curl(&format!("referrers/{digest}"));
        let status = String::from_utf8_lossy(&out.stderr);
        if status.contains("404") {
            return None;
        }
        assert!(out.status.success(), "referrers API: {status}");
        Some(serde_json::from_slice(&out.stdout).unwrap())
    }

    /// `curl https://HOST/v2/<REPO>/<path>`, with the CA and credentials,
    /// accepting manifests and indexes.
    fn curl(&self, path: &str) -> Output {
        let mut c = Command::new("curl");
        c.args(["-sS", "--fail", "--cacert"])
            .arg(self.registry.ca())
            .args([
                "-H",
                "Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json",
            ]);
        if self.registry.options.auth {
            c.args(["-u", &format!("{USER}:{PASSWORD}")]);
        }
        c.arg(format!("https://{}/v2/{REPO}/{path}", self.registry.host()))
            .output()
            .expect("curl is missing: scripts/ensure-packages.sh curl")
    }
}

/// `sha256-<hex>` of a pinned reference `HOST/repo@sha256:<hex>`.
fn digest_tag(pinned: &str) -> String {
    let (_, digest) = pinned.split_once('@').unwrap();
    digest.replace(':', "-")
}

/// A cosign key pair made by `cosign generate-key-pair` in `dir`.
pub(crate) fn cosign_key_pair(cosign: &Cosign, dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    cosign.ok(dir, &["generate-key-pair"]);
    (dir.join("cosign.key"), dir.join("cosign.pub"))
}

/// The flags that make cosign sign with a key, offline, in the classic
/// `.sig` layout.
pub(crate) fn classic_sign_flags(major: &str) -> &'static [&'static str] {
    match major {
        "v2" => &["--tlog-upload=false", "--yes"],
        _ => &[
            "--tlog-upload=false",
            "--new-bundle-format=false",
            "--use-signing-config=false",
            "--yes",
        ],
    }
}

fn interop(major: &str) {
    let s = Setup::new();
    let d = s.d();
    let cosign = Cosign::new(major, d, &s.registry);
    let version = cosign.ok(d, &["version"]);
    eprintln!("{version}");
    let (vendor_key, vendor_pub) = key_pair(d, "vendor");
    let (_, other_pub) = key_pair(d, "other");

    // nodestatus signs; cosign verifies with the key, and refuses another.
    s.signed(&s.first, &vendor_key);
    let verified = cosign.ok(d, &verify(&vendor_pub, &s.first));
    let (_, digest) = s.first.split_once('@').unwrap();
    assert!(
        verified.contains(digest),
        "cosign verify printed {verified}"
    );
    let refused = cosign.fails(d, &verify(&other_pub, &s.first));
    assert!(
        refused.contains("no matching signatures"),
        "cosign verify with another key: {refused}"
    );

    // A cosign key pair: nodestatus reads its public key; its private key
    // is cosign's encrypted format, refused by `plugin sign` with a
    // message saying so.
    let (cosign_key, cosign_pub) = cosign_key_pair(&cosign, &d.join("cosign-keys"));
    PublicKey::read(&cosign_pub).unwrap();
    let out = s.sign(&s.second, &cosign_key);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("cosign's encrypted key format"),
        "{}",
        shown(&out)
    );

    // cosign signs the second artifact alone: nodestatus verifies it with
    // cosign's public key, and refuses it with another key.
    let sign = |reference: &str| {
        let mut args = vec!["sign", "--key", cosign_key.to_str().unwrap()];
        args.extend(classic_sign_flags(major));
        args.push(reference);
        cosign.ok(d, &args);
    };
    sign(&s.second);
    let sig_tag = format!("{}.sig", digest_tag(&s.second));
    let manifest = s.manifest(&sig_tag);
    assert_eq!(
        manifest["layers"][0]["mediaType"], SIMPLE_SIGNING_MEDIA_TYPE,
        "{manifest}"
    );
    assert!(
        manifest["layers"][0]["annotations"][SIGNATURE_ANNOTATION].is_string(),
        "{manifest}"
    );
    let signature = s.pull(&s.second, &cosign_pub).unwrap();
    assert_eq!(signature["verified"], true, "{signature}");
    assert_eq!(signature["format"], "cosign-sig", "{signature}");
    let refused = s.pull(&s.second, &other_pub).unwrap_err();
    assert!(
        refused.contains("none of the 1 signature(s)") && refused.contains("other.pub"),
        "{refused}"
    );

    // cosign signs the first one too: its signature is appended to
    // nodestatus's, over the same payload byte for byte (one blob), and
    // each key verifies, on both sides.
    sign(&s.first);
    let manifest = s.manifest(&format!("{}.sig", digest_tag(&s.first)));
    assert_eq!(
        manifest["layers"].as_array().unwrap().len(),
        2,
        "{manifest}"
    );
    assert_eq!(
        manifest["layers"][0]["digest"], manifest["layers"][1]["digest"],
        "{manifest}"
    );
    for key in [&vendor_pub, &cosign_pub] {
        let signature = s.pull(&s.first, key).unwrap();
        assert_eq!(signature["verified"], true, "{signature}");
        cosign.ok(d, &verify(key, &s.first));
    }
    let refused = s.pull(&s.first, &other_pub).unwrap_err();
    assert!(refused.contains("none of the 2 signature(s)"), "{refused}");

    // And nodestatus appends to what cosign wrote: the second one, signed
    // by cosign alone, is signed by the vendor key too; cosign verifies
    // both.
    s.signed(&s.second, &vendor_key);
    let manifest = s.manifest(&sig_tag);
    assert_eq!(
        manifest["layers"].as_array().unwrap().len(),
        2,
        "{manifest}"
    );
    for key in [&vendor_pub, &cosign_pub] {
        cosign.ok(d, &verify(key, &s.second));
        let signature = s.pull(&s.second, key).unwrap();
        assert_eq!(signature["verified"], true, "{signature}");
    }
}

/// docs/publishing.md's cosign flow as written, with cosign `major` on
/// PATH as a vendor has it (issue 48, item 1): `generate-key-pair` (step
/// 2), the doc's `cosign sign` of that major (step 4), then its
/// `cosign verify` and `nodestatus plugin pull` (the doc's reference
/// replaced by the pushed digest, its `publish.yaml` by the registry's).
/// And step 2's other way: the openssl key, which cosign refuses as the
/// doc says, imported with the doc's `import-key-pair`.
fn publishing_md_flow(major: &str) {
    let doc =
        std::fs::read_to_string(crate::second_hour::repo().join("docs/publishing.md")).unwrap();
    let s = Setup::new();
    let d = s.d();
    let cosign = Cosign::new(major, d, &s.registry);
    let work = d.join(format!("doc-{major}"));
    let bin = work.join(".bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(&cosign.binary, bin.join("cosign")).unwrap();
    std::fs::copy(s.config(), work.join("publish.yaml")).unwrap();
    let password = Path::new("cosign-test-password");
    let docker = cosign.home.join(".docker");
    let tuf = cosign.home.join(".sigstore/root");
    let env: [(&str, &Path); 5] = [
        ("HOME", cosign.home.as_path()),
        ("DOCKER_CONFIG", docker.as_path()),
        ("SSL_CERT_FILE", cosign.ca.as_path()),
        ("TUF_ROOT", tuf.as_path()),
        ("COSIGN_PASSWORD", password),
    ];
    let local = |b: &str| {
        b.replace(
            "registry.example.com/vendor/gpu-reporter@sha256:3f1c…",
            &s.first,
        )
    };
    let run = |first: &str| {
        crate::second_hour::sh(
            &work,
            &local(crate::second_hour::block(&doc, "sh", first)),
            &env,
        )
    };

    run("cosign generate-key-pair");
    assert!(work.join("cosign.key").is_file() && work.join("cosign.pub").is_file());
    let sign = match major {
        "v2" => "cosign sign --key cosign.key --tlog-upload=false",
        _ => "cosign sign --key cosign.key --use-signing-config=false --tlog-upload=false",
    };
    run(sign);
    let out = run("cosign verify --key cosign.pub");
    let (_, digest) = s.first.split_once('@').unwrap();
    let pulled = &out[out.rfind("{\n  \"plugin\"").expect("plugin pull's JSON")..];
    let pulled: serde_json::Value = serde_json::from_str(pulled).unwrap();
    assert_eq!(pulled["digest"], digest, "{out}");
    assert_eq!(pulled["signature"]["verified"], true, "{out}");
    let format = if major == "v2" {
        "cosign-sig"
    } else {
        "sigstore-bundle"
    };
    assert_eq!(pulled["signature"]["format"], format, "{out}");
    // cosign's verify passed (the block runs under errexit); v2's prints
    // the digest it checked, before the pull.
    if major == "v2" {
        assert!(
            out[..out.rfind("{\n  \"plugin\"").unwrap()].contains(digest),
            "{out}"
        );
    }

    // The openssl key: refused by cosign as the doc says, then imported.
    run("openssl genpkey");
    // v3 asks Sigstore's TUF for a signing config before it reads the key,
    // unless told to use none.
    let mut args = vec!["sign", "--key", "vendor.key", "--yes"];
    if major != "v2" {
        args.extend(["--use-signing-config=false", "--tlog-upload=false"]);
    }
    args.push(&s.first);
    let refused = cosign.fails(&work, &args);
    assert!(
        refused.contains("unsupported pem type: PRIVATE KEY"),
        "{refused}"
    );
    run("cosign import-key-pair --key vendor.key");
    assert!(work.join("import-cosign.key").is_file() && work.join("import-cosign.pub").is_file());
    // The same public key (the base64 of the PEM, without its lines'
    // breaks and armour).
    let body = |f: &str| -> String {
        std::fs::read_to_string(work.join(f))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect()
    };
    assert_eq!(body("import-cosign.pub"), body("vendor.pub"));
}

#[test]
fn publishing_md_signs_and_verifies_with_cosign_v2_as_written() {
    publishing_md_flow("v2");
}

#[test]
fn publishing_md_signs_and_verifies_with_cosign_v3_as_written() {
    publishing_md_flow("v3");
}

/// `cosign verify` with a key, offline (no Rekor).
fn verify<'a>(key: &'a Path, reference: &'a str) -> [&'a str; 5] {
    [
        "verify",
        "--key",
        key.to_str().unwrap(),
        "--insecure-ignore-tlog=true",
        reference,
    ]
}

#[test]
fn cosign_v2_verifies_what_nodestatus_signs_and_the_reverse() {
    interop("v2");
}

#[test]
fn cosign_v3_verifies_what_nodestatus_signs_and_the_reverse() {
    interop("v3");
}

/// What cosign v3 does by default, pinned so that a change on either side
/// is seen. Its default (`--new-bundle-format`, `--use-signing-config`)
/// needs Sigstore's TUF repository and Rekor, so it is run here in its
/// offline form, `--use-signing-config=false --tlog-upload=false`, which
/// writes the same layout: a Sigstore bundle (a DSSE envelope of an in-toto
/// statement) as an OCI 1.1 referrer of the artifact. docker-registry 2.8
/// has no referrers API, so cosign lists it in an index under the
/// referrers tag `sha256-<hex>`; go-containerregistry's registry lists it
/// through its API, and no such tag is written. No `.sig` tag is written.
/// nodestatus reads that bundle and verifies it with the key (and refuses
/// another key); what it verified is cached, so a start with the registry
/// down verifies it again. cosign v3's own verify then looks at the bundles
/// only, so a nodestatus signature beside one verifies only with
/// `--new-bundle-format=false`.
#[test]
fn cosign_v3_by_default_attaches_a_sigstore_bundle_as_a_referrer_which_nodestatus_verifies() {
    cosign_v3_bundle(Api::TagScheme);
}

/// The same on a registry with the referrers API.
#[test]
fn cosign_v3_bundle_is_found_through_the_referrers_api() {
    cosign_v3_bundle(Api::Referrers);
}

fn cosign_v3_bundle(api: Api) {
    let mut s = Setup::on(api);
    let dir = s.d().to_owned();
    let d = dir.as_path();
    let cosign = Cosign::new("v3", d, &s.registry);
    let (cosign_key, cosign_pub) = cosign_key_pair(&cosign, &d.join("cosign-keys"));
    let key = cosign_key.to_str().unwrap();
    let (_, other_pub) = key_pair(d, "other");

    // `--tlog-upload=false` alone is refused: it goes with a signing config.
    let refused = cosign.fails(
        d,
        &[
            "sign",
            "--key",
            key,
            "--tlog-upload=false",
            "--yes",
            &s.first,
        ],
    );
    assert!(
        refused.contains(
            "--tlog-upload=false is not supported with --signing-config or --use-signing-config"
        ),
        "{refused}"
    );

    cosign.ok(
        d,
        &[
            "sign",
            "--key",
            key,
            "--use-signing-config=false",
            "--tlog-upload=false",
            "--yes",
            &s.first,
        ],
    );
    check_bundle_layout(&s, api, BUNDLE_MEDIA_TYPE);

    // cosign verifies its bundle offline; so does nodestatus, with the key
    // only, and refuses another key naming what it checked.
    cosign.ok(d, &verify(&cosign_pub, &s.first));
    let signature = s.pull(&s.first, &cosign_pub).unwrap();
    assert_eq!(signature["verified"], true, "{signature}");
    assert_eq!(signature["format"], "sigstore-bundle", "{signature}");
    let refused = s.pull(&s.first, &other_pub).unwrap_err();
    assert!(
        refused.contains("none of the 1 signature(s)")
            && refused.contains("0 in the cosign .sig tag, 1 in Sigstore bundles")
            && refused.contains("other.pub"),
        "{refused}"
    );
    // The same bundle does not sign the second artifact.
    let refused = s.pull(&s.second, &cosign_pub).unwrap_err();
    assert!(refused.contains("is not signed"), "{refused}");

    // A nodestatus signature beside the bundle: cosign v3 checks only the
    // bundles unless told otherwise; nodestatus reads both.
    let (vendor_key, vendor_pub) = key_pair(d, "vendor");
    s.signed(&s.first, &vendor_key);
    assert_eq!(s.pull(&s.first, &vendor_pub).unwrap()["verified"], true);
    assert_eq!(s.pull(&s.first, &cosign_pub).unwrap()["verified"], true);
    let refused = s.pull(&s.first, &other_pub).unwrap_err();
    assert!(
        refused.contains("none of the 2 signature(s)")
            && refused.contains("1 in the cosign .sig tag, 1 in Sigstore bundles"),
        "{refused}"
    );
    cosign.fails(d, &verify(&vendor_pub, &s.first));
    let mut classic = verify(&vendor_pub, &s.first).to_vec();
    classic.insert(1, "--new-bundle-format=false");
    cosign.ok(d, &classic);

    // Verified once, cached, and verified again with the registry down
    // (last: the referrers registry keeps nothing over a restart).
    fetch_then_offline(&mut s, &cosign_pub, &other_pub);
}

/// cosign v2 writes the same bundle with `--new-bundle-format` (but labels
/// the referrers index entry with the empty config's type): nodestatus
/// verifies it too. (cosign v2's own verify of it needs Sigstore's trusted
/// root, from the internet.)
#[test]
fn cosign_v2_new_bundle_format_is_verified_too() {
    cosign_v2_bundle(Api::TagScheme);
}

/// The same on a registry with the referrers API.
#[test]
fn cosign_v2_new_bundle_format_is_found_through_the_referrers_api() {
    cosign_v2_bundle(Api::Referrers);
}

fn cosign_v2_bundle(api: Api) {
    let mut s = Setup::on(api);
    let d = s.d();
    let cosign = Cosign::new("v2", d, &s.registry);
    let (cosign_key, cosign_pub) = cosign_key_pair(&cosign, &d.join("cosign-keys"));
    let (_, other_pub) = key_pair(d, "other");
    cosign.ok(
        d,
        &[
            "sign",
            "--key",
            cosign_key.to_str().unwrap(),
            "--new-bundle-format=true",
            "--tlog-upload=false",
            "--yes",
            &s.first,
        ],
    );
    check_bundle_layout(&s, api, "application/vnd.oci.empty.v1+json");
    let signature = s.pull(&s.first, &cosign_pub).unwrap();
    assert_eq!(signature["verified"], true, "{signature}");
    assert_eq!(signature["format"], "sigstore-bundle", "{signature}");
    let refused = s.pull(&s.first, &other_pub).unwrap_err();
    assert!(
        refused.contains("0 in the cosign .sig tag, 1 in Sigstore bundles"),
        "{refused}"
    );
    fetch_then_offline(&mut s, &cosign_pub, &other_pub);
}

const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// How the first artifact's bundle is listed, and what it is, as cosign
/// writes them: on docker-registry, the referrers API answers 404 and an
/// index at the referrers tag `sha256-<hex>` lists it (its entry labelled
/// `entry_type`); on go-containerregistry's registry, no such tag is
/// written and the referrers API lists it (the entry labelled with the
/// config's type, as that registry does). Then the referrer manifest and
/// its bundle.
fn check_bundle_layout(s: &Setup, api: Api, entry_type: &str) {
    let (_, digest) = s.first.split_once('@').unwrap();
    let referrers_tag = digest_tag(&s.first);
    let index = match api {
        Api::TagScheme => {
            assert_eq!(s.referrers_api(&s.first), None);
            assert_eq!(s.tags(), ["1.0.0", "2.0.0", referrers_tag.as_str()]);
            s.manifest(&referrers_tag)
        }
        Api::Referrers => {
            assert_eq!(s.tags(), ["1.0.0", "2.0.0"]);
            let index = s.referrers_api(&s.first).expect("a referrers API");
            assert_eq!(index["manifests"].as_array().unwrap().len(), 1, "{index}");
            index
        }
    };
    let entry_type = match api {
        Api::TagScheme => entry_type,
        Api::Referrers => "application/vnd.oci.empty.v1+json",
    };
    assert_eq!(
        index["mediaType"], "application/vnd.oci.image.index.v1+json",
        "{index}"
    );
    assert_eq!(index["manifests"][0]["artifactType"], entry_type, "{index}");
    let referrer = s.blob(index["manifests"][0]["digest"].as_str().unwrap());
    assert_eq!(referrer["artifactType"], BUNDLE_MEDIA_TYPE, "{referrer}");
    assert_eq!(
        referrer["config"]["mediaType"], "application/vnd.oci.empty.v1+json",
        "{referrer}"
    );
    assert_eq!(
        referrer["layers"][0]["mediaType"], BUNDLE_MEDIA_TYPE,
        "{referrer}"
    );
    assert_eq!(referrer["subject"]["digest"], digest, "{referrer}");
    assert_eq!(
        referrer["annotations"]["dev.sigstore.bundle.content"], "dsse-envelope",
        "{referrer}"
    );
    assert_eq!(
        referrer["annotations"]["dev.sigstore.bundle.predicateType"],
        "https://sigstore.dev/cosign/sign/v1",
        "{referrer}"
    );
    let bundle = s.blob(referrer["layers"][0]["digest"].as_str().unwrap());
    assert_eq!(bundle["mediaType"], BUNDLE_MEDIA_TYPE, "{bundle}");
    assert_eq!(
        bundle["dsseEnvelope"]["payloadType"], "application/vnd.in-toto+json",
        "{bundle}"
    );
    assert!(bundle.get("messageSignature").is_none(), "{bundle}");
    assert!(
        bundle["verificationMaterial"]["publicKey"].is_object(),
        "{bundle}"
    );
}

/// The library's `Fetcher` on the first artifact: fetched and verified by
/// its bundle, then, with the registry stopped, served from the cache and
/// verified again offline (refused with another key).
fn fetch_then_offline(s: &mut Setup, key: &Path, other: &Path) {
    use nodestatus_registry::{Cache, Client, Fetcher, Reference};
    let fetcher = Fetcher::new(
        Client::new(s.registry.registries()).unwrap(),
        Cache::open(s.d().join("cache")).unwrap(),
    );
    let reference = Reference::parse(&s.first).unwrap();
    let key = PublicKey::read(key).unwrap();
    let other = PublicKey::read(other).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let fetched = rt
        .block_on(fetcher.fetch(&reference, 64 << 20, Some(&key)))
        .unwrap();
    assert!(fetched.verified.is_some());
    s.registry.stop();
    let offline = fetcher
        .fetch_cached(&reference, 64 << 20, Some(&key))
        .unwrap();
    assert_eq!(offline.origin, nodestatus_registry::Origin::Cache);
    assert_eq!(offline.verified, fetched.verified);
    let refused = fetcher
        .fetch_cached(&reference, 64 << 20, Some(&other))
        .unwrap_err();
    assert_eq!(refused.kind(), "bad-signature", "{refused}");
    s.registry.restart();
}
