//! The fuzz targets of the keyless material's binary and text parts (see
//! `nodestatus_fuzz` and `crate::fuzz`): a certificate, its embedded SCT
//! list, and a transparency log checkpoint, each through the checks that
//! read it.

use std::path::Path;

use x509_cert::Certificate;
use x509_cert::der::Decode as _;
use x509_cert::der::asn1::OctetString;
use x509_cert::ext::Extension;

use super::cert::{check_chain, check_scts, leaf_key};
use super::tests::{EMAIL, GITHUB, root};
use super::tlog::check_checkpoint;
use super::*;
use crate::fuzz::corpus;

/// The keyless fixtures' root with CT logs: the tlog's key under the log
/// ids of the first SCTs of the public certificates of the `sct-list`
/// seeds, so that their SCTs reach the signature check.
fn root_with_ct_logs() -> TrustedRoot {
    let mut r: serde_json::Value = serde_json::from_slice(include_bytes!(
        "../../tests/fixtures/keyless/trusted_root.json"
    ))
    .unwrap();
    let log = r["tlogs"][0].clone();
    r["ctlogs"] = [
        "KXm+8J45OSHwVnOfY6V35b5XfZxgCvj5TV0mXCVdx4Q=",
        "7s3QZNXbGs7FXLedtM0TojKHRny87N7DUUhZRnEftZs=",
    ]
    .iter()
    .map(|id| {
        let mut l = log.clone();
        l["logId"]["keyId"] = (*id).into();
        l
    })
    .collect();
    TrustedRoot::from_json(Path::new("/fuzz/ct.json"), &serde_json::to_vec(&r).unwrap()).unwrap()
}

/// The tlog entry of a keyless fixture bundle, as JSON.
fn fixture_entry(bundle: &[u8]) -> serde_json::Value {
    let b: serde_json::Value = serde_json::from_slice(bundle).unwrap();
    b["verificationMaterial"]["tlogEntries"][0].clone()
}

/// The email fixture's certificate and integrated time.
fn email_leaf() -> (Certificate, i64) {
    let b: serde_json::Value = serde_json::from_slice(EMAIL).unwrap();
    let der = text::b64(
        b["verificationMaterial"]["certificate"]["rawBytes"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let time = fixture_entry(EMAIL)["integratedTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    (Certificate::from_der(&der).unwrap(), time)
}

#[test]
fn fuzz_certificate() {
    // A bundle's certificate: its identity, chain, SCTs and key.
    let (root, with_ct) = (root(), root_with_ct_logs());
    let (_, time) = email_leaf();
    nodestatus_fuzz::run("certificate", &corpus("certificate"), |bytes| {
        let leaf = Certificate::from_der(bytes)
            .map_err(|e| Error::Material(format!("its certificate is unreadable: {e}")))?;
        let _ = Identity::of(&leaf, time, 0);
        let _ = check_scts(&with_ct, &leaf);
        let _ = leaf_key(&leaf);
        check_chain(&root, &leaf, time)
    });
}

#[test]
fn fuzz_sct_list() {
    // The bytes as the SCT list extension of the email fixture's
    // certificate. Passed: the list was read (whether an SCT verifies is
    // the other tests' business).
    let with_ct = root_with_ct_logs();
    let (leaf, _) = email_leaf();
    nodestatus_fuzz::run("sct-list", &corpus("sct-list"), |bytes| {
        let mut leaf = leaf.clone();
        let sct = Extension {
            extn_id: ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.2"),
            critical: false,
            extn_value: OctetString::new(bytes).map_err(|e| Error::Sct(e.to_string()))?,
        };
        leaf.tbs_certificate
            .extensions
            .get_or_insert_with(Vec::new)
            .push(sct);
        match check_scts(&with_ct, &leaf) {
            Err(Error::Sct(why)) if why.contains("unreadable") => Err(Error::Sct(why)),
            _ => Ok(()),
        }
    });
}

#[test]
fn fuzz_checkpoint() {
    // A checkpoint, for the GitHub fixture's proof (tree size 2).
    let root = root();
    let proof = &fixture_entry(GITHUB)["inclusionProof"];
    let size: u64 = proof["treeSize"].as_str().unwrap().parse().unwrap();
    let root_hash: [u8; 32] = text::b64(proof["rootHash"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    nodestatus_fuzz::run("checkpoint", &corpus("checkpoint"), |bytes| {
        let text =
            std::str::from_utf8(bytes).map_err(|e| LogError::CheckpointMalformed(e.to_string()))?;
        check_checkpoint(&root.tlogs[0], text, size, &root_hash)
    });
}
