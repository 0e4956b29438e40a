//! The kubelet's `Images` setter: `status.images` from the container
//! runtime's `ListImages` answer: over CRI, when the operator granted
//! `containerRuntime`; else as `crictl images -o json` prints it, read from
//! `imagesFile` or given inline as `images`.
//!
//! Like the kubelet: images sorted by size, largest first, ties by id (in the
//! kubelet's `ByImageSize` order, descending); at most `maxImages` (default
//! 50; -1 means no limit, 0 none); at most 5 names per image, RepoDigests
//! before RepoTags. With no source it sets nothing (its part is empty: a list
//! it set before is removed, one another writer set is left alone); when the
//! runtime does not answer, the setter fails (the last list stays on the
//! node), as the kubelet keeps its last list.
use nodestatus_sdk::{Metadata, Node, Result, Setter, host};
use serde::Deserialize;
use serde_json::{Value, json};

/// The kubelet's `MaxNamesPerImageInNodeStatus`.
pub const MAX_NAMES_PER_IMAGE: usize = 5;

/// The plugin's config.
#[derive(serde::Deserialize, Debug, Clone, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// A JSON file (in a granted directory) with the `ListImages` answer.
    pub images_file: Option<String>,
    /// The `ListImages` answer inline: `{"images": [...]}` or the list.
    pub images: Option<Value>,
    /// The most images reported; -1 for no limit.
    pub max_images: i64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            images_file: None,
            images: None,
            max_images: 50,
        }
    }
}

/// One image of the `ListImages` answer.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct Image {
    /// The image's id.
    pub id: String,
    /// Its `repo:tag` names.
    pub repo_tags: Option<Vec<String>>,
    /// Its `repo@digest` names.
    pub repo_digests: Option<Vec<String>>,
    /// A uint64, which the CRI's JSON writes as a string.
    #[serde(deserialize_with = "size")]
    pub size: u64,
}

fn size<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(0),
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| D::Error::custom(format!("size {n} is not a byte count"))),
        Value::String(s) => s
            .trim()
            .parse()
            .map_err(|_| D::Error::custom(format!("size {s:?} is not a byte count"))),
        other => Err(D::Error::custom(format!(
            "size {other} is not a byte count"
        ))),
    }
}

/// Parses a `ListImages` answer: `{"images": [...]}` or the bare list.
pub fn parse_images(v: Value) -> Result<Vec<Image>, String> {
    let list = match v {
        Value::Object(mut o) => o.remove("images").unwrap_or(Value::Array(Vec::new())),
        other => other,
    };
    match list {
        Value::Null => Ok(Vec::new()),
        l => serde_json::from_value(l).map_err(|e| format!("not a ListImages answer: {e}")),
    }
}

/// The images of the runtime's CRI answer.
pub fn from_runtime(images: Vec<host::RuntimeImage>) -> Vec<Image> {
    images
        .into_iter()
        .map(|i| Image {
            id: i.id,
            repo_tags: Some(i.repo_tags),
            repo_digests: Some(i.repo_digests),
            size: i.size,
        })
        .collect()
}

/// `status.images`: sorted, capped, names limited.
pub fn node_images(mut images: Vec<Image>, max_images: i64) -> Result<Vec<Value>, String> {
    if max_images < -1 {
        return Err(format!(
            "maxImages {max_images} must be >= -1 (-1 means no limit)"
        ));
    }
    images.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| b.id.cmp(&a.id)));
    if max_images >= 0 {
        images.truncate(max_images as usize);
    }
    Ok(images
        .into_iter()
        .map(|i| {
            let names: Vec<String> = i
                .repo_digests
                .unwrap_or_default()
                .into_iter()
                .chain(i.repo_tags.unwrap_or_default())
                .take(MAX_NAMES_PER_IMAGE)
                .collect();
            json!({"names": names, "sizeBytes": i.size})
        })
        .collect())
}

/// Writes `status.images` (absent when there are none, as the API omits an
/// empty list).
pub fn apply(node: &mut Node, list: Vec<Value>) {
    if list.is_empty() {
        if node.status("images").is_some() {
            node.remove_status("images");
        }
    } else {
        node.set_status("images", Value::Array(list));
    }
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct Images;

impl Setter for Images {
    fn metadata() -> Metadata {
        Metadata::new("images", env!("CARGO_PKG_VERSION"))
            .description("the kubelet's Images setter: container images from the runtime's ListImages answer")
            // Where an exporter (`crictl images -o json`) writes imagesFile.
            .path("/var/lib/nodestatus")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        if config.images_file.is_none() && config.images.is_none() {
            let images = match host::container_runtime() {
                Ok(r) => from_runtime(r.images),
                Err(host::RuntimeError::Unavailable(m)) => {
                    return Err(format!("cannot list the runtime's images: {m}").into());
                }
                // No runtime, or not granted: no source.
                Err(_) => return Ok(()),
            };
            apply(node, node_images(images, config.max_images)?);
            return Ok(());
        }
        let answer = match (&config.images_file, config.images) {
            (Some(_), Some(_)) => {
                return Err("give imagesFile or images, not both".into());
            }
            (Some(path), None) => {
                let text = host::read_file(path).map_err(|e| format!("imagesFile: {e}"))?;
                serde_json::from_str(&text)
                    .map_err(|e| format!("imagesFile {path} is not JSON: {e}"))?
            }
            (None, Some(v)) => v,
            (None, None) => return Ok(()),
        };
        let images = parse_images(answer)?;
        let list = node_images(images, config.max_images)?;
        apply(node, list);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CRI `ListImages` answer as `crictl images -o json` prints it.
    const LIST: &str = include_str!("../tests/fixtures/list-images.json");

    fn fixture() -> Vec<Image> {
        parse_images(serde_json::from_str(LIST).unwrap()).unwrap()
    }

    #[test]
    fn parses_the_cri_answer() {
        let images = fixture();
        assert_eq!(images.len(), 5);
        assert_eq!(images[0].size, 321_520);
        let bare = parse_images(json!([{"id": "a", "size": 5}])).unwrap();
        assert_eq!(bare[0].size, 5);
        assert!(parse_images(json!([{"id": "a", "size": "x"}])).is_err());
        assert!(parse_images(json!({})).unwrap().is_empty());
    }

    #[test]
    fn sorted_by_size_then_id_with_five_names() {
        let list = node_images(fixture(), 50).unwrap();
        let sizes: Vec<u64> = list
            .iter()
            .map(|i| i["sizeBytes"].as_u64().unwrap())
            .collect();
        assert_eq!(
            sizes,
            vec![57_236_178, 18_182_961, 18_182_961, 321_520, 1024]
        );
        // Same size: the larger id first (the kubelet's ByImageSize).
        assert_eq!(
            list[1]["names"][0],
            "registry.k8s.io/coredns/coredns@sha256:1eeb4c7316bacb1d4c8ead65571cd92dd21e27359f0d4917f1a5822a73b75db1"
        );
        let busybox = list[2]["names"].as_array().unwrap();
        assert_eq!(busybox.len(), 5);
        assert!(busybox[0].as_str().unwrap().contains("@sha256:"));
        assert_eq!(busybox[1], "docker.io/library/busybox:1.36");
        assert_eq!(list[4]["names"], json!([]));
    }

    #[test]
    fn max_images_caps_the_list() {
        assert_eq!(node_images(fixture(), 2).unwrap().len(), 2);
        assert_eq!(node_images(fixture(), -1).unwrap().len(), 5);
        assert!(node_images(fixture(), 0).unwrap().is_empty());
        assert!(node_images(fixture(), -2).is_err());
    }

    #[test]
    fn the_runtime_images_come_from_cri_when_granted() {
        let image = |id: &str, size: u64| host::RuntimeImage {
            id: id.into(),
            repo_tags: vec![format!("{id}:1")],
            repo_digests: vec![format!("{id}@sha256:00")],
            size,
        };
        nodestatus_sdk::host::set_native_runtime(Some(Ok(host::ContainerRuntimeInfo {
            name: "containerd".into(),
            version: "1.6.20~ds1".into(),
            api_version: "v1".into(),
            conditions: Vec::new(),
            images: vec![image("pause", 300), image("busybox", 2_000)],
            handlers: Vec::new(),
        })));
        let mut node = Node::named("n");
        Images::set(&mut node).unwrap();
        assert_eq!(
            node.status("images").unwrap(),
            &json!([
                {"names": ["busybox@sha256:00", "busybox:1"], "sizeBytes": 2000},
                {"names": ["pause@sha256:00", "pause:1"], "sizeBytes": 300},
            ])
        );
        assert_eq!(
            node.part(),
            json!({"status": {"images": node.status("images").unwrap()}})
        );
        // The runtime down: the setter fails and the list stays.
        nodestatus_sdk::host::set_native_runtime(Some(Err(host::RuntimeError::Unavailable(
            "connection refused".into(),
        ))));
        assert!(Images::set(&mut node).is_err());
        assert_eq!(node.status("images").unwrap().as_array().unwrap().len(), 2);
        // No runtime configured: no source, an empty part.
        nodestatus_sdk::host::set_native_runtime(None);
        let mut node = Node::parse(&node.to_json()).unwrap();
        Images::set(&mut node).unwrap();
        assert_eq!(node.status("images").unwrap().as_array().unwrap().len(), 2);
        assert_eq!(node.part(), json!({}));
    }

    #[test]
    fn writes_and_clears_status_images() {
        let mut node = Node::named("n");
        apply(&mut node, node_images(fixture(), 1).unwrap());
        assert_eq!(node.status("images").unwrap().as_array().unwrap().len(), 1);
        apply(&mut node, Vec::new());
        assert!(node.status("images").is_none());
        assert_eq!(node.part(), json!({"status": {"images": null}}));
    }
}

nodestatus_sdk::export!(Images);
