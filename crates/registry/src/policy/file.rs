//! The policy as written: Kubewarden's `verification-config`.

use std::collections::BTreeMap;

use serde::Deserialize;

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
