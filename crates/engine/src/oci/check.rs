//! One check of a plugin's image: the registry (or the cache) asked, the
//! signature policy in force applied.

use nodestatus_registry::{Fetched, Fetcher, PublicKey, Trust};

use super::{Error, Puller, Result};
use crate::config::{ImageSource, PullPolicy};

impl Puller {
    /// Checks `name`'s image: `None` when it names the running version (or
    /// one the loader refused: that is an error again), else the new
    /// version, verified, and whether it was `pulled` or taken from the
    /// cache (`cached`: a tag resolved once, `IfNotPresent`).
    pub(super) async fn check(&mut self, name: &str) -> Result<Option<(Fetched, &'static str)>> {
        let source = self.slots[name].source.clone();
        let cache = self.cache()?;
        let key = read_key(&source)?;
        let fetcher = Fetcher::new(self.client(&source.reference)?, cache);
        let reference = &source.reference;
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        if source.pull_policy == PullPolicy::IfNotPresent && !reference.is_pinned() {
            // The version of the tag the cache holds, with no request,
            // unless the loader refused it: then the registry is asked.
            let slot = &self.slots[name];
            if let Ok(cached) =
                fetcher.fetch_cached_trusted(reference, cap, key.as_ref().map(Required::trust))
                && slot
                    .refused
                    .as_ref()
                    .is_none_or(|(d, _)| *d != cached.artifact.digest)
            {
                let digest = &cached.artifact.digest;
                if slot.running.as_ref() == Some(digest) && slot.handed.as_ref() == Some(digest) {
                    return Ok(None);
                }
                return Ok(Some((cached, "cached")));
            }
        }
        // Resolve first: a tag that still names the running digest costs
        // one request and no cache read.
        let bound = self.timeout * 4;
        let digest = tokio::time::timeout(bound, fetcher.client().resolve(reference))
            .await
            .map_err(|_| Error::Deadline {
                reference: reference.clone(),
                timeout: bound,
            })?
            .map_err(nodestatus_registry::fetch::Error::from)?;
        let slot = &self.slots[name];
        if slot.running.as_ref() == Some(&digest) && slot.handed.as_ref() == Some(&digest) {
            return Ok(None);
        }
        if let Some((refused, error)) = &slot.refused
            && *refused == digest
        {
            return Err(Error::Refused {
                reference: reference.clone(),
                digest,
                error: error.clone(),
            });
        }
        let pinned = reference.with_digest(&digest);
        let fetched = tokio::time::timeout(
            bound,
            fetcher.fetch_trusted(&pinned, cap, key.as_ref().map(Required::trust)),
        )
        .await
        .map_err(|_| Error::Deadline {
            reference: reference.clone(),
            timeout: bound,
        })??;
        if !reference.is_pinned() {
            // What a start with the registry down takes.
            let _ = fetcher.cache().put_tag(reference, &digest);
        }
        Ok(Some((fetched, "pulled")))
    }

    /// Whether the verification policy in force trusts the version that
    /// runs (`Ok` when none runs or no key is required). Its signature is
    /// checked from the cache first, then from the registry.
    pub(super) async fn trusts_running(&mut self, name: &str) -> Result<()> {
        let slot = &self.slots[name];
        let Some(running) = slot.running.clone() else {
            return Ok(());
        };
        let source = slot.source.clone();
        let Some(key) = read_key(&source)? else {
            return Ok(());
        };
        let fetcher = Fetcher::new(self.client(&source.reference)?, self.cache()?);
        let pinned = source.reference.with_digest(&running);
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        let bound = self.timeout * 4;
        tokio::time::timeout(
            bound,
            fetcher.fetch_trusted(&pinned, cap, Some(key.trust())),
        )
        .await
        .map_err(|_| Error::Deadline {
            reference: source.reference.clone(),
            timeout: bound,
        })??;
        Ok(())
    }
}

/// The sha256 of `source`'s key file, when it has one that can be read;
/// with a signature policy, of the policy and its trusted root file.
pub(super) fn key_id(source: &ImageSource) -> Option<String> {
    if let Some(policy) = &source.policy {
        let mut bytes = format!("{policy:?}").into_bytes();
        if let Some(root) = &policy.trusted_root {
            bytes.extend(std::fs::read(root).ok()?);
        }
        return Some(nodestatus_runtime::sha256_hex(&bytes));
    }
    let bytes = std::fs::read(source.key.as_ref()?).ok()?;
    Some(nodestatus_runtime::sha256_hex(&bytes))
}

/// What an image's signatures must satisfy, read again at each check.
pub(super) enum Required {
    Key(PublicKey),
    Policy(nodestatus_registry::policy::Policy),
}

impl Required {
    pub(super) fn trust(&self) -> Trust<'_> {
        match self {
            Required::Key(key) => Trust::Key(key),
            Required::Policy(policy) => Trust::Policy(policy),
        }
    }
}

pub(super) fn read_key(source: &ImageSource) -> Result<Option<Required>> {
    if let Some(policy) = &source.policy {
        return policy
            .build()
            .map(|p| Some(Required::Policy(p)))
            .map_err(|e| Error::Fetch(e.into()));
    }
    source
        .key
        .as_deref()
        .map(PublicKey::read)
        .transpose()
        .map(|key| key.map(Required::Key))
        .map_err(|e| Error::Fetch(e.into()))
}
