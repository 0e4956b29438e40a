//! `nodestatus plugin check`, `plugin list`, and the registry commands
//! `plugin push`, `plugin sign` and `plugin pull`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use nodestatus_engine::config::Layers;
use nodestatus_engine::pipeline::Setter;
use nodestatus_engine::plugin_dir::{PluginDir, ReloadEvent};
use nodestatus_runtime::Plugin;

/// Inspect plugins.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Print a plugin's metadata, or say exactly why it would be refused.
    Check {
        /// The plugin file.
        file: PathBuf,
        /// The settings it is checked against.
        #[command(flatten)]
        layers: Layers,
    },
    /// Load a plugin directory and the config's image plugins (taken as
    /// `run` takes them) and list them in run order, with versions, hashes
    /// and grants, and every file that would be refused.
    List {
        /// The settings, pluginDir included.
        #[command(flatten)]
        layers: Layers,
    },
    /// Publish a component to a registry (the CNCF Wasm OCI layout, with
    /// its WIT world and version as annotations); prints its digest.
    Push {
        /// The component file.
        file: PathBuf,
        /// Where: `HOST[:PORT]/repo:tag`.
        reference: String,
        /// The settings (`registries:` for the credentials and CA).
        #[command(flatten)]
        layers: Layers,
    },
    /// Sign an artifact's digest with a key (cosign-compatible, stored at
    /// the `sha256-<hex>.sig` tag); a tag signs the digest it names now.
    Sign {
        /// `HOST[:PORT]/repo@sha256:<hex>` (or `:tag`).
        reference: String,
        /// The private key (PEM, ECDSA P-256).
        #[arg(long)]
        key: PathBuf,
        /// The settings (`registries:` for the credentials and CA).
        #[command(flatten)]
        layers: Layers,
    },
    /// Fetch an artifact as a node would (digests, signature, the loader's
    /// checks) and print what would load, or why it would be refused.
    Pull {
        /// `HOST[:PORT]/repo:tag` or `...@sha256:<hex>`.
        reference: String,
        /// The public key the signature must check with. Default: the
        /// `verify` of the config's plugin with this image, else the
        /// top-level `verify`.
        #[arg(long)]
        key: Option<PathBuf>,
        /// The plugin's name (a config's key, a plugin directory's file
        /// name), which the plugin must declare. Default: the key of the
        /// config's plugin with this image, else the name the plugin
        /// declares.
        #[arg(long)]
        name: Option<String>,
        /// Write the component, when it would load, to `DIR/<name>.wasm`
        /// (a plugin directory takes it as it is).
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
        /// The settings (`registries:`, `verify:`, the plugin's section).
        #[command(flatten)]
        layers: Layers,
    },
}

impl Command {
    /// Runs the subcommand.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        match self {
            Command::Check { file, layers } => check(&file, &layers),
            Command::List { layers } => list(&layers),
            Command::Push {
                file,
                reference,
                layers,
            } => registry::push(&file, &reference, &layers),
            Command::Sign {
                reference,
                key,
                layers,
            } => registry::sign(&reference, &key, &layers),
            Command::Pull {
                reference,
                key,
                name,
                output_dir,
                layers,
            } => registry::pull(
                &reference,
                key,
                registry::Naming { name, output_dir },
                &layers,
            ),
        }
    }
}

fn check(file: &std::path::Path, layers: &Layers) -> anyhow::Result<ExitCode> {
    let config = Arc::new(layers.load()?);
    let dir = PluginDir::open_for_one_pass(&config, None, super::compiler_exe())?;
    // A plugin is named by its file: its settings are that name's.
    let name = nodestatus_runtime::name_of_file(file).unwrap_or_default();
    let plugin_config = Arc::new(config.plugin_settings(&name));
    match Plugin::load_file(dir.runtime(), file, &|_| plugin_config.sandbox.clone()) {
        Ok(p) => {
            let s = Setter::new(Arc::new(p), plugin_config.clone());
            let p = s.plugin();
            let (allow, deny) = s.config().fields.describe();
            let info = serde_json::json!({
                "file": file,
                "sha256": p.sha256(),
                "wit": p.interface(),
                "metadata": p.metadata(),
                "granted": {"paths": p.granted_paths(), "withheld": p.withheld()},
                "reacts": p.subscriptions().map(|r| r.describe()),
                "enabled": s.config().enabled,
                "affectsReadiness": s.affects_readiness(),
                "order": s.order(),
                "fields": {"allow": allow, "deny": deny},
            });
            println!("{}", serde_json::to_string_pretty(&info)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!(
                "{} would be refused: {}",
                file.display(),
                nodestatus_runtime::error_chain(&e)
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

fn list(layers: &Layers) -> anyhow::Result<ExitCode> {
    let config = Arc::new(layers.load()?);
    let dir = PluginDir::open_for_one_pass(&config, None, super::compiler_exe())?;
    // The image plugins are listed as a node would run them.
    let _images = super::once::take_images(&config, &dir, &mut std::io::stderr())?;
    let events = dir.rescan();
    println!(
        "{:>6}  {:<20} {:<10} {:<14} grants",
        "order", "plugin", "version", "sha256"
    );
    for s in dir.current().setters() {
        let p = s.plugin();
        let grants: Vec<String> = p.granted_paths().iter().map(|g| g.to_string()).collect();
        println!(
            "{:>6}  {:<20} {:<10} {:<14} {}",
            s.order(),
            p.name(),
            p.metadata().version,
            &p.sha256()[..12],
            if grants.is_empty() {
                "-".to_owned()
            } else {
                grants.join(",")
            }
        );
    }
    let mut refused = 0;
    for e in &events {
        if let Some(line) = e.not_running() {
            println!("{line}");
        }
        if matches!(e, ReloadEvent::Failed { .. }) {
            refused += 1;
        }
    }
    Ok(if refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The registry commands: each reads `registries:` from the settings.
mod registry {
    use std::path::{Path, PathBuf};
    use std::process::ExitCode;
    use std::sync::Arc;

    use anyhow::Context as _;
    use nodestatus_engine::config::{Config, Layers};
    use nodestatus_engine::pipeline::Setter;
    use nodestatus_registry::{Client, Digest, PrivateKey, PublicKey, PushMeta, Reference};
    use nodestatus_runtime::{Plugin, block_on};

    fn client(config: &Config) -> anyhow::Result<Client> {
        Client::new(config.registries.clone()).context("the registries settings")
    }

    /// `HOST/repo@sha256:...`: the immutable name of `digest`.
    fn pinned(reference: &Reference, digest: &Digest) -> String {
        format!(
            "{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        )
    }

    pub fn push(file: &Path, reference: &str, layers: &Layers) -> anyhow::Result<ExitCode> {
        let config = Arc::new(layers.load()?);
        let reference = Reference::parse(reference)?;
        // Only what would load is published: the loader's own checks.
        let dir = nodestatus_engine::plugin_dir::PluginDir::open_for_one_pass(
            &config,
            None,
            super::super::compiler_exe(),
        )?;
        let bytes = nodestatus_runtime::read_plugin_file(file)?;
        let name = nodestatus_runtime::name_of_file(file).unwrap_or_default();
        let settings = config.plugin_settings(&name).sandbox;
        let plugin = Plugin::load_bytes(dir.runtime(), file, &bytes, &|_| settings.clone())
            .map_err(|e| {
                anyhow::anyhow!(
                    "{} is not a plugin that would load: {}",
                    file.display(),
                    nodestatus_runtime::error_chain(&e)
                )
            })?;
        let meta = PushMeta {
            world: plugin.interface().world().to_owned(),
            version: plugin.metadata().version.clone(),
            exports: vec![plugin.interface().export().to_owned()],
            imports: Vec::new(),
        };
        let digest = block_on(client(&config)?.push(&reference, &bytes, &meta))?;
        println!("{}", pinned(&reference, &digest));
        Ok(ExitCode::SUCCESS)
    }

    pub fn sign(reference: &str, key: &Path, layers: &Layers) -> anyhow::Result<ExitCode> {
        let config = layers.load()?;
        let reference = Reference::parse(reference)?;
        let key = PrivateKey::read(key)?;
        let digest = block_on(client(&config)?.sign(&reference, &key))?;
        println!("{}", pinned(&reference, &digest));
        Ok(ExitCode::SUCCESS)
    }

    /// Why a pull printed no verified signature.
    const NO_KEY: &str = "no key: give --key, or a config whose plugin of this repository has a `verify` key or policy, or a top-level `verify`";

    /// What `plugin pull` calls the plugin and where it writes it.
    pub struct Naming {
        /// `--name`.
        pub name: Option<String>,
        /// `--output-dir`.
        pub output_dir: Option<PathBuf>,
    }

    pub fn pull(
        reference: &str,
        key: Option<PathBuf>,
        naming: Naming,
        layers: &Layers,
    ) -> anyhow::Result<ExitCode> {
        let config = Arc::new(layers.load()?);
        let reference = Reference::parse(reference)?;
        // The plugin whose image this is gives the name, settings and key:
        // the same reference, else the same repository (a tag of an image
        // that the config pins by digest, or the reverse).
        let same_repository = |r: &Reference| {
            r.registry() == reference.registry() && r.repository() == reference.repository()
        };
        let section = config
            .plugins
            .iter()
            .find(|(_, p)| p.image.as_ref().is_some_and(|i| i.reference == reference))
            .or_else(|| {
                config.plugins.iter().find(|(_, p)| {
                    p.image
                        .as_ref()
                        .is_some_and(|i| same_repository(&i.reference))
                })
            });
        // The name a node would know it by: --name, else the config's key;
        // else none was chosen, and the plugin's own declared name is taken
        // (learnt at the load below; the repository's last segment until
        // then).
        let chosen = naming
            .name
            .clone()
            .or_else(|| section.map(|(n, _)| n.clone()));
        let mut name = chosen.clone().unwrap_or_else(|| {
            reference
                .repository()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned()
        });
        let pins = section
            .and_then(|(_, p)| p.image.as_ref()?.reference.digest().cloned())
            .filter(|_| !reference.is_pinned());
        // --key, else what the plugin's section requires (its own verify,
        // else the top-level one), else the top-level verify.
        let (key, policy) = match (key, section.and_then(|(_, p)| p.image.as_ref())) {
            (Some(key), _) => (Some(key), None),
            (None, Some(image)) => (image.key.clone(), image.policy.clone()),
            (None, None) => (config.verify_key.clone(), config.verify_policy.clone()),
        };
        let key = key.map(|k| PublicKey::read(&k)).transpose()?;
        let built = policy.as_ref().map(|p| p.build()).transpose()?;
        let client = client(&config)?;
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        let fetched = block_on(async {
            // The signatures are of the manifest's digest: checked before
            // the blob is downloaded, as the engine's puller does.
            let digest = client.resolve(&reference).await?;
            let verified = match (&key, &built) {
                (Some(key), _) => Some(client.verify(&reference, &digest, key).await?),
                (None, Some(policy)) => {
                    let matched = client.verify_policy(&reference, &digest, policy).await?;
                    matched
                        .into_iter()
                        .next()
                        .map(|signature| nodestatus_registry::Verified {
                            digest: digest.clone(),
                            signature,
                        })
                }
                (None, None) => None,
            };
            let mut artifact = client.pull(&reference.with_digest(&digest), cap).await?;
            artifact.reference = reference.clone();
            anyhow::Ok((artifact, verified))
        });
        let (artifact, verified) = match fetched {
            Ok(f) => f,
            Err(e) => {
                eprintln!("{reference} would be refused: {e:#}");
                return Ok(ExitCode::FAILURE);
            }
        };
        let dir = nodestatus_engine::plugin_dir::PluginDir::open_for_one_pass(
            &config,
            None,
            super::super::compiler_exe(),
        )?;
        let load = |name: &str| {
            let plugin_config = Arc::new(config.plugin_settings(name));
            let file = PathBuf::from(format!("{name}.wasm"));
            let loaded = Plugin::load_bytes(dir.runtime(), &file, &artifact.bytes, &|_| {
                plugin_config.sandbox.clone()
            });
            (plugin_config, loaded)
        };
        let (mut plugin_config, mut loaded) = load(&name);
        if chosen.is_none()
            && let Err(nodestatus_runtime::LoadError::NameMismatch { declared, .. }) = &loaded
        {
            name = declared.clone();
            (plugin_config, loaded) = load(&name);
        }
        let mut info = serde_json::json!({
            "plugin": name,
            "reference": reference.to_string(),
            "digest": artifact.digest.to_string(),
            "pinned": pinned(&reference, &artifact.digest),
            "layout": format!("{:?}", artifact.layout),
            "world": artifact.world(),
            "version": artifact.version(),
            "bytes": artifact.bytes.len(),
            "sha256": nodestatus_runtime::sha256_hex(&artifact.bytes),
            "signature": match (&verified, &key) {
                (Some(v), None) => serde_json::json!({
                    "policy": policy.as_ref().map(|p| p.field.clone()),
                    "verified": true,
                    "keyless": v.signature.material.is_some(),
                }),
                (Some(v), Some(key)) => serde_json::json!({
                    "key": key.path().display().to_string(),
                    "verified": true,
                    // Where the signature that checked was found.
                    "format": match v.signature.format {
                        nodestatus_registry::signature::SignatureFormat::SimpleSigning => "cosign-sig",
                        nodestatus_registry::signature::SignatureFormat::Dsse => "sigstore-bundle",
                    },
                }),
                _ => serde_json::json!({
                    "key": null,
                    "verified": false,
                    "why": NO_KEY,
                }),
            },
        });
        if verified.is_none() {
            eprintln!("warning: {reference}: the signature was not checked: {NO_KEY}");
        }
        if let Some(pinned) = pins.filter(|d| *d != artifact.digest) {
            eprintln!(
                "warning: {reference} names {}, but the config's plugin {name} pins {pinned}: a node runs that one",
                artifact.digest
            );
        }
        match loaded {
            Ok(p) => {
                let s = Setter::new(Arc::new(p), plugin_config.clone());
                info["metadata"] = serde_json::to_value(s.plugin().metadata())?;
                info["order"] = serde_json::json!(s.order());
                info["granted"] = serde_json::json!({
                    "paths": s.plugin().granted_paths(),
                    "withheld": s.plugin().withheld(),
                });
                if let Some(dir) = &naming.output_dir {
                    let path = dir.join(format!("{name}.wasm"));
                    nodestatus_files::write_atomic(&path, &artifact.bytes)
                        .with_context(|| format!("writing {}", path.display()))?;
                    info["file"] = serde_json::json!(path);
                }
                println!("{}", serde_json::to_string_pretty(&info)?);
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                println!("{}", serde_json::to_string_pretty(&info)?);
                match &e {
                    // The name was chosen (--name, the config's key) and the
                    // plugin declares another: say which to change.
                    nodestatus_runtime::LoadError::NameMismatch { declared, .. } => eprintln!(
                        "{reference} would be refused by the loader: the plugin declares the name {declared:?}, not {name:?} ({}): a plugin runs under the name it declares, so name it {declared} there",
                        if naming.name.is_some() {
                            "--name"
                        } else {
                            "the config's plugin with this image"
                        }
                    ),
                    _ => eprintln!(
                        "{reference} would be refused by the loader: {}",
                        nodestatus_runtime::error_chain(&e)
                    ),
                }
                Ok(ExitCode::FAILURE)
            }
        }
    }
}
