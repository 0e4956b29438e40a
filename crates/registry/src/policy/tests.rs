//! The policy module's unit tests.

use std::collections::BTreeMap;
use std::io::Write as _;

use x509_cert::Certificate;
use x509_cert::der::asn1::OctetString;
use x509_cert::der::{Decode as _, Encode as _};

use super::*;
use crate::bundle;
use crate::keyless::Identity;
use crate::keyless::tests::{DIGEST, EMAIL, GITHUB, issuer};

fn reference() -> Reference {
    Reference::parse("127.0.0.1:5000/vendor/probe:1.0.0").unwrap()
}

fn digest() -> Digest {
    DIGEST.trim().parse().unwrap()
}

fn root_file() -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(include_bytes!(
        "../../tests/fixtures/keyless/trusted_root.json"
    ))
    .unwrap();
    f
}

fn policy(yaml: &str) -> Result<Policy> {
    let root = root_file();
    let file: PolicyFile = serde_yaml::from_str(yaml).unwrap();
    Policy::new(&file, Some(root.path()), "verify.")
}

fn signatures(bundles: &[&[u8]]) -> Vec<StoredSignature> {
    bundles
        .iter()
        .flat_map(|b| bundle::parse(b).unwrap().signatures)
        .collect()
}

fn met(p: &Policy, bundles: &[&[u8]]) -> Result<Vec<StoredSignature>> {
    p.evaluate(&reference(), &digest(), &signatures(bundles), &[])
}

fn email_rule(subject: &str) -> String {
    format!(
        "{{kind: genericIssuer, issuer: '{}', subject: {subject}}}",
        issuer("/email")
    )
}

fn github_rule(subject: &str) -> String {
    format!(
        "{{kind: genericIssuer, issuer: '{}', subject: {subject}}}",
        issuer("/github")
    )
}

#[test]
fn a_generic_issuer_matches_the_issuer_and_the_exact_subject() {
    let p = policy(&format!(
        "allOf: [{}]",
        email_rule("{equal: alice@example.com}")
    ))
    .unwrap();
    assert_eq!(met(&p, &[EMAIL, GITHUB]).unwrap().len(), 1);
    let err = met(&p, &[GITHUB]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("allOf[0] (genericIssuer")
            && text.contains("with subject alice@example.com) is matched by no signature")
            && text
                .contains("a keyless signature by subject https://github.com/vendor/gpu-setter/"),
        "{text}"
    );
    assert_eq!(err.kind(), "bad-signature");
    // Another subject, or the same subject from another issuer.
    let p = policy(&format!(
        "allOf: [{}]",
        email_rule("{equal: bob@example.com}")
    ))
    .unwrap();
    assert!(met(&p, &[EMAIL]).is_err());
    let p = policy(&format!(
        "allOf: [{}]",
        github_rule("{equal: alice@example.com}")
    ))
    .unwrap();
    assert!(met(&p, &[EMAIL]).is_err());
}

#[test]
fn a_url_prefix_gets_a_trailing_slash() {
    let subject = |prefix: &str| github_rule(&format!("{{urlPrefix: '{prefix}'}}"));
    for (prefix, matches) in [
        ("https://github.com/vendor", true),
        ("https://github.com/vendor/", true),
        ("https://github.com/vendor/gpu-setter", true),
        // Without the rule these would match the subject
        // https://github.com/vendor/gpu-setter/...
        ("https://github.com/vend", false),
        ("https://github.com/vendor/gpu", false),
        ("https://github.com/other", false),
    ] {
        let p = policy(&format!("allOf: [{}]", subject(prefix))).unwrap();
        assert_eq!(met(&p, &[GITHUB]).is_ok(), matches, "{prefix}");
    }
}

/// The real Fulcio's GitHub certificate, its issuer made GitHub's
/// (Fulcio writes the issuer of the token it was given, and no test
/// issuer here can be https://token.actions.githubusercontent.com);
/// its signature no longer verifies, so it is matched as an identity,
/// not verified.
fn github_actions_identity() -> Identity {
    let material =
        &serde_json::from_slice::<serde_json::Value>(GITHUB).unwrap()["verificationMaterial"];
    let der = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        material["certificate"]["rawBytes"].as_str().unwrap(),
    )
    .unwrap();
    let mut cert = Certificate::from_der(&der).unwrap();
    for e in cert.tbs_certificate.extensions.as_mut().unwrap() {
        match e.extn_id.to_string().as_str() {
            "1.3.6.1.4.1.57264.1.1" => {
                e.extn_value = OctetString::new(GITHUB_ACTIONS_ISSUER.as_bytes()).unwrap()
            }
            "1.3.6.1.4.1.57264.1.8" => {
                let utf8 = x509_cert::der::asn1::Utf8StringRef::new(GITHUB_ACTIONS_ISSUER).unwrap();
                e.extn_value = OctetString::new(utf8.to_der().unwrap()).unwrap()
            }
            _ => {}
        }
    }
    let cert = Certificate::from_der(&cert.to_der().unwrap()).unwrap();
    Identity::of(&cert, 0, 0).unwrap()
}

fn github_action(owner: &str, repo: Option<&str>) -> Constraint {
    let mut yaml = format!("{{kind: githubAction, owner: {owner}");
    if let Some(repo) = repo {
        yaml += &format!(", repo: {repo}");
    }
    yaml += "}";
    constraint(&serde_yaml::from_str(&yaml).unwrap(), "allOf[0]").unwrap()
}

#[test]
fn a_github_action_matches_the_owner_and_the_repository_of_githubs_issuer() {
    let evidence = Evidence {
        identity: Some(github_actions_identity()),
        annotations: Some(BTreeMap::new()),
        shown: String::new(),
    };
    let s = &signatures(&[GITHUB])[0];
    for (owner, repo, matches) in [
        ("vendor", None, true),
        ("vendor", Some("gpu-setter"), true),
        ("vendor", Some("gpu"), false),
        ("vendo", None, false),
        ("other", Some("gpu-setter"), false),
    ] {
        assert_eq!(
            evidence.matches(&github_action(owner, repo), s, &digest()),
            matches,
            "{owner} {repo:?}"
        );
    }
    // The real Fulcio's certificate names the workflow repository, but
    // its issuer is the test issuer: not a GitHub Action.
    let p = policy("allOf: [{kind: githubAction, owner: vendor}]").unwrap();
    let err = met(&p, &[GITHUB]).unwrap_err();
    assert!(
        err.to_string().contains("githubAction of owner vendor"),
        "{err}"
    );
    // An email subject from GitHub's issuer is not a workflow.
    let mut id = github_actions_identity();
    id.subject = "alice@example.com".into();
    let evidence = Evidence {
        identity: Some(id),
        ..evidence
    };
    assert!(!evidence.matches(&github_action("vendor", None), s, &digest()));
}

#[test]
fn all_of_and_any_of_count_the_entries_matched() {
    let alice = email_rule("{equal: alice@example.com}");
    let vendor = github_rule("{urlPrefix: 'https://github.com/vendor'}");
    let bob = email_rule("{equal: bob@example.com}");
    let both = format!("allOf: [{alice}, {vendor}]");
    let p = policy(&both).unwrap();
    assert_eq!(met(&p, &[EMAIL, GITHUB]).unwrap().len(), 2);
    let err = met(&p, &[EMAIL]).unwrap_err();
    assert!(err.to_string().contains("allOf[1]"), "{err}");
    let any =
        |n: u32| format!("anyOf: {{minimumMatches: {n}, signatures: [{alice}, {vendor}, {bob}]}}");
    assert!(met(&policy(&any(2)).unwrap(), &[EMAIL, GITHUB]).is_ok());
    let err = met(&policy(&any(2)).unwrap(), &[EMAIL]).unwrap_err();
    assert!(err.to_string().contains("anyOf needs 2 of ["), "{err}");
    assert!(err.to_string().contains(", 1 are"), "{err}");
    assert!(met(&policy(&any(1)).unwrap(), &[GITHUB]).is_ok());
    let err = met(&policy(&any(3)).unwrap(), &[EMAIL, GITHUB]).unwrap_err();
    assert!(err.to_string().contains("anyOf needs 3"), "{err}");
    // Both: each must hold.
    let p = policy(&format!(
        "allOf: [{alice}]\nanyOf: {{signatures: [{vendor}, {bob}]}}"
    ))
    .unwrap();
    assert!(met(&p, &[EMAIL, GITHUB]).is_ok());
    assert!(met(&p, &[EMAIL]).is_err());
    assert!(met(&p, &[GITHUB]).is_err());
    // Nothing found at all.
    let err = met(&p, &[]).unwrap_err();
    assert!(err.to_string().contains("no signature was found"), "{err}");
    assert_eq!(err.kind(), "unsigned");
}

#[test]
fn required_annotations_must_be_on_the_signature() {
    // The email bundle was signed with `cosign sign -a env=prod`.
    let rule = |annotations: &str| {
        format!(
            "allOf: [{{kind: genericIssuer, issuer: '{}', subject: {{equal: alice@example.com}}, annotations: {annotations}}}]",
            issuer("/email")
        )
    };
    assert!(met(&policy(&rule("{env: prod}")).unwrap(), &[EMAIL]).is_ok());
    let err = met(&policy(&rule("{env: dev}")).unwrap(), &[EMAIL]).unwrap_err();
    assert!(err.to_string().contains("and annotations env=dev"), "{err}");
    assert!(met(&policy(&rule("{env: prod, tier: gold}")).unwrap(), &[EMAIL]).is_err());
    // The GitHub bundle has none.
    let rule = format!(
        "allOf: [{{kind: genericIssuer, issuer: '{}', subject: {{urlPrefix: 'https://github.com/vendor'}}, annotations: {{env: prod}}}}]",
        issuer("/github")
    );
    assert!(met(&policy(&rule).unwrap(), &[GITHUB]).is_err());
}

#[test]
fn a_keyless_signature_of_another_digest_does_not_count() {
    let p = policy(&format!(
        "allOf: [{}]",
        email_rule("{equal: alice@example.com}")
    ))
    .unwrap();
    let err = p
        .evaluate(
            &reference(),
            &Digest::of(b"another"),
            &signatures(&[EMAIL]),
            &[],
        )
        .unwrap_err();
    assert!(err.to_string().contains("of another digest"), "{err}");
}

#[test]
fn a_pub_key_entry_matches_a_signature_by_that_key() {
    let public = include_str!("../../tests/fixtures/cosign-v3/cosign.pub");
    let digest: Digest = include_str!("../../tests/fixtures/cosign-v3/digest")
        .trim()
        .parse()
        .unwrap();
    let indent: String = public.lines().map(|l| format!("      {l}\n")).collect();
    let file: PolicyFile = serde_yaml::from_str(&format!(
        "allOf:\n  - kind: pubKey\n    owner: vendor\n    key: |\n{indent}"
    ))
    .unwrap();
    // No keyless entry: no trusted root needed.
    let p = Policy::new(&file, None, "verify.").unwrap();
    let key_signed = bundle::parse(include_bytes!("../../tests/fixtures/cosign-v3/bundle.json"))
        .unwrap()
        .signatures;
    assert_eq!(
        p.evaluate(&reference(), &digest, &key_signed, &[])
            .unwrap()
            .len(),
        1
    );
    let err = p
        .evaluate(&reference(), &digest, &signatures(&[EMAIL]), &[])
        .unwrap_err();
    assert!(err.to_string().contains("pubKey of vendor"), "{err}");
    assert!(
        err.to_string()
            .contains("not checked: the policy has no trustedRoot"),
        "{err}"
    );
}

#[test]
fn a_bad_policy_is_refused_naming_the_field() {
    let cases = [
        ("allOf: []", "verify.allOf: is empty"),
        ("{}", "verify: a signature policy needs allOf or anyOf"),
        (
            "anyOf: {minimumMatches: 0, signatures: [{kind: githubAction, owner: o}]}",
            "verify.anyOf.minimumMatches: 0 must be between 1 and the 1 signatures listed",
        ),
        (
            "anyOf: {minimumMatches: 2, signatures: [{kind: githubAction, owner: o}]}",
            "verify.anyOf.minimumMatches: 2 must be between 1 and the 1",
        ),
        (
            "allOf: [{kind: genericIssuer, issuer: i, subject: {urlPrefix: github.com/org}}]",
            "verify.allOf[0].subject.urlPrefix: \"github.com/org\" is not a URL",
        ),
        (
            "allOf: [{kind: githubAction, owner: o, repo: o/r}]",
            "verify.allOf[0].repo: \"o/r\" is not a repository name",
        ),
        (
            "allOf: [{kind: pubKey, key: nope}]",
            "verify.allOf[0].key: the key is not usable",
        ),
    ];
    for (yaml, wanted) in cases {
        let err = policy(yaml).unwrap_err();
        assert!(err.to_string().contains(wanted), "{yaml}: {err}");
    }
    // A keyless entry needs a trusted root.
    let file: PolicyFile = serde_yaml::from_str("allOf: [{kind: githubAction, owner: o}]").unwrap();
    let err = Policy::new(&file, None, "plugins.gpu.verify.").unwrap_err();
    assert!(
        err.to_string()
            .contains("plugins.gpu.verify.trustedRoot: is required"),
        "{err}"
    );
    // Kubewarden's kinds and fields only.
    for yaml in [
        "allOf: [{kind: certificate, certificate: x}]",
        "allOf: [{kind: githubAction, owner: o, repository: r}]",
        "allOf: [{kind: genericIssuer, issuer: i, subject: {regexp: '.*'}}]",
        "oneOf: []",
    ] {
        assert!(serde_yaml::from_str::<PolicyFile>(yaml).is_err(), "{yaml}");
    }
}
