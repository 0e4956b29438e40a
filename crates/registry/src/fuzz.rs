//! The fuzz targets of the bytes a registry, a token server or a signer
//! sends (see `nodestatus_fuzz`): each calls the function the fetcher
//! calls on those bytes. The certificate, SCT list and checkpoint targets
//! are in `keyless/fuzz.rs`, beside the checks they reach. The seeds are
//! in `fuzz-corpus/<target>/` (its README says where each comes from).

use std::error::Error;
use std::path::{Path, PathBuf};

use crate::artifact::Manifest;
use crate::bundle::{self, Index};
use crate::credentials::{self, Challenge};
use crate::keyless::{self, TrustedRoot};
use crate::reference::Digest;
use crate::signature::signed_bytes;

/// The result of one input: `Ok` when the parser took it.
type Outcome = Result<(), Box<dyn Error>>;

/// The seed corpus of `target`.
pub(crate) fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz-corpus")
        .join(target)
}

#[test]
fn fuzz_oci_manifest() {
    // What `Session::parse_manifest` reads, then the plugin layout.
    nodestatus_fuzz::run(
        "oci-manifest",
        &corpus("oci-manifest"),
        |bytes| -> Outcome {
            let manifest = Manifest::parse(bytes)??;
            let (_, layer) = manifest.component_layer()?;
            layer.digest()?;
            layer.size()?;
            Ok(())
        },
    );
}

#[test]
fn fuzz_oci_index() {
    // A referrers index (the API's answer, or the referrers tag's).
    nodestatus_fuzz::run("oci-index", &corpus("oci-index"), |bytes| -> Outcome {
        let index = Index::parse(bytes)?;
        let _ = index.is_oci_index();
        for (digest, _size) in index.bundle_entries() {
            let _ = digest.parse::<Digest>();
        }
        Ok(())
    });
}

#[test]
fn fuzz_bundle() {
    // A bundle layer's bytes: the bundle and its DSSE envelope, then each
    // signature as a policy checks it (its statement, and a keyless one's
    // material against the keyless fixtures' trusted root).
    let root = keyless::tests::root();
    let digest: Digest = keyless::tests::DIGEST.trim().parse().unwrap();
    nodestatus_fuzz::run("bundle", &corpus("bundle"), |bytes| -> Outcome {
        let parsed = bundle::parse(bytes)?;
        for s in &parsed.signatures {
            let _ = bundle::check_statement(&s.payload, &digest);
            if let Some(material) = &s.material {
                let _ = keyless::claimed_identity(material);
                let _ = keyless::verify(
                    &root,
                    &s.payload,
                    &signed_bytes(s),
                    &s.signature,
                    material,
                    s.format,
                );
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_dsse_statement() {
    // A DSSE payload: the in-toto statement a signature signs.
    let digest: Digest = keyless::tests::DIGEST.trim().parse().unwrap();
    nodestatus_fuzz::run("dsse-statement", &corpus("dsse-statement"), |bytes| {
        // `Err` says what it signs instead.
        bundle::check_statement(bytes, &digest).or_else(|what| match what.starts_with("sha256:") {
            true => Ok(()),
            false => Err(what),
        })
    });
}

#[test]
fn fuzz_trusted_root() {
    nodestatus_fuzz::run("trusted-root", &corpus("trusted-root"), |bytes| {
        TrustedRoot::from_json(Path::new("/fuzz/trusted_root.json"), bytes).map(drop)
    });
}

#[test]
fn fuzz_token_response() {
    // A token server's answer: its token, or (refused) its error body;
    // and a registry's `WWW-Authenticate` challenge.
    let challenge = Challenge {
        realm: "https://auth.example.com/token".into(),
        ..Challenge::default()
    };
    nodestatus_fuzz::run("token-response", &corpus("token-response"), |bytes| {
        let detail = credentials::error_detail(bytes);
        assert!(detail.chars().count() <= 300, "{detail}");
        if let Ok(header) = std::str::from_utf8(bytes) {
            let _ = Challenge::parse(header);
        }
        credentials::token_answer(bytes, &challenge, "registry.example.com").map(drop)
    });
}
