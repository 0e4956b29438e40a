//! Which signatures an artifact must carry, as Kubewarden's
//! `verification-config` writes it.
//!
//! ```yaml
//! allOf:                      # every entry matched by a signature
//!   - kind: githubAction
//!     owner: vendor           # the workflow's repository owner
//!     repo: gpu-setter        # optional: and its repository
//! anyOf:                      # at least minimumMatches (default 1) entries matched
//!   minimumMatches: 1
//!   signatures:
//!     - kind: genericIssuer
//!       issuer: https://accounts.example.com
//!       subject:
//!         equal: release@example.com     # or urlPrefix: https://ci.example.com/vendor
//!     - kind: pubKey
//!       key: |
//!         -----BEGIN PUBLIC KEY-----
//!         ...
//!       annotations:          # on any entry: required on the signature
//!         env: prod
//! ```
//!
//! As in Kubewarden:
//! - `pubKey` matches a signature that verifies with the key (cosign's
//!   `.sig` layout or a Sigstore bundle); `genericIssuer` and
//!   `githubAction` match a keyless signature that verified against the
//!   trusted root ([`crate::keyless`]);
//! - `subject.equal` is compared whole with the certificate's subject (its
//!   email or URI); `subject.urlPrefix` gets a trailing `/` when it has
//!   none, so `https://github.com/org` matches `https://github.com/org/...`
//!   and not `https://github.com/organization/...`;
//! - `githubAction` requires the issuer `https://token.actions.githubusercontent.com`,
//!   a `https://github.com/` URI subject, and the certificate's workflow
//!   repository (`owner/repo`) to have that owner (and repository, when
//!   given);
//! - `annotations` must all be on the signature with those values: the
//!   `optional` map of a `.sig` payload, or the subject's `annotations` in
//!   a bundle's in-toto statement (what `cosign sign -a KEY=VALUE` writes);
//! - a signature counts only when it signs the artifact's digest.
//!
//! [`Policy::evaluate`] says which signatures met it, or which entries no
//! signature matched and what each signature found was.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::client;
use crate::keyless::{self, Identity, TrustedRoot};
use crate::reference::{Digest, Reference};
use crate::signature::{self, PublicKey, StoredSignature};

/// The OIDC issuer of GitHub Actions' tokens.
pub const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// A policy as written: `allOf` and/or `anyOf`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyFile {
    /// Entries that must each be matched.
    #[serde(default)]
    pub all_of: Option<Vec<SignatureFile>>,
    /// Entries of which at least `minimumMatches` must be matched.
    #[serde(default)]
    pub any_of: Option<AnyOfFile>,
}

/// `anyOf:`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnyOfFile {
    /// How many entries must be matched (default 1).
    #[serde(default)]
    pub minimum_matches: Option<u32>,
    /// The entries.
    pub signatures: Vec<SignatureFile>,
}

/// One entry, by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum SignatureFile {
    /// A signature by this PEM public key.
    PubKey {
        /// A name for messages.
        #[serde(default)]
        owner: Option<String>,
        /// The PEM public key, inline.
        key: String,
        /// Required annotations.
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    },
    /// A keyless signature from this OIDC issuer and subject.
    GenericIssuer {
        /// The OIDC issuer, exactly.
        issuer: String,
        /// The subject rule.
        subject: SubjectFile,
        /// Required annotations.
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    },
    /// A keyless signature from a GitHub Actions workflow of this owner
    /// (and repository).
    GithubAction {
        /// The repository owner.
        owner: String,
        /// The repository, without the owner.
        #[serde(default)]
        repo: Option<String>,
        /// Required annotations.
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    },
}

/// `subject:` of a `genericIssuer`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum SubjectFile {
    /// The whole subject.
    Equal(String),
    /// A URL the subject starts with (a trailing `/` added when missing).
    UrlPrefix(String),
}

/// Why a policy could not be built, or was not met.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The policy as written is not usable.
    #[error("{field}: {reason}")]
    Invalid {
        /// Where, e.g. `allOf[0].subject.urlPrefix`.
        field: String,
        /// Why, and what to write instead.
        reason: String,
    },
    /// A `pubKey` entry's key is not a supported public key.
    #[error("{field}: the key is not usable")]
    Key {
        /// Where.
        field: String,
        /// The cause.
        #[source]
        source: signature::Error,
    },
    /// The trusted root could not be read.
    #[error(transparent)]
    Root(#[from] keyless::Error),
    /// No signature set meets the policy.
    #[error("{reference}: {digest} does not meet the signature policy: {}; {}", unmet.join("; "), found_text(found))]
    NotMet {
        /// The reference.
        reference: Reference,
        /// The digest.
        digest: Digest,
        /// Each entry (or count) not met.
        unmet: Vec<String>,
        /// What each signature found was, and why it did not count.
        found: Vec<String>,
    },
    /// The registry failed while reading the signatures.
    #[error("{reference}: cannot read its signatures")]
    Registry {
        /// The reference.
        reference: Reference,
        /// The cause.
        #[source]
        source: Box<client::Error>,
    },
}

fn found_text(found: &[String]) -> String {
    match found {
        [] => "no signature was found (no cosign .sig tag, no Sigstore bundle)".into(),
        _ => format!("the signatures found: {}", found.join("; ")),
    }
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A short, bounded name of the failure, for a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Invalid { .. } | Error::Key { .. } | Error::Root(_) => "key",
            Error::NotMet { found, .. } if found.is_empty() => "unsigned",
            Error::NotMet { .. } => "bad-signature",
            Error::Registry { source, .. } => source.kind(),
        }
    }
}

#[derive(Debug, Clone)]
enum Subject {
    Equal(String),
    UrlPrefix(String),
}

#[derive(Debug, Clone)]
enum Rule {
    PubKey {
        owner: Option<String>,
        key: PublicKey,
    },
    GenericIssuer {
        issuer: String,
        subject: Subject,
    },
    GithubAction {
        owner: String,
        repo: Option<String>,
    },
}

#[derive(Debug, Clone)]
struct Constraint {
    rule: Rule,
    annotations: BTreeMap<String, String>,
}

impl std::fmt::Display for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.rule {
            Rule::PubKey { owner, key } => match owner {
                Some(owner) => write!(f, "pubKey of {owner}"),
                None => write!(f, "pubKey {}", key.path().display()),
            },
            Rule::GenericIssuer { issuer, subject } => match subject {
                Subject::Equal(s) => write!(f, "genericIssuer {issuer} with subject {s}"),
                Subject::UrlPrefix(p) => {
                    write!(f, "genericIssuer {issuer} with a subject under {p}")
                }
            },
            Rule::GithubAction { owner, repo } => match repo {
                Some(repo) => write!(f, "githubAction {owner}/{repo}"),
                None => write!(f, "githubAction of owner {owner}"),
            },
        }?;
        if !self.annotations.is_empty() {
            let list: Vec<String> = self
                .annotations
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            write!(f, " and annotations {}", list.join(","))?;
        }
        Ok(())
    }
}

/// A policy, its keys parsed and its trusted root read.
#[derive(Debug, Clone)]
pub struct Policy {
    all_of: Vec<Constraint>,
    any_of: Option<(usize, Vec<Constraint>)>,
    root: Option<TrustedRoot>,
}

impl Policy {
    /// Builds `file`'s policy; `trusted_root` is required when an entry is
    /// keyless. `prefix` is put before each field in errors (`verify.`).
    pub fn new(file: &PolicyFile, trusted_root: Option<&Path>, prefix: &str) -> Result<Self> {
        let invalid = |field: String, reason: &str| Error::Invalid {
            field: format!("{prefix}{field}").trim_end_matches('.').to_owned(),
            reason: reason.to_owned(),
        };
        let entries = |list: &[SignatureFile], at: &str| -> Result<Vec<Constraint>> {
            list.iter()
                .enumerate()
                .map(|(i, s)| constraint(s, &format!("{prefix}{at}[{i}]")))
                .collect()
        };
        let all_of = entries(file.all_of.as_deref().unwrap_or_default(), "allOf")?;
        if file.all_of.as_ref().is_some_and(Vec::is_empty) {
            return Err(invalid(
                "allOf".into(),
                "is empty: list at least one signature, or remove it",
            ));
        }
        let any_of = match &file.any_of {
            None => None,
            Some(any) => {
                let list = entries(&any.signatures, "anyOf.signatures")?;
                let minimum = any.minimum_matches.unwrap_or(1) as usize;
                if minimum == 0 || minimum > list.len() {
                    return Err(invalid(
                        "anyOf.minimumMatches".into(),
                        &format!(
                            "{minimum} must be between 1 and the {} signatures listed",
                            list.len()
                        ),
                    ));
                }
                Some((minimum, list))
            }
        };
        if all_of.is_empty() && any_of.is_none() {
            return Err(invalid(
                String::new(),
                "a signature policy needs allOf or anyOf",
            ));
        }
        let keyless = all_of
            .iter()
            .chain(any_of.iter().flat_map(|(_, l)| l))
            .any(|c| !matches!(c.rule, Rule::PubKey { .. }));
        let root = match (trusted_root, keyless) {
            (Some(path), _) => Some(TrustedRoot::read(path)?),
            (None, true) => {
                return Err(invalid(
                    "trustedRoot".into(),
                    "is required by a genericIssuer or githubAction entry: give the Sigstore trusted_root.json of the Fulcio and Rekor the vendor signs with",
                ));
            }
            (None, false) => None,
        };
        Ok(Self {
            all_of,
            any_of,
            root,
        })
    }

    /// The trusted root, when the policy has one.
    pub fn trusted_root(&self) -> Option<&TrustedRoot> {
        self.root.as_ref()
    }

    /// Checks `signatures` of `digest` against the policy: `Ok` with those
    /// that matched an entry. `skipped` names bundles that could not be
    /// read, for the message.
    pub fn evaluate(
        &self,
        reference: &Reference,
        digest: &Digest,
        signatures: &[StoredSignature],
        skipped: &[String],
    ) -> Result<Vec<StoredSignature>> {
        let evidence: Vec<Evidence> = signatures
            .iter()
            .map(|s| Evidence::of(s, digest, self.root.as_ref()))
            .collect();
        let mut used = vec![false; signatures.len()];
        let mut matched = |c: &Constraint| {
            let mut any = false;
            for (i, (s, e)) in signatures.iter().zip(&evidence).enumerate() {
                if e.matches(c, s, digest) {
                    used[i] = true;
                    any = true;
                }
            }
            any
        };
        let mut unmet: Vec<String> = self
            .all_of
            .iter()
            .enumerate()
            .filter(|(_, c)| !matched(c))
            .map(|(i, c)| format!("allOf[{i}] ({c}) is matched by no signature"))
            .collect();
        if let Some((minimum, list)) = &self.any_of {
            let hits = list.iter().filter(|c| matched(c)).count();
            if hits < *minimum {
                let shown: Vec<String> = list.iter().map(|c| c.to_string()).collect();
                unmet.push(format!(
                    "anyOf needs {minimum} of [{}] matched, {hits} are",
                    shown.join(", ")
                ));
            }
        }
        if unmet.is_empty() {
            return Ok(signatures
                .iter()
                .zip(used)
                .filter(|(_, u)| *u)
                .map(|(s, _)| s.clone())
                .collect());
        }
        let mut found: Vec<String> = evidence.iter().map(|e| e.shown.clone()).collect();
        found.extend(
            skipped
                .iter()
                .map(|s| format!("a Sigstore bundle skipped: {s}")),
        );
        Err(Error::NotMet {
            reference: reference.clone(),
            digest: digest.clone(),
            unmet,
            found,
        })
    }
}

fn constraint(s: &SignatureFile, field: &str) -> Result<Constraint> {
    let invalid = |f: &str, reason: &str| Error::Invalid {
        field: format!("{field}.{f}"),
        reason: reason.to_owned(),
    };
    let (rule, annotations) = match s {
        SignatureFile::PubKey {
            owner,
            key,
            annotations,
        } => {
            let key =
                PublicKey::from_pem(Path::new(&format!("{field}.key")), key).map_err(|source| {
                    Error::Key {
                        field: format!("{field}.key"),
                        source,
                    }
                })?;
            (
                Rule::PubKey {
                    owner: owner.clone(),
                    key,
                },
                annotations,
            )
        }
        SignatureFile::GenericIssuer {
            issuer,
            subject,
            annotations,
        } => {
            if issuer.is_empty() {
                return Err(invalid(
                    "issuer",
                    "is empty: give the OIDC issuer URL exactly as in the certificate",
                ));
            }
            let subject = match subject {
                SubjectFile::Equal(s) if s.is_empty() => {
                    return Err(invalid("subject.equal", "is empty"));
                }
                SubjectFile::Equal(s) => Subject::Equal(s.clone()),
                SubjectFile::UrlPrefix(p) => {
                    let Some((scheme, rest)) = p.split_once("://") else {
                        return Err(invalid(
                            "subject.urlPrefix",
                            &format!("{p:?} is not a URL (scheme://host/...)"),
                        ));
                    };
                    if scheme.is_empty() || rest.is_empty() {
                        return Err(invalid(
                            "subject.urlPrefix",
                            &format!("{p:?} is not a URL (scheme://host/...)"),
                        ));
                    }
                    Subject::UrlPrefix(match p.ends_with('/') {
                        true => p.clone(),
                        false => format!("{p}/"),
                    })
                }
            };
            (
                Rule::GenericIssuer {
                    issuer: issuer.clone(),
                    subject,
                },
                annotations,
            )
        }
        SignatureFile::GithubAction {
            owner,
            repo,
            annotations,
        } => {
            let name_ok = |s: &str| !s.is_empty() && !s.contains('/');
            if !name_ok(owner) {
                return Err(invalid(
                    "owner",
                    &format!("{owner:?} is not a GitHub owner (no '/', not empty)"),
                ));
            }
            if let Some(repo) = repo
                && !name_ok(repo)
            {
                return Err(invalid(
                    "repo",
                    &format!("{repo:?} is not a repository name: write it without the owner"),
                ));
            }
            (
                Rule::GithubAction {
                    owner: owner.clone(),
                    repo: repo.clone(),
                },
                annotations,
            )
        }
    };
    Ok(Constraint {
        rule,
        annotations: annotations.clone(),
    })
}

/// What one signature showed.
struct Evidence {
    /// The keyless identity, when it verified.
    identity: Option<Identity>,
    /// The annotations it carries, when it signs the digest.
    annotations: Option<BTreeMap<String, String>>,
    /// How it is described in a refusal.
    shown: String,
}

impl Evidence {
    fn of(s: &StoredSignature, digest: &Digest, root: Option<&TrustedRoot>) -> Self {
        let annotations = signature::annotations(s, digest);
        let Some(material) = &s.material else {
            let shown = match &annotations {
                Some(_) => "a signature with no certificate (for pubKey entries)".to_owned(),
                None => "a signature with no certificate, of another digest".to_owned(),
            };
            return Self {
                identity: None,
                annotations,
                shown,
            };
        };
        let claimed = keyless::claimed_identity(material)
            .unwrap_or_else(|| "an unreadable certificate".into());
        let Some(root) = root else {
            return Self {
                identity: None,
                annotations,
                shown: format!(
                    "a keyless signature ({claimed}), not checked: the policy has no trustedRoot"
                ),
            };
        };
        let signed = signature::signed_bytes(s);
        match keyless::verify(root, &s.payload, &signed, &s.signature, material) {
            Ok(identity) if annotations.is_some() => Self {
                shown: format!("a keyless signature by {identity}"),
                identity: Some(identity),
                annotations,
            },
            Ok(identity) => Self {
                shown: format!("a keyless signature by {identity}, of another digest"),
                identity: None,
                annotations,
            },
            Err(e) => Self {
                identity: None,
                annotations,
                shown: format!("a keyless signature ({claimed}) refused: {e}"),
            },
        }
    }

    fn matches(&self, c: &Constraint, s: &StoredSignature, digest: &Digest) -> bool {
        let Some(annotations) = &self.annotations else {
            return false;
        };
        if !c
            .annotations
            .iter()
            .all(|(k, v)| annotations.get(k) == Some(v))
        {
            return false;
        }
        match &c.rule {
            Rule::PubKey { key, .. } => s.material.is_none() && signature::verifies(s, digest, key),
            Rule::GenericIssuer { issuer, subject } => self.identity.as_ref().is_some_and(|id| {
                id.issuer.as_deref() == Some(issuer.as_str())
                    && match subject {
                        Subject::Equal(e) => id.subject == *e,
                        Subject::UrlPrefix(p) => id.subject.starts_with(p.as_str()),
                    }
            }),
            Rule::GithubAction { owner, repo } => self.identity.as_ref().is_some_and(|id| {
                id.issuer.as_deref() == Some(GITHUB_ACTIONS_ISSUER)
                    && id.subject.starts_with("https://github.com/")
                    && id
                        .github_repository
                        .as_deref()
                        .and_then(|r| r.split_once('/'))
                        .is_some_and(|(o, r)| {
                            o == owner && repo.as_deref().is_none_or(|want| want == r)
                        })
            }),
        }
    }
}

impl crate::Client {
    /// Checks that `digest`'s signatures (in the `.sig` tag and the
    /// Sigstore bundles that refer to it) meet `policy`: `Ok` with those
    /// that matched an entry of it.
    pub async fn verify_policy(
        &self,
        reference: &Reference,
        digest: &Digest,
        policy: &Policy,
    ) -> Result<Vec<StoredSignature>> {
        let registry_error = |source| Error::Registry {
            reference: reference.clone(),
            source: Box::new(source),
        };
        let (mut signatures, _) = self
            .classic_signatures(reference, digest)
            .await
            .map_err(registry_error)?;
        let found = self
            .bundles_of(reference, digest)
            .await
            .map_err(registry_error)?;
        signatures.extend(found.signatures);
        policy.evaluate(reference, digest, &signatures, &found.skipped)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use x509_cert::Certificate;
    use x509_cert::der::asn1::OctetString;
    use x509_cert::der::{Decode as _, Encode as _};

    use super::*;
    use crate::bundle;
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
            "../tests/fixtures/keyless/trusted_root.json"
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
                && text.contains(
                    "a keyless signature by subject https://github.com/vendor/gpu-setter/"
                ),
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
                    let utf8 =
                        x509_cert::der::asn1::Utf8StringRef::new(GITHUB_ACTIONS_ISSUER).unwrap();
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
        let any = |n: u32| {
            format!("anyOf: {{minimumMatches: {n}, signatures: [{alice}, {vendor}, {bob}]}}")
        };
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
        let public = include_str!("../tests/fixtures/cosign-v3/cosign.pub");
        let digest: Digest = include_str!("../tests/fixtures/cosign-v3/digest")
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
        let key_signed = bundle::parse(include_bytes!("../tests/fixtures/cosign-v3/bundle.json"))
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
        let file: PolicyFile =
            serde_yaml::from_str("allOf: [{kind: githubAction, owner: o}]").unwrap();
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
}
