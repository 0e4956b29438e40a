//! A signature as the cache keeps it, whatever format cosign wrote it in:
//! what [`crate::signature`] checks with a key and [`crate::policy`] with
//! a policy. A leaf: both formats' readers ([`crate::bundle`],
//! [`crate::signature`]) make it, and it imports neither.

use serde::{Deserialize, Serialize};

/// A signature as cosign stores it: the payload and its base64 signature.
/// Kept in the cache, so that a restart with the registry down can check
/// it again offline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSignature {
    /// The simple-signing payload's bytes, or a bundle's in-toto statement.
    #[serde(with = "base64_bytes")]
    pub payload: Vec<u8>,
    /// The base64 DER signature of `payload` (of its DSSE encoding, for a
    /// bundle).
    pub signature: String,
    /// Which of cosign's formats it came in (absent in cache files written
    /// before bundles were read: the classic one).
    #[serde(default, skip_serializing_if = "SignatureFormat::is_simple_signing")]
    pub format: SignatureFormat,
    /// A keyless bundle's `verificationMaterial` (its certificate and
    /// transparency log entry), checked with [`crate::keyless`]; absent
    /// for a signature made with a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub material: Option<serde_json::Value>,
}

/// The format of a [`StoredSignature`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignatureFormat {
    /// A layer of the `sha256-<hex>.sig` manifest: the signature is over the
    /// simple-signing payload itself.
    #[default]
    SimpleSigning,
    /// A Sigstore bundle's DSSE envelope: the signature is over
    /// `bundle::pae` of the in-toto payload type and the in-toto
    /// statement.
    Dsse,
}

impl SignatureFormat {
    fn is_simple_signing(&self) -> bool {
        *self == SignatureFormat::SimpleSigning
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}
