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

mod evidence;
mod file;
mod rule;
#[cfg(test)]
mod tests;

pub use file::{AnyOfFile, PolicyFile, SignatureFile, SubjectFile};

use std::path::Path;

use crate::client;
use crate::keyless::{self, TrustedRoot};
use crate::reference::{Digest, Reference};
use crate::signature::{self, StoredSignature};

use evidence::Evidence;
use rule::{Constraint, Rule, constraint};

/// The OIDC issuer of GitHub Actions' tokens.
pub const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";

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
