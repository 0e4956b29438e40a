//! The registry and the cache together: what the engine calls to get a
//! plugin.

use crate::artifact::Artifact;
use crate::cache::{self, Cache};
use crate::client::{self, Client};
use crate::policy::{self, Policy};
use crate::reference::{Digest, Reference};
use crate::signature::{self, PublicKey, StoredSignature, Verified};

/// What a fetched artifact's signatures must satisfy: a key, or a policy
/// ([`crate::policy`]: keys and keyless identities, `allOf` / `anyOf`).
#[derive(Debug, Clone, Copy)]
pub enum Trust<'a> {
    /// A signature by this key.
    Key(&'a PublicKey),
    /// Signatures that meet this policy.
    Policy(&'a Policy),
}

/// Why a plugin could not be had.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The registry failed (each variant names the reference).
    #[error(transparent)]
    Registry(#[from] client::Error),
    /// The signature check failed (each variant names the reference and
    /// the key).
    #[error(transparent)]
    Signature(#[from] signature::Error),
    /// The signatures do not meet the policy (it names the reference, the
    /// entries not met and the signatures found).
    #[error(transparent)]
    Policy(Box<policy::Error>),
    /// The cache failed.
    #[error("{reference}: the registry cache failed")]
    Cache {
        /// The reference.
        reference: Reference,
        /// The cause.
        #[source]
        source: cache::Error,
    },
    /// Offline, and the cache does not have it.
    #[error("{reference}: not in the registry cache (never pulled on this node, or removed)")]
    NotCached {
        /// The reference.
        reference: Reference,
    },
}

impl From<policy::Error> for Error {
    fn from(e: policy::Error) -> Self {
        Error::Policy(Box::new(e))
    }
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A short, bounded name of the failure, for a metric label:
    /// `unreachable`, `tls`, `timeout`, `unauthorized`, `not-found`,
    /// `server`, `digest-mismatch`, `too-large`, `layout`, `settings`,
    /// `invalid`, `key`, `unsigned`, `bad-signature`, `cache`,
    /// `not-cached`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Registry(e) => e.kind(),
            Error::Signature(e) => e.kind(),
            Error::Policy(e) => e.kind(),
            Error::Cache { .. } => "cache",
            Error::NotCached { .. } => "not-cached",
        }
    }
}

/// Where a fetched artifact's bytes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The cache: no blob was downloaded.
    Cache,
    /// The registry (and now the cache).
    Registry,
}

/// A plugin, ready to compile: its digests checked, its signature (when a
/// key is required) verified.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The artifact.
    pub artifact: Artifact,
    /// Where its bytes came from.
    pub origin: Origin,
    /// The signature that verified it, when a key was given.
    pub verified: Option<Verified>,
}

/// Gets plugins from registries through the cache.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: Client,
    cache: Cache,
}

/// A policy that passed always matched at least one signature.
fn first_verified(digest: &Digest, matched: Vec<StoredSignature>) -> Verified {
    Verified {
        digest: digest.clone(),
        signature: matched
            .into_iter()
            .next()
            .expect("a policy is met by at least one signature"),
    }
}

impl Fetcher {
    /// A fetcher over `client` and `cache`.
    pub fn new(client: Client, cache: Cache) -> Self {
        Self { client, cache }
    }

    /// The registry client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The cache.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Gets `reference`'s component, at most `max_bytes`, signed by `key`
    /// when one is given.
    ///
    /// - A pinned reference that is cached is served from the cache without
    ///   a request (a cached signature is checked again with `key`; only
    ///   when none verifies are the signatures fetched).
    /// - A tag is resolved (one request); when its digest is cached, that
    ///   is served, else it is pulled by digest. The tag's digest is
    ///   recorded for [`Fetcher::fetch_cached`].
    /// - A pull is verified before its blob is downloaded, and so before
    ///   anything is cached: a refused artifact costs no blob and leaves no
    ///   trace.
    /// - A cached file found tampered with is removed and pulled again.
    pub async fn fetch(
        &self,
        reference: &Reference,
        max_bytes: u64,
        key: Option<&PublicKey>,
    ) -> Result<Fetched> {
        self.fetch_trusted(reference, max_bytes, key.map(Trust::Key))
            .await
    }

    /// [`Fetcher::fetch`], with a key or a policy to satisfy. With a
    /// policy, every signature that matched an entry is cached (an offline
    /// start checks the policy against them again); [`Fetched::verified`]
    /// holds the first.
    pub async fn fetch_trusted(
        &self,
        reference: &Reference,
        max_bytes: u64,
        key: Option<Trust<'_>>,
    ) -> Result<Fetched> {
        let digest = self.client.resolve(reference).await?;
        let cached = match self.cache.get(reference, &digest, max_bytes) {
            Ok(cached) => cached,
            Err(cache::Error::Tampered { .. }) => None,
            Err(source) => return Err(self.cache_error(reference, source)),
        };
        if let Some(artifact) = cached {
            let verified = match key {
                Some(key) => Some(match self.verify_cached(reference, &digest, key) {
                    Ok(verified) => verified,
                    Err(_) => self.verify_online(reference, &digest, key).await?,
                }),
                None => None,
            };
            self.record_tag(reference, &digest)?;
            return Ok(Fetched {
                artifact,
                origin: Origin::Cache,
                verified,
            });
        }
        // The signatures are of the manifest's digest: a version they
        // refuse is refused before its blob is downloaded (a refused
        // version named in a config is tried again and again).
        let matched = match key {
            Some(key) => Some(self.verify_remote(reference, &digest, key).await?),
            None => None,
        };
        let mut artifact = self
            .client
            .pull(&reference.with_digest(&digest), max_bytes)
            .await?;
        artifact.reference = reference.clone();
        self.cache
            .put(&artifact)
            .map_err(|source| self.cache_error(reference, source))?;
        let verified = matched
            .map(|matched| self.keep_signatures(reference, &digest, matched))
            .transpose()?;
        self.record_tag(reference, &digest)?;
        Ok(Fetched {
            artifact,
            origin: Origin::Registry,
            verified,
        })
    }

    /// Gets `reference`'s component from the cache only, never the
    /// network: a pinned reference's digest, or the digest a tag last
    /// resolved to. With `key`, a cached signature must verify with it.
    /// For a start with the registry down.
    pub fn fetch_cached(
        &self,
        reference: &Reference,
        max_bytes: u64,
        key: Option<&PublicKey>,
    ) -> Result<Fetched> {
        self.fetch_cached_trusted(reference, max_bytes, key.map(Trust::Key))
    }

    /// [`Fetcher::fetch_cached`], with a key or a policy to satisfy.
    pub fn fetch_cached_trusted(
        &self,
        reference: &Reference,
        max_bytes: u64,
        key: Option<Trust<'_>>,
    ) -> Result<Fetched> {
        let not_cached = || Error::NotCached {
            reference: reference.clone(),
        };
        let digest = match reference.digest() {
            Some(digest) => digest.clone(),
            None => self
                .cache
                .tag(reference)
                .map_err(|source| self.cache_error(reference, source))?
                .ok_or_else(not_cached)?,
        };
        let artifact = self
            .cache
            .get(reference, &digest, max_bytes)
            .map_err(|source| self.cache_error(reference, source))?
            .ok_or_else(not_cached)?;
        let verified = key
            .map(|key| self.verify_cached(reference, &digest, key))
            .transpose()?;
        Ok(Fetched {
            artifact,
            origin: Origin::Cache,
            verified,
        })
    }

    fn verify_cached(
        &self,
        reference: &Reference,
        digest: &Digest,
        key: Trust<'_>,
    ) -> Result<Verified> {
        let signatures = self
            .cache
            .signatures(digest)
            .map_err(|source| self.cache_error(reference, source))?;
        match key {
            Trust::Key(key) => Ok(signature::verify_signatures(
                reference,
                digest,
                key,
                &signatures,
                0,
            )?),
            Trust::Policy(policy) => {
                let matched = policy.evaluate(reference, digest, &signatures, &[])?;
                Ok(first_verified(digest, matched))
            }
        }
    }

    async fn verify_online(
        &self,
        reference: &Reference,
        digest: &Digest,
        key: Trust<'_>,
    ) -> Result<Verified> {
        let matched = self.verify_remote(reference, digest, key).await?;
        self.keep_signatures(reference, digest, matched)
    }

    /// The registry's signatures of `digest` that verify with `key`.
    async fn verify_remote(
        &self,
        reference: &Reference,
        digest: &Digest,
        key: Trust<'_>,
    ) -> Result<Vec<StoredSignature>> {
        Ok(match key {
            Trust::Key(key) => vec![self.client.verify(reference, digest, key).await?.signature],
            Trust::Policy(policy) => self.client.verify_policy(reference, digest, policy).await?,
        })
    }

    /// Caches the signatures that verified `digest`.
    fn keep_signatures(
        &self,
        reference: &Reference,
        digest: &Digest,
        matched: Vec<StoredSignature>,
    ) -> Result<Verified> {
        for signature in &matched {
            self.cache
                .put_signature(digest, signature)
                .map_err(|source| self.cache_error(reference, source))?;
        }
        Ok(first_verified(digest, matched))
    }

    fn record_tag(&self, reference: &Reference, digest: &Digest) -> Result<()> {
        if reference.is_pinned() {
            return Ok(());
        }
        self.cache
            .put_tag(reference, digest)
            .map_err(|source| self.cache_error(reference, source))
    }

    fn cache_error(&self, reference: &Reference, source: cache::Error) -> Error {
        Error::Cache {
            reference: reference.clone(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::keyless::tests::{DIGEST, EMAIL, issuer};
    use crate::policy::PolicyFile;

    #[test]
    fn a_keyless_signature_in_the_cache_is_checked_against_the_policy_again() {
        let dir = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(
            Client::new(crate::Registries::default()).unwrap(),
            Cache::open(dir.path().join("cache")).unwrap(),
        );
        let reference = Reference::parse("127.0.0.1:5000/vendor/probe:1.0.0").unwrap();
        let digest: Digest = DIGEST.trim().parse().unwrap();
        let signature = crate::bundle::parse(EMAIL).unwrap().signatures.remove(0);
        fetcher.cache.put_signature(&digest, &signature).unwrap();
        let mut root = tempfile::NamedTempFile::new().unwrap();
        root.write_all(include_bytes!(
            "../tests/fixtures/keyless/trusted_root.json"
        ))
        .unwrap();
        let policy = |subject: &str| {
            let file: PolicyFile = serde_yaml::from_str(&format!(
                "allOf: [{{kind: genericIssuer, issuer: '{}', subject: {{equal: {subject}}}}}]",
                issuer("/email")
            ))
            .unwrap();
            Policy::new(&file, Some(root.path()), "verify.").unwrap()
        };
        // Read back from the cache's file: the certificate and the log
        // entry came with it.
        let alice = policy("alice@example.com");
        let verified = fetcher
            .verify_cached(&reference, &digest, Trust::Policy(&alice))
            .unwrap();
        assert_eq!(verified.signature, signature);
        let bob = policy("bob@example.com");
        let err = fetcher
            .verify_cached(&reference, &digest, Trust::Policy(&bob))
            .unwrap_err();
        assert_eq!(err.kind(), "bad-signature");
    }
}
