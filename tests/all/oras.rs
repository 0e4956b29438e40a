//! The real ORAS CLI (oras 1.3.6, built from its Go module by
//! `scripts/ensure-registries.sh oras`) and nodestatus on the same real
//! registries, both ways, as docs/publishing.md's "Push with oras" writes
//! it (its blocks run as written):
//!
//! - a component pushed by `oras push` with the CNCF Wasm media types and
//!   annotations, then signed by real cosign (v2's `.sig` tag on Debian's
//!   docker-registry 2.8 with TLS and htpasswd; v3's Sigstore bundle on
//!   go-containerregistry's registry, found through its referrers API), is
//!   pulled and verified by `nodestatus plugin pull` (oras's digest, the
//!   file's bytes), and refused with another key; `nodestatus plugin sign`
//!   signs it beside cosign, and both keys verify;
//! - what `nodestatus plugin push` writes is read by `oras manifest fetch`,
//!   and `oras blob fetch` gets the component byte for byte (`oras pull`
//!   saves nothing of it: its layer has no file name);
//! - what oras pushes without those media types is refused by `plugin
//!   pull`, saying why.
//!
//! oras is given the registry's CA with `--ca-file` and the credentials with
//! `--registry-config` (a docker config.json), as an operator gives them,
//! and a `HOME` of its own, so that nothing of the machine's is read.
//!
//! An oras that is not built fails the test with the command that builds
//! it; `scripts/test.sh` builds it and names it in `NODESTATUS_ORAS`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nodestatus_registry::Digest;
use nodestatus_tests::built;
use nodestatus_tests::registry::{ensured_tool, key_pair};

use crate::cosign::{Api, Cosign, Setup, classic_sign_flags, cosign_key_pair, nodestatus, shown};
use crate::second_hour::{block, repo, sh};

const WORLD: &str = "nodestatus:plugin/plugin@0.2.1";
/// The probe's version, in its metadata (and the doc's `1.4.0`).
const VERSION: &str = "1.0.0";
const CNCF_CONFIG: &str = "application/vnd.wasm.config.v0+json";
const CNCF_LAYER: &str = "application/wasm";
const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
const TAR_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";

/// oras (v1.3.6): `$NODESTATUS_ORAS`, else where
/// `scripts/ensure-registries.sh oras` leaves it.
fn oras_binary() -> PathBuf {
    ensured_tool("NODESTATUS_ORAS", "oras", "1.3.6")
}

/// oras for one test's registry: its CA and credentials as flags, and a
/// `HOME` of its own. The directory also gets what the doc's blocks use:
/// `dist/probe.wasm` (the doc's `gpu-reporter`), `registry-ca.pem`, and
/// oras on the `PATH` of [`sh`].
struct Oras {
    binary: PathBuf,
    home: PathBuf,
    flags: Vec<String>,
}

impl Oras {
    fn new(s: &Setup) -> Self {
        let d = s.d();
        let home = d.join("oras-home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(d.join("dist")).unwrap();
        std::fs::copy(built::PROBE, d.join("dist/probe.wasm")).unwrap();
        std::fs::copy(s.registry.ca(), d.join("registry-ca.pem")).unwrap();
        let binary = oras_binary();
        let bin = d.join(".bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(&binary, bin.join("oras")).unwrap();
        let mut flags = vec!["--ca-file".to_owned(), "registry-ca.pem".to_owned()];
        if s.registry.options.auth {
            flags.extend(["--registry-config".to_owned(), "auth.json".to_owned()]);
        }
        Self {
            binary,
            home,
            flags,
        }
    }

    /// `oras COMMAND FLAGS ARGS` in `dir` (COMMAND: `push`, `manifest
    /// fetch`…; FLAGS: the CA and the credentials).
    fn run(&self, dir: &Path, command: &[&str], args: &[&str]) -> Output {
        Command::new(&self.binary)
            .args(command)
            .args(&self.flags)
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env_remove("DOCKER_CONFIG")
            .output()
            .unwrap()
    }

    /// [`Oras::run`], which must succeed; its stdout.
    fn ok(&self, dir: &Path, command: &[&str], args: &[&str]) -> String {
        let out = self.run(dir, command, args);
        assert!(
            out.status.success(),
            "oras {command:?} {args:?} failed: {}",
            shown(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The manifest at `reference`, as `oras manifest fetch` prints it.
    fn manifest(&self, dir: &Path, reference: &str) -> serde_json::Value {
        serde_json::from_str(&self.ok(dir, &["manifest", "fetch"], &[reference])).unwrap()
    }

    /// docs/publishing.md's `sh` block that starts with `first`, run as
    /// written with bash in the test's directory, for the test's registry
    /// (`registry.example.com`), repository (`vendor/gpu-reporter`),
    /// component (`gpu-reporter`: the probe) and credentials; `extra`
    /// replaces more. Its stdout.
    fn doc_block(
        &self,
        s: &Setup,
        first: &str,
        repository: &str,
        extra: &[(&str, &str)],
    ) -> String {
        let doc = std::fs::read_to_string(repo().join("docs/publishing.md")).unwrap();
        let auth = s.d().join("auth.json");
        let mut script = block(&doc, "sh", first)
            .replace("registry.example.com", &s.registry.host())
            .replace("vendor/gpu-reporter", repository)
            .replace("gpu-reporter", "probe")
            .replace("1.4.0", VERSION)
            .replace("/home/vendor/.docker/config.json", auth.to_str().unwrap());
        for (from, to) in extra {
            script = script.replace(from, to);
        }
        sh(s.d(), &script, &[("HOME", self.home.as_path())])
    }
}

/// `nodestatus plugin pull REFERENCE [--key KEY]` with the setup's config:
/// its JSON, or the error it was refused with.
fn pull(s: &Setup, reference: &str, key: Option<&Path>) -> Result<serde_json::Value, String> {
    let mut args = vec!["plugin", "pull", reference, "--config", s.config()];
    if let Some(key) = key {
        args.extend(["--key", key.to_str().unwrap()]);
    }
    let out = nodestatus(&args);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&out.stdout).unwrap())
}

/// `manifest`'s one layer, after checking that it is the layout of `plugin
/// push`: an OCI manifest, a CNCF Wasm config, one `application/wasm`
/// layer of `layer_digest`, and the world and version annotations.
fn cncf_layer<'a>(manifest: &'a serde_json::Value, layer_digest: &Digest) -> &'a serde_json::Value {
    assert_eq!(
        manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json",
        "{manifest}"
    );
    assert_eq!(manifest["config"]["mediaType"], CNCF_CONFIG, "{manifest}");
    assert_eq!(
        manifest["layers"].as_array().unwrap().len(),
        1,
        "{manifest}"
    );
    let layer = &manifest["layers"][0];
    assert_eq!(layer["mediaType"], CNCF_LAYER, "{manifest}");
    assert_eq!(layer["digest"], layer_digest.as_str(), "{manifest}");
    let annotations = &manifest["annotations"];
    assert_eq!(
        annotations["io.nodestatus.plugin.world"], WORLD,
        "{manifest}"
    );
    assert_eq!(
        annotations["org.opencontainers.image.version"], VERSION,
        "{manifest}"
    );
    layer
}

#[test]
fn oras_push_signed_by_cosign_v2_is_pulled_and_verified_here() {
    oras_push_signed_by_cosign(Api::TagScheme, "v2");
}

#[test]
fn oras_push_signed_by_cosign_v3_is_pulled_and_verified_through_the_referrers_api() {
    oras_push_signed_by_cosign(Api::Referrers, "v3");
}

/// The doc's `oras push` (on `api`'s registry), signed by cosign `major`:
/// v2 in its classic `.sig` layout, v3 as a Sigstore bundle (its default,
/// offline).
fn oras_push_signed_by_cosign(api: Api, major: &str) {
    let s = Setup::on(api);
    let d = s.d();
    let oras = Oras::new(&s);
    let host = s.registry.host();
    let component = std::fs::read(built::PROBE).unwrap();

    let out = oras.doc_block(
        &s,
        "printf '{\"architecture\":\"wasm\"",
        "vendor/oras/probe",
        &[],
    );
    let digest = out
        .lines()
        .find_map(|l| l.strip_prefix("Digest: "))
        .unwrap_or_else(|| panic!("oras push printed no digest: {out}"));
    let pinned = format!("{host}/vendor/oras/probe@{digest}");

    // The layout oras wrote: nodestatus's media types and annotations, and
    // oras's own file name and time.
    let manifest = oras.manifest(d, &pinned);
    let layer = cncf_layer(&manifest, &Digest::of(&component));
    assert_eq!(
        layer["annotations"]["org.opencontainers.image.title"], "dist/probe.wasm",
        "{manifest}"
    );
    assert!(
        manifest["annotations"]["org.opencontainers.image.created"].is_string(),
        "{manifest}"
    );

    // cosign signs oras's digest.
    let cosign = Cosign::new(major, d, &s.registry);
    let (cosign_key, cosign_pub) = cosign_key_pair(&cosign, &d.join("cosign-keys"));
    let mut sign = vec!["sign", "--key", cosign_key.to_str().unwrap()];
    let (flags, format): (&[&str], _) = match major {
        "v2" => (classic_sign_flags("v2"), "cosign-sig"),
        _ => (
            &["--use-signing-config=false", "--tlog-upload=false", "--yes"],
            "sigstore-bundle",
        ),
    };
    sign.extend(flags);
    sign.push(&pinned);
    cosign.ok(d, &sign);
    // v2 writes its `.sig` tag; v3 writes no tag on a registry with the
    // referrers API (the bundle is found through it). Sorted: docker-registry
    // lists tags in no set order.
    let tags = oras.ok(
        d,
        &["repo", "tags"],
        &[&format!("{host}/vendor/oras/probe")],
    );
    let sig_tag = format!("{}.sig", digest.replace(':', "-"));
    let expected = match major {
        "v2" => vec![VERSION, sig_tag.as_str()],
        _ => vec![VERSION],
    };
    let mut listed: Vec<&str> = tags.lines().collect();
    listed.sort();
    assert_eq!(listed, expected, "{tags}");

    // nodestatus pulls the tag as a node would: oras's digest, the
    // annotations, the file's bytes, cosign's signature.
    let tag = format!("{host}/vendor/oras/probe:{VERSION}");
    let pulled = pull(&s, &tag, Some(&cosign_pub)).unwrap();
    assert_eq!(pulled["digest"], digest, "{pulled}");
    assert_eq!(pulled["layout"], "Cncf", "{pulled}");
    assert_eq!(pulled["world"], WORLD, "{pulled}");
    assert_eq!(pulled["version"], VERSION, "{pulled}");
    assert_eq!(pulled["bytes"], component.len(), "{pulled}");
    assert_eq!(pulled["sha256"], Digest::of(&component).hex(), "{pulled}");
    assert_eq!(pulled["metadata"]["name"], "probe", "{pulled}");
    assert_eq!(pulled["metadata"]["version"], VERSION, "{pulled}");
    assert_eq!(pulled["signature"]["verified"], true, "{pulled}");
    assert_eq!(pulled["signature"]["format"], format, "{pulled}");

    // Another key is refused.
    let (_, other_pub) = key_pair(d, "other");
    let refused = pull(&s, &tag, Some(&other_pub)).unwrap_err();
    assert!(
        refused.contains("would be refused")
            && refused.contains("none of the 1 signature(s)")
            && refused.contains("other.pub"),
        "{refused}"
    );

    // `nodestatus plugin sign` signs oras's digest too (step 4), beside
    // cosign's signature; each key verifies.
    let (vendor_key, vendor_pub) = key_pair(d, "vendor");
    s.signed(&pinned, &vendor_key);
    for key in [&vendor_pub, &cosign_pub] {
        let pulled = pull(&s, &tag, Some(key)).unwrap();
        assert_eq!(pulled["digest"], digest, "{pulled}");
        assert_eq!(pulled["signature"]["verified"], true, "{pulled}");
    }
}

/// The doc's reverse block on what `plugin push` wrote (docker-registry,
/// TLS and htpasswd): `oras manifest fetch` shows the layout, `oras blob
/// fetch` of the layer's digest gets the component byte for byte; `oras
/// pull` saves nothing, saying why.
#[test]
fn oras_reads_what_nodestatus_pushes_byte_for_byte() {
    let s = Setup::new();
    let d = s.d();
    let oras = Oras::new(&s);
    let component = std::fs::read(built::PROBE).unwrap();
    let layer_digest = Digest::of(&component);

    let out = oras.doc_block(
        &s,
        "oras manifest fetch",
        "vendor/probe",
        &[("sha256:7d2a…", layer_digest.as_str())],
    );
    let manifest: serde_json::Value = serde_json::from_str(&out).unwrap();
    let layer = cncf_layer(&manifest, &layer_digest);
    assert!(layer.get("annotations").is_none(), "{manifest}");
    assert_eq!(std::fs::read(d.join("probe.wasm")).unwrap(), component);
    // The same manifest by the digest `plugin push` printed.
    assert_eq!(oras.manifest(d, &s.first)["layers"], manifest["layers"]);

    let pulled = oras.ok(d, &["pull"], &["--output", "pulled", &s.first]);
    assert!(
        pulled.contains("Skipped pulling layers without file name"),
        "{pulled}"
    );
    let saved = std::fs::read_dir(d.join("pulled")).map_or(0, |files| files.count());
    assert_eq!(saved, 0, "oras pull saved files: {pulled}");
}

/// What oras pushes without the CNCF media types, as a vendor may try it
/// first, is refused by `plugin pull` as a node refuses it, saying why.
#[test]
fn an_oras_push_in_another_layout_is_refused_saying_why() {
    let s = Setup::new();
    let d = s.d();
    let oras = Oras::new(&s);
    std::fs::write(
        d.join("config.json"),
        r#"{"architecture":"wasm","os":"wasip2"}"#,
    )
    .unwrap();
    let no_wasm_config = format!(
        "not a Wasm component artifact: its config media type {EMPTY_CONFIG} is neither {CNCF_CONFIG} nor application/vnd.wasm.config.v1+json"
    );
    // `oras push REF:TAG ARGS` writes `config` and `layer` (and the
    // artifact type `artifact_type`, when one is written), and `plugin
    // pull` refuses it with `why`.
    let refused = |tag: &str, args: &[&str], artifact_type, (config, layer), why: &str| {
        let reference = format!("{}/vendor/oras/probe:{tag}", s.registry.host());
        let mut push = vec![reference.as_str()];
        push.extend(args);
        oras.ok(d, &["push"], &push);
        let manifest = oras.manifest(d, &reference);
        if let Some(artifact_type) = artifact_type {
            assert_eq!(manifest["artifactType"], artifact_type, "{manifest}");
        }
        assert_eq!(manifest["config"]["mediaType"], config, "{manifest}");
        assert_eq!(manifest["layers"][0]["mediaType"], layer, "{manifest}");
        let refused = pull(&s, &reference, None).unwrap_err();
        assert!(
            refused.contains(&format!("{reference} would be refused")) && refused.contains(why),
            "{tag}: {refused}"
        );
    };
    // `oras push REF FILE`: oras's defaults.
    refused(
        "plain",
        &["dist/probe.wasm"],
        Some("application/vnd.unknown.artifact.v1"),
        (EMPTY_CONFIG, TAR_LAYER),
        &no_wasm_config,
    );
    // The artifact type is not the config's media type.
    refused(
        "artifact-type",
        &[
            "--artifact-type",
            CNCF_CONFIG,
            "dist/probe.wasm:application/wasm",
        ],
        Some(CNCF_CONFIG),
        (EMPTY_CONFIG, CNCF_LAYER),
        &no_wasm_config,
    );
    // The config's type, but not the layer's.
    refused(
        "layer-type",
        &[
            "--config",
            "config.json:application/vnd.wasm.config.v0+json",
            "dist/probe.wasm",
        ],
        None,
        (CNCF_CONFIG, TAR_LAYER),
        &format!(
            "not a Wasm component artifact: its layer media type {TAR_LAYER} does not go with the config media type {CNCF_CONFIG}"
        ),
    );
}
