//! References (`HOST[:PORT]/repo[:tag][@sha256:...]`) and digests.
//!
//! A reference always names its registry host: `ghcr.io/vendor/gpu:1.4`,
//! `127.0.0.1:5000/gpu@sha256:...`. A bare `vendor/gpu` is refused rather
//! than sent to Docker Hub behind the operator's back. A reference with a
//! digest is *pinned*: it names immutable content, and its tag (if it also
//! has one) is only a label.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

/// Why a reference or digest is refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not a reference (oci-client's parser refused it).
    #[error("`{input}` is not an image reference (HOST[:PORT]/repo[:tag][@sha256:...])")]
    Invalid {
        /// The text given.
        input: String,
        /// The parser's reason.
        #[source]
        source: oci_client::ParseError,
    },
    /// The reference has no registry host.
    #[error(
        "`{input}` names no registry host: write it in full, as HOST[:PORT]/repo[:tag] (for Docker Hub, docker.io/{input})"
    )]
    NoRegistry {
        /// The text given.
        input: String,
    },
    /// The reference starts with a scheme other than `registry://` or
    /// `oci://` (the prefixes Kubewarden and Istio write, accepted and
    /// dropped).
    #[error("`{input}` starts with {scheme}://, which is not a registry reference: {advice}")]
    UnsupportedScheme {
        /// The text given.
        input: String,
        /// The scheme written.
        scheme: String,
        /// What to write instead.
        advice: &'static str,
    },
    /// The digest is not `sha256:` followed by 64 lowercase hex digits.
    #[error("`{input}` is not a sha256 digest (sha256:<64 lowercase hex digits>)")]
    InvalidDigest {
        /// The text given.
        input: String,
    },
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A sha256 content digest, `sha256:<64 lowercase hex digits>`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self::from_sha256(Sha256::digest(bytes).into())
    }

    /// The digest whose sha256 is `hash`.
    pub fn from_sha256(hash: [u8; 32]) -> Self {
        Self(format!("sha256:{}", hex::encode(hash)))
    }

    /// The 64 hex digits, without the `sha256:` prefix.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// The whole digest, `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Digest {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let ok = s.strip_prefix("sha256:").is_some_and(|hex| {
            hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        match ok {
            true => Ok(Self(s.to_owned())),
            false => Err(Error::InvalidDigest {
                input: s.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An OCI reference with an explicit registry host. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Reference(Arc<Parts>);

#[derive(PartialEq, Eq, Hash)]
struct Parts {
    inner: oci_client::Reference,
    digest: Option<Digest>,
}

impl Reference {
    /// Parses `HOST[:PORT]/repo[:tag][@sha256:...]`. Without a tag or a
    /// digest the tag is `latest`, as everywhere in OCI. A `registry://` or
    /// `oci://` prefix, as Kubewarden's and Istio's WasmPlugin's references
    /// carry, is dropped ([`strip_scheme`]); any other scheme is refused.
    pub fn parse(input: &str) -> Result<Self> {
        let input = strip_scheme(input)?;
        let host = input.split_once('/').map(|(host, _)| host);
        if !host.is_some_and(|h| h.contains(['.', ':']) || h == "localhost") {
            return Err(Error::NoRegistry {
                input: input.to_owned(),
            });
        }
        let inner = oci_client::Reference::try_from(input).map_err(|source| Error::Invalid {
            input: input.to_owned(),
            source,
        })?;
        let digest = inner.digest().map(str::parse).transpose()?;
        Ok(Self(Arc::new(Parts { inner, digest })))
    }

    /// The registry, `HOST[:PORT]`: the key of its `registries` settings.
    pub fn registry(&self) -> &str {
        self.0.inner.registry()
    }

    /// The repository within the registry (`vendor/gpu`).
    pub fn repository(&self) -> &str {
        self.0.inner.repository()
    }

    /// `HOST[:PORT]/repository`, without tag or digest: what a cosign
    /// signature names as its `docker-reference`.
    pub fn repository_path(&self) -> String {
        format!("{}/{}", self.registry(), self.repository())
    }

    /// The tag, if any.
    pub fn tag(&self) -> Option<&str> {
        self.0.inner.tag()
    }

    /// The digest, if the reference is pinned.
    pub fn digest(&self) -> Option<&Digest> {
        self.0.digest.as_ref()
    }

    /// Whether the reference names immutable content (it has a digest).
    pub fn is_pinned(&self) -> bool {
        self.0.digest.is_some()
    }

    /// The same repository, pinned to `digest` (and without a tag).
    pub fn with_digest(&self, digest: &Digest) -> Self {
        Self(Arc::new(Parts {
            inner: oci_client::Reference::with_digest(
                self.registry().to_owned(),
                self.repository().to_owned(),
                digest.to_string(),
            ),
            digest: Some(digest.clone()),
        }))
    }

    /// The same repository at `tag` (and without a digest).
    pub fn with_tag(&self, tag: &str) -> Self {
        Self(Arc::new(Parts {
            inner: oci_client::Reference::with_tag(
                self.registry().to_owned(),
                self.repository().to_owned(),
                tag.to_owned(),
            ),
            digest: None,
        }))
    }

    /// oci-client's form, for the requests.
    pub(crate) fn oci(&self) -> &oci_client::Reference {
        &self.0.inner
    }
}

/// The schemes accepted before a reference, and dropped: Kubewarden writes
/// `registry://`, Istio's WasmPlugin `oci://`.
pub const ACCEPTED_SCHEMES: [&str; 2] = ["registry", "oci"];

/// `input` without a `registry://` or `oci://` prefix; a reference with
/// another scheme (`http://`, `https://`, `file://`) is refused, saying
/// what to write instead.
pub fn strip_scheme(input: &str) -> Result<&str> {
    let Some((scheme, rest)) = input.split_once("://") else {
        return Ok(input);
    };
    if ACCEPTED_SCHEMES.contains(&scheme) {
        return Ok(rest);
    }
    let advice = match scheme.to_ascii_lowercase().as_str() {
        "registry" | "oci" => "write the scheme in lowercase (registry:// or oci://), or none",
        "http" => {
            "write HOST[:PORT]/repo:tag without a scheme; a registry that speaks plain HTTP is set with registries.HOST[:PORT].insecure: true"
        }
        "https" => {
            "write HOST[:PORT]/repo:tag without a scheme (HTTPS is the default); a plugin is pulled from an OCI registry, not downloaded from a URL"
        }
        "file" => {
            "a plugin file goes in pluginDir (its name is the plugin's); image: names an OCI registry reference"
        }
        _ => "write HOST[:PORT]/repo:tag, with no scheme or registry:// or oci://",
    };
    Err(Error::UnsupportedScheme {
        input: input.to_owned(),
        scheme: scheme.to_owned(),
        advice,
    })
}

impl FromStr for Reference {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.inner, f)
    }
}

impl fmt::Debug for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reference({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_reference_names_its_host_port_repository_tag_and_digest() {
        let r = Reference::parse("127.0.0.1:5000/vendor/gpu:1.4").unwrap();
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("127.0.0.1:5000", "vendor/gpu", Some("1.4"))
        );
        assert!(!r.is_pinned());
        assert_eq!(r.repository_path(), "127.0.0.1:5000/vendor/gpu");

        let r = Reference::parse(&format!("registry.example.com/gpu:1.4@sha256:{HEX}")).unwrap();
        assert!(r.is_pinned());
        assert_eq!(r.digest().unwrap().hex(), HEX);
        assert_eq!(r.tag(), Some("1.4"));

        let r = Reference::parse("localhost/gpu").unwrap();
        assert_eq!(r.tag(), Some("latest"));
        let pinned = r.with_digest(&Digest::of(b"x"));
        assert_eq!(pinned.tag(), None);
        assert_eq!(
            pinned.to_string(),
            format!("localhost/gpu@{}", Digest::of(b"x"))
        );
    }

    #[test]
    fn a_reference_without_a_host_or_with_a_bad_digest_is_refused() {
        for bad in ["vendor/gpu:1.4", "gpu", "Registry.example.com/Gpu"] {
            let err = Reference::parse(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
        assert!(matches!(
            Reference::parse("vendor/gpu").unwrap_err(),
            Error::NoRegistry { .. }
        ));
        assert!(Reference::parse("example.com/gpu@sha256:abc").is_err());
        assert!(Reference::parse(&format!("example.com/gpu@sha512:{HEX}{HEX}")).is_err());
    }

    #[test]
    fn a_registry_or_oci_prefix_is_dropped_and_other_schemes_are_refused() {
        let plain = Reference::parse("127.0.0.1:5000/vendor/gpu:1.4").unwrap();
        for prefixed in [
            "registry://127.0.0.1:5000/vendor/gpu:1.4",
            "oci://127.0.0.1:5000/vendor/gpu:1.4",
        ] {
            let r = Reference::parse(prefixed).unwrap();
            assert_eq!(r, plain, "{prefixed}");
            assert_eq!(r.to_string(), "127.0.0.1:5000/vendor/gpu:1.4");
        }
        let pinned = Reference::parse(&format!("oci://ghcr.io/v/gpu@sha256:{HEX}")).unwrap();
        assert_eq!(pinned.digest().unwrap().hex(), HEX);
        for (bad, says) in [
            ("http://127.0.0.1:5000/vendor/gpu:1.4", "insecure: true"),
            ("https://ghcr.io/vendor/gpu:1.4", "HTTPS is the default"),
            ("file:///opt/gpu.wasm", "pluginDir"),
            ("OCI://ghcr.io/vendor/gpu:1.4", "lowercase"),
            ("s3://bucket/gpu:1", "registry:// or oci://"),
        ] {
            let err = Reference::parse(bad).unwrap_err();
            assert!(
                matches!(err, Error::UnsupportedScheme { .. }),
                "{bad}: {err}"
            );
            let text = err.to_string();
            assert!(text.contains(bad) && text.contains(says), "{text}");
        }
        // A double prefix is not a reference.
        assert!(Reference::parse("oci://registry://ghcr.io/v/gpu:1").is_err());
    }

    #[test]
    fn a_digest_is_sha256_and_64_lowercase_hex_digits() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(format!("sha256:{HEX}").parse::<Digest>().is_ok());
        for bad in [
            HEX.to_owned(),
            format!("sha256:{}", HEX.to_uppercase()),
            format!("sha256:{HEX}0"),
        ] {
            assert!(bad.parse::<Digest>().is_err(), "{bad}");
        }
    }
}
