//! The entries of a policy, checked and parsed.

use std::collections::BTreeMap;
use std::path::Path;

use super::file::{SignatureFile, SubjectFile};
use super::{Error, Result};
use crate::signature::PublicKey;

#[derive(Debug, Clone)]
pub(super) enum Subject {
    Equal(String),
    UrlPrefix(String),
}

#[derive(Debug, Clone)]
pub(super) enum Rule {
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
pub(super) struct Constraint {
    pub(super) rule: Rule,
    pub(super) annotations: BTreeMap<String, String>,
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

pub(super) fn constraint(s: &SignatureFile, field: &str) -> Result<Constraint> {
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
