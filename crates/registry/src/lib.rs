//! Plugins as OCI artifacts: pull, push, sign, verify and cache them.
//!
//! nodestatus loads each setter as a WebAssembly component. This crate
//! carries those components through OCI registries, as Kubewarden, Istio,
//! Spin and wasmCloud carry theirs: a vendor pushes and signs, a node pulls,
//! checks and caches. It knows nothing of wasmtime or of the engine; the
//! engine compiles what [`Fetcher::fetch`] returns.
//!
//! # References
//!
//! `HOST[:PORT]/repo[:tag][@sha256:<hex>]`, always with the host
//! ([`Reference::parse`]), after an optional `registry://` (Kubewarden) or
//! `oci://` (Istio), which is dropped; any other scheme is refused. A reference with a digest is *pinned*: it names
//! immutable content, which once cached is never asked of the registry
//! again. A tag is resolved at each [`Fetcher::fetch`].
//!
//! # Settings
//!
//! The config's top-level `registries:` ([`Registries`]) says, per
//! `HOST[:PORT]`, which CA bundle to trust beside the system roots (`ca`),
//! where the `kubernetes.io/dockerconfigjson` credentials are (`auth`), and
//! whether the registry speaks plain HTTP (`insecure: true`, for that
//! registry only). Files are read at each operation; no credential appears
//! in a `Debug`, a log line or an error. The auth file is read as the docker
//! CLI reads its `config.json`: Basic credentials (sent to the registry's
//! token server when it has one), an `identitytoken`, or a credential helper
//! (`credHelpers`, `credsStore`) run under a deadline ([`credentials`]).
//!
//! # Pulling
//!
//! [`Client::pull`] fetches the manifest (its sha256 checked against a
//! pinned digest), accepts one of the layouts of the [`artifact`] module
//! (the CNCF TAG-Runtime Wasm layout, config
//! `application/vnd.wasm.config.v0+json` and one `application/wasm` layer;
//! or oci-distribution's `application/vnd.wasm.content.layer.v1+wasm`, as
//! Kubewarden writes it), and streams the layer under the caller's byte cap:
//! refused before the download when the manifest declares more, cut while
//! streaming when more comes. The layer's sha256 must be its digest. Every
//! manifest and index read is bounded too ([`client::MAX_MANIFEST_BYTES`]).
//! Every operation runs under one deadline ([`Client::with_timeout`], default
//! [`DEFAULT_TIMEOUT`]): a registry that accepts the connection and never
//! answers costs that long, then [`client::Error::Timeout`].
//!
//! ```no_run
//! # async fn pull() -> Result<(), Box<dyn std::error::Error>> {
//! use nodestatus_registry::{Client, Reference, Registries};
//!
//! let registries: Registries = serde_yaml::from_str("
//! registry.example.com:
//!   ca: /etc/nodestatus/registry-ca.pem
//!   auth: /etc/nodestatus/pull-secret/.dockerconfigjson
//! ")?;
//! let client = Client::new(registries)?;
//! let reference = Reference::parse("registry.example.com/vendor/gpu:1.4")?;
//! let artifact = client.pull(&reference, 64 << 20).await?;
//! println!("{} {} bytes, world {:?}", artifact.digest, artifact.bytes.len(), artifact.world());
//! # Ok(()) }
//! ```
//!
//! # Publishing
//!
//! [`Client::push`] writes a component in the CNCF layout, with its WIT
//! world and version as the manifest annotations [`ANNOTATION_WORLD`] and
//! [`ANNOTATION_VERSION`], and returns the manifest digest (the same bytes
//! and metadata always give the same digest).
//!
//! # Signatures
//!
//! Cosign-compatible, with a key pair (ECDSA P-256): [`Client::sign`]
//! writes the signature of a digest at the tag `sha256-<hex>.sig` beside
//! it, appending to the signatures there; [`Client::verify`] requires one
//! that checks with the public key and names the digest: one in that tag,
//! else a Sigstore bundle attached as an OCI 1.1 referrer, what cosign v3
//! writes by default ([`bundle`]: found through the referrers API or the
//! referrers tag `sha256-<hex>`; a DSSE envelope of an in-toto statement,
//! checked offline with the key). The [`signature`] module says which key
//! files are accepted and what is not supported (cosign's encrypted keys).
//!
//! Keyless signatures (a Fulcio certificate and a Rekor entry, in a bundle)
//! are checked offline against a Sigstore trusted root ([`keyless`]), and
//! matched with an identity policy as Kubewarden writes it ([`policy`]:
//! `allOf` / `anyOf` of `pubKey`, `genericIssuer`, `githubAction`):
//! [`Client::verify_policy`], or [`Fetcher::fetch_trusted`] with
//! [`Trust::Policy`].
//!
//! ```no_run
//! # async fn sign(client: nodestatus_registry::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::Path;
//! use nodestatus_registry::{PrivateKey, PublicKey, Reference};
//!
//! let reference = Reference::parse("registry.example.com/vendor/gpu:1.4")?;
//! let digest = client.sign(&reference, &PrivateKey::read(Path::new("vendor.key"))?).await?;
//! client.verify(&reference, &digest, &PublicKey::read(Path::new("vendor.pub"))?).await?;
//! # Ok(()) }
//! ```
//!
//! # The cache, and what the engine calls
//!
//! [`Cache`] keeps verified components by digest, the digest each tag last
//! resolved to, and the signatures that verified them, under a directory
//! only the engine's user may write; every read is hashed again.
//! [`Fetcher`] puts the two together: [`Fetcher::fetch`] serves a cached
//! pinned reference without the network and pulls, verifies and caches
//! anything else; [`Fetcher::fetch_cached`] never touches the network, for
//! a start with the registry down. [`Cache::collect`] bounds and ages the
//! cache ([`cache::Limits`]), keeping what the caller says is in use.
//!
//! ```no_run
//! # async fn fetch() -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::Path;
//! use nodestatus_registry::{Cache, Client, Fetcher, PublicKey, Reference, Registries};
//!
//! let fetcher = Fetcher::new(
//!     Client::new(Registries::default())?,
//!     Cache::open("/var/cache/nodestatus/registry")?,
//! );
//! let reference = Reference::parse("registry.example.com/vendor/gpu:1.4")?;
//! let key = PublicKey::read(Path::new("/etc/nodestatus/vendor.pub"))?;
//! let fetched = match fetcher.fetch(&reference, 64 << 20, Some(&key)).await {
//!     Ok(fetched) => fetched,
//!     // The registry is down: start from what the cache has.
//!     Err(e) => {
//!         eprintln!("{e} ({})", e.kind());
//!         fetcher.fetch_cached(&reference, 64 << 20, Some(&key))?
//!     }
//! };
//! println!("{} from {:?}", fetched.artifact.digest, fetched.origin);
//! # Ok(()) }
//! ```
//!
//! # Failures
//!
//! Each failure is its own variant, named by [`fetch::Error::kind`] with a
//! bounded label for metrics:
//!
//! | case | error | kind |
//! |---|---|---|
//! | registry down (connection refused) | [`client::Error::Unreachable`] | `unreachable` |
//! | registry accepts but never answers | [`client::Error::Timeout`] | `timeout` |
//! | unknown CA, or a plain-HTTP registry without `insecure` | [`client::Error::Tls`] | `tls` |
//! | 401 / 403 (wrong password, no access) | [`client::Error::Unauthorized`] | `unauthorized` |
//! | the token server refuses the credentials | [`client::Error::CredentialsRefused`] | `unauthorized` |
//! | a token that does not grant the repository | [`client::Error::NoAccess`] | `unauthorized` |
//! | a credential helper missing, failing or hanging | [`client::Error::Credentials`] | `settings` |
//! | an identity token refused | [`client::Error::Credentials`] | `unauthorized` |
//! | 404 (unknown or deleted tag, unknown repository) | [`client::Error::NotFound`] | `not-found` |
//! | 5xx, 429 | [`client::Error::Status`] | `server` |
//! | content whose sha256 is not its digest | [`client::Error::DigestMismatch`] | `digest-mismatch` |
//! | a blob of another size than declared | [`client::Error::SizeMismatch`] | `digest-mismatch` |
//! | a tag that resolves to a digest other than sha256 | [`client::Error::UnsupportedDigest`] | `digest-mismatch` |
//! | declared size over the cap | [`client::Error::DeclaredTooLarge`] | `too-large` |
//! | streamed bytes past the cap | [`client::Error::StreamTooLarge`] | `too-large` |
//! | a manifest or index over its bound | [`client::Error::ManifestTooLarge`] | `too-large` |
//! | not a Wasm artifact (index, other media types) | [`client::Error::Layout`] | `layout` |
//! | no signature | [`signature::Error::Unsigned`] | `unsigned` |
//! | signed by another key | [`signature::Error::WrongKey`] | `bad-signature` |
//! | a signature of another digest | [`signature::Error::OtherDigest`] | `bad-signature` |
//! | only keyless signatures | [`signature::Error::Keyless`] | `bad-signature` |
//! | signatures that do not meet a policy | [`policy::Error::NotMet`] | `bad-signature` (`unsigned`: none at all) |
//! | a tampered cache file | [`cache::Error::Tampered`] (removed; [`Fetcher::fetch`] pulls again) | `cache` |
//! | offline, not cached | [`fetch::Error::NotCached`] | `not-cached` |

pub mod artifact;
pub mod bundle;
pub mod cache;
pub mod client;
pub mod credentials;
pub mod fetch;
pub mod keyless;
pub mod policy;
pub mod reference;
pub mod settings;
pub mod signature;
pub mod stored;

#[cfg(test)]
mod fuzz;

pub use artifact::{ANNOTATION_VERSION, ANNOTATION_WORLD, Artifact, Layout};
pub use cache::Cache;
pub use client::{Client, DEFAULT_TIMEOUT, PushMeta};
pub use fetch::{Fetched, Fetcher, Origin, Trust};
pub use reference::{Digest, Reference};
pub use settings::{Registries, RegistrySettings};
pub use signature::{PrivateKey, PublicKey, Verified};
