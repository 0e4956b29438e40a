//! What a plugin by reference (`image:`) costs the engine, against the
//! test kit's real registry (Debian's `docker-registry` on loopback, TLS and
//! htpasswd; `nodestatus_tests::registry`), with a signature required:
//!
//! - `start/cached-digest`: a start with a pinned digest already cached:
//!   `Puller::start_from_cache` (the cache read, every hash checked again,
//!   the cached signature checked with the key, the file written for the
//!   loader) and the plugin directory's `rescan` (the code from the
//!   precompile cache, linked, `metadata` called). No request is made.
//! - `tick/tag-unchanged`: a tag re-resolved that still names the running
//!   digest: one `Puller::tick` (one HEAD of the manifest over TLS with
//!   basic auth; nothing read, written or loaded).
//! - `tick/new-version`: a new digest under the tag: one `Puller::tick` that
//!   resolves it, pulls the manifest and the layer, fetches and checks the
//!   signature, caches all three, writes the file, and has the loader
//!   compile (a new component: a precompile cache miss) and swap it in.
//!
//! A plain harness (no criterion): each case runs a few times and the
//! median and range are printed, since `new-version` compiles for seconds.
//! Run with `cargo bench -p nodestatus --bench registry_pull`; the results
//! are in docs/benchmarks.md. Needs
//! `scripts/ensure-packages.sh docker-registry apache2-utils openssl`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nodestatus_engine::config::{Config, ConfigFile};
use nodestatus_engine::oci::Puller;
use nodestatus_engine::plugin_dir::PluginDir;
use nodestatus_registry::{Client, PrivateKey, PushMeta};
use nodestatus_tests::built;
use nodestatus_tests::registry::{Registry, key_pair};

fn config(
    dir: &std::path::Path,
    registry: &Registry,
    image: &str,
    key: &std::path::Path,
) -> Config {
    let yaml = format!(
        "pluginDir: {}\ncacheDir: {}\nregistries:\n  {}:\n    ca: {}\n    auth: {}\nverify: {{key: {}}}\nplugins:\n  probe:\n    image: {image}\n    pullInterval: 1s\n",
        dir.join("plugins").display(),
        dir.join("cache").display(),
        registry.host(),
        registry.ca().display(),
        registry.settings().auth.unwrap().display(),
        key.display(),
    );
    ConfigFile::parse(&yaml, std::path::Path::new("bench.yaml"))
        .unwrap()
        .validate()
        .unwrap()
}

/// The component with a custom section appended: the same plugin, another
/// digest (and another precompile cache key).
fn variant(component: &[u8], n: usize) -> Vec<u8> {
    let name = b"nodestatus-bench";
    let mut payload = vec![name.len() as u8];
    payload.extend(name);
    payload.extend(n.to_string().as_bytes());
    let mut out = component.to_vec();
    out.push(0);
    out.push(payload.len() as u8);
    out.extend(payload);
    out
}

fn print(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<24} median {:>9.2} ms   min {:>9.2} ms   max {:>9.2} ms   ({} runs)",
        ms(samples[samples.len() / 2]),
        ms(samples[0]),
        ms(samples[samples.len() - 1]),
        samples.len()
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    let registry = Registry::start();
    let (private, public) = key_pair(dir.path(), "vendor");
    let key = PrivateKey::read(&private).unwrap();
    let client = Client::new(registry.registries()).unwrap();
    let meta = PushMeta {
        world: nodestatus_runtime::Interface::V0_2.world().into(),
        version: "1.0.0".into(),
        ..Default::default()
    };
    let probe = std::fs::read(built::PROBE).unwrap();
    let tag = registry.reference("vendor/probe:stable");
    let push = |bytes: &[u8]| {
        rt.block_on(async {
            let digest = client.push(&tag, bytes, &meta).await.unwrap();
            client.sign(&tag.with_digest(&digest), &key).await.unwrap();
            digest
        })
    };
    let digest = push(&probe);
    let pinned = format!("{}/vendor/probe@{digest}", registry.host());

    // A cached digest at start: pulled (and compiled) once, then each
    // start reads it from the cache.
    let cfg = Arc::new(config(dir.path(), &registry, &pinned, &public));
    let plugins = PluginDir::open(&cfg, None, None).unwrap();
    let mut puller = Puller::new(&cfg, plugins.clone());
    rt.block_on(puller.tick(&cfg));
    assert_eq!(
        plugins.current().setters().len(),
        1,
        "{:?}",
        plugins.status()
    );
    let mut samples = Vec::new();
    for _ in 0..10 {
        let plugins = PluginDir::open(&cfg, None, None).unwrap();
        let start = Instant::now();
        let mut puller = Puller::new(&cfg, plugins.clone());
        puller.start_from_cache(&cfg);
        plugins.rescan();
        samples.push(start.elapsed());
        assert_eq!(plugins.current().setters().len(), 1);
    }
    print("start/cached-digest", samples);

    // A tag that still names the running digest.
    let tagged = tag.to_string();
    let cfg = Arc::new(config(dir.path(), &registry, &tagged, &public));
    let plugins = PluginDir::open(&cfg, None, None).unwrap();
    let mut puller = Puller::new(&cfg, plugins.clone());
    rt.block_on(puller.tick(&cfg));
    let mut samples = Vec::new();
    for _ in 0..20 {
        puller.due_now();
        let start = Instant::now();
        let reports = rt.block_on(puller.tick(&cfg));
        samples.push(start.elapsed());
        assert_eq!(reports[0].result, "unchanged", "{reports:?}");
    }
    print("tick/tag-unchanged", samples);

    // A new version under the tag each time.
    let mut samples = Vec::new();
    for n in 0..5 {
        let bytes = variant(&probe, n);
        push(&bytes);
        puller.due_now();
        let start = Instant::now();
        let reports = rt.block_on(puller.tick(&cfg));
        samples.push(start.elapsed());
        assert_eq!(reports[0].result, "pulled", "{reports:?}");
    }
    print("tick/new-version", samples);
}
