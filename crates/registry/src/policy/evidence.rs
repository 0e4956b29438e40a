//! What a signature showed, and whether it matches an entry.

use std::collections::BTreeMap;

use super::GITHUB_ACTIONS_ISSUER;
use super::rule::{Constraint, Rule, Subject};
use crate::keyless::{self, Identity, TrustedRoot};
use crate::reference::Digest;
use crate::signature::{self, StoredSignature};

/// What one signature showed.
pub(super) struct Evidence {
    /// The keyless identity, when it verified.
    pub(super) identity: Option<Identity>,
    /// The annotations it carries, when it signs the digest.
    pub(super) annotations: Option<BTreeMap<String, String>>,
    /// How it is described in a refusal.
    pub(super) shown: String,
}

impl Evidence {
    pub(super) fn of(s: &StoredSignature, digest: &Digest, root: Option<&TrustedRoot>) -> Self {
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
        match keyless::verify(root, &s.payload, &signed, &s.signature, material, s.format) {
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

    pub(super) fn matches(&self, c: &Constraint, s: &StoredSignature, digest: &Digest) -> bool {
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
