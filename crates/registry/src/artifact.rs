//! What a plugin artifact looks like in a registry: the manifest, the
//! layouts accepted, and the artifact pulled. No I/O.
//!
//! Two layouts are accepted, each exactly as written:
//!
//! | layout | config media type | the one layer's media type | written by |
//! |---|---|---|---|
//! | [`Layout::Cncf`] | `application/vnd.wasm.config.v0+json` | `application/wasm` | `nodestatus plugin push`, `wkg`, oci-wasm, wasmCloud |
//! | [`Layout::WasmV1`] | `application/vnd.wasm.config.v1+json` | `application/vnd.wasm.content.layer.v1+wasm` | oci-distribution's defaults: Kubewarden, wasm-to-oci |
//!
//! Anything else is refused ([`LayoutError`]): an image index (a component
//! runs on every platform, so there is nothing to choose), more than one
//! layer, Istio's "compat" tar layer, Spin's multi-layer application.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::reference::{Digest, Reference};

/// The CNCF TAG-Runtime Wasm config media type.
pub const CNCF_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The CNCF TAG-Runtime Wasm layer media type.
pub const CNCF_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// oci-distribution's (Kubewarden's) Wasm config media type.
pub const WASM_V1_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";
/// oci-distribution's (Kubewarden's) Wasm layer media type.
pub const WASM_V1_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";
/// An OCI image manifest.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// A Docker v2 schema 2 manifest (accepted on pull, as registries may
/// convert).
pub const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// An OCI image index (refused: see [`LayoutError::Index`]).
pub const OCI_INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// A Docker manifest list (refused: see [`LayoutError::Index`]).
pub const DOCKER_MANIFEST_LIST_MEDIA_TYPE: &str =
    "application/vnd.docker.distribution.manifest.list.v2+json";

/// The manifest annotation `plugin push` writes with the component's WIT
/// world (`nodestatus:plugin/plugin@0.1.1`).
pub const ANNOTATION_WORLD: &str = "io.nodestatus.plugin.world";
/// The manifest annotation `plugin push` writes with the plugin's version.
pub const ANNOTATION_VERSION: &str = "org.opencontainers.image.version";

/// Which accepted layout an artifact has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The CNCF TAG-Runtime Wasm layout.
    Cncf,
    /// oci-distribution's `application/vnd.wasm.*.v1` layout (Kubewarden).
    WasmV1,
}

/// Why a manifest is not a plugin artifact.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The manifest is an image index (or a Docker manifest list).
    #[error("it is an image index, not one manifest (a component needs no platform variants)")]
    Index,
    /// The manifest has another media type.
    #[error("its media type {0} is not an OCI image manifest")]
    MediaType(String),
    /// The config's media type is not a Wasm config.
    #[error(
        "its config media type {0} is neither {CNCF_CONFIG_MEDIA_TYPE} nor {WASM_V1_CONFIG_MEDIA_TYPE}"
    )]
    Config(String),
    /// Not exactly one layer.
    #[error("it has {0} layers, not exactly one")]
    LayerCount(usize),
    /// The layer's media type does not go with the config's.
    #[error("its layer media type {layer} does not go with the config media type {config}")]
    Layer {
        /// The config media type.
        config: String,
        /// The layer media type.
        layer: String,
    },
    /// A descriptor's digest is not sha256.
    #[error("its descriptor digest {0} is not a sha256 digest")]
    Digest(String),
    /// A descriptor's size is negative.
    #[error("its descriptor size {0} is negative")]
    Size(i64),
}

/// An OCI descriptor, as far as a plugin needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Descriptor {
    pub fn new(media_type: &str, bytes: &[u8]) -> Self {
        Self {
            media_type: media_type.to_owned(),
            digest: Digest::of(bytes).to_string(),
            size: bytes.len() as i64,
            annotations: None,
        }
    }

    pub fn digest(&self) -> Result<Digest, LayoutError> {
        self.digest
            .parse()
            .map_err(|_| LayoutError::Digest(self.digest.clone()))
    }

    pub fn size(&self) -> Result<u64, LayoutError> {
        u64::try_from(self.size).map_err(|_| LayoutError::Size(self.size))
    }

    /// oci-client's descriptor for a blob request: digest, media type and
    /// size only (no `urls`: a foreign URL in a manifest is never followed).
    pub fn to_oci(&self) -> oci_client::manifest::OciDescriptor {
        oci_client::manifest::OciDescriptor {
            media_type: self.media_type.clone(),
            digest: self.digest.clone(),
            size: self.size,
            ..Default::default()
        }
    }
}

/// An OCI image manifest, as far as a plugin needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Manifest {
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Just enough of any manifest to tell an index from a manifest.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<serde_json::Value>,
}

impl Manifest {
    /// Parses a manifest's bytes: an error for JSON that is no manifest,
    /// `Ok(Err(_))` for a manifest of another layout.
    pub fn parse(bytes: &[u8]) -> Result<Result<Self, LayoutError>, serde_json::Error> {
        let probe: Probe = serde_json::from_slice(bytes)?;
        let media_type = probe.media_type.as_deref();
        if probe.manifests.is_some()
            || media_type
                .is_some_and(|m| m == OCI_INDEX_MEDIA_TYPE || m == DOCKER_MANIFEST_LIST_MEDIA_TYPE)
        {
            return Ok(Err(LayoutError::Index));
        }
        if let Some(m) = media_type
            && m != OCI_MANIFEST_MEDIA_TYPE
            && m != DOCKER_MANIFEST_MEDIA_TYPE
        {
            return Ok(Err(LayoutError::MediaType(m.to_owned())));
        }
        serde_json::from_slice(bytes).map(Ok)
    }

    /// The layout and the one layer, or why this is not a plugin artifact.
    pub fn component_layer(&self) -> Result<(Layout, &Descriptor), LayoutError> {
        let config = self.config.media_type.as_str();
        let (layout, layer_type) = match config {
            CNCF_CONFIG_MEDIA_TYPE => (Layout::Cncf, CNCF_LAYER_MEDIA_TYPE),
            WASM_V1_CONFIG_MEDIA_TYPE => (Layout::WasmV1, WASM_V1_LAYER_MEDIA_TYPE),
            other => return Err(LayoutError::Config(other.to_owned())),
        };
        let [layer] = self.layers.as_slice() else {
            return Err(LayoutError::LayerCount(self.layers.len()));
        };
        if layer.media_type != layer_type {
            return Err(LayoutError::Layer {
                config: config.to_owned(),
                layer: layer.media_type.clone(),
            });
        }
        layer.digest()?;
        layer.size()?;
        Ok((layout, layer))
    }

    /// The manifest's canonical bytes, as pushed.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest always serializes")
    }
}

/// A plugin pulled from a registry (or its cache), its digests checked.
#[derive(Clone)]
pub struct Artifact {
    /// The reference it was asked for.
    pub reference: Reference,
    /// The manifest's digest: what a pinned reference names, and what a
    /// signature signs.
    pub digest: Digest,
    /// The component layer's digest (the sha256 of [`Artifact::bytes`]).
    pub layer_digest: Digest,
    /// The layout it came in.
    pub layout: Layout,
    /// The manifest's annotations ([`ANNOTATION_WORLD`],
    /// [`ANNOTATION_VERSION`], and whatever else the publisher wrote).
    pub annotations: BTreeMap<String, String>,
    /// The component.
    pub bytes: Vec<u8>,
    /// The manifest as served (its sha256 is `digest`), kept for the cache.
    pub(crate) manifest: Vec<u8>,
}

impl Artifact {
    /// The WIT world the publisher declared, if any (not checked: the
    /// engine checks the component itself).
    pub fn world(&self) -> Option<&str> {
        self.annotations.get(ANNOTATION_WORLD).map(String::as_str)
    }

    /// The version the publisher declared, if any.
    pub fn version(&self) -> Option<&str> {
        self.annotations.get(ANNOTATION_VERSION).map(String::as_str)
    }

    /// The manifest as the registry served it (its sha256 is
    /// [`Artifact::digest`]).
    pub fn manifest_bytes(&self) -> &[u8] {
        &self.manifest
    }

    /// The reference pinned to this artifact's digest.
    pub fn pinned(&self) -> Reference {
        self.reference.with_digest(&self.digest)
    }
}

impl fmt::Debug for Artifact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Artifact")
            .field("reference", &self.reference)
            .field("digest", &self.digest)
            .field("layer_digest", &self.layer_digest)
            .field("layout", &self.layout)
            .field("annotations", &self.annotations)
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
        let layers: Vec<_> = layers
            .iter()
            .map(|t| Descriptor::new(t, b"\0asm"))
            .collect();
        Manifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST_MEDIA_TYPE.into()),
            config: Descriptor::new(config, b"{}"),
            layers,
            annotations: None,
        }
        .to_bytes()
    }

    fn layout(bytes: &[u8]) -> Result<Layout, LayoutError> {
        let m = Manifest::parse(bytes).unwrap()?;
        m.component_layer().map(|(layout, _)| layout)
    }

    #[test]
    fn the_cncf_and_the_wasm_v1_layouts_are_accepted() {
        assert_eq!(
            layout(&manifest(CNCF_CONFIG_MEDIA_TYPE, &[CNCF_LAYER_MEDIA_TYPE])),
            Ok(Layout::Cncf)
        );
        assert_eq!(
            layout(&manifest(
                WASM_V1_CONFIG_MEDIA_TYPE,
                &[WASM_V1_LAYER_MEDIA_TYPE]
            )),
            Ok(Layout::WasmV1)
        );
    }

    #[test]
    fn other_layouts_are_refused_with_the_reason() {
        let cases = [
            (
                manifest("application/vnd.oci.image.config.v1+json", &[CNCF_LAYER_MEDIA_TYPE]),
                "config media type",
            ),
            (manifest(CNCF_CONFIG_MEDIA_TYPE, &[]), "0 layers"),
            (
                manifest(CNCF_CONFIG_MEDIA_TYPE, &[CNCF_LAYER_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE]),
                "2 layers",
            ),
            (
                manifest(CNCF_CONFIG_MEDIA_TYPE, &[WASM_V1_LAYER_MEDIA_TYPE]),
                "does not go with",
            ),
            (
                manifest(CNCF_CONFIG_MEDIA_TYPE, &["application/vnd.oci.image.layer.v1.tar+gzip"]),
                "does not go with",
            ),
            (
                br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#.to_vec(),
                "image index",
            ),
            (
                br#"{"schemaVersion":2,"manifests":[]}"#.to_vec(),
                "image index",
            ),
        ];
        for (bytes, why) in cases {
            let err = layout(&bytes).unwrap_err();
            assert!(err.to_string().contains(why), "{err} (wanted {why})");
        }
        assert!(Manifest::parse(b"[1]").is_err());
    }
}
