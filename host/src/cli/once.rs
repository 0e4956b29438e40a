//! `nodestatus once`: run every setter once over a node and print the
//! resulting Node.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;

use nodestatus_engine::config::Layers;
use nodestatus_engine::pipeline::{self, PassReport};
use nodestatus_engine::plugin_dir::{PluginDir, ReloadEvent};
use nodestatus_runtime::CallContext;

/// Run every setter once over a node and print the resulting Node.
///
/// The node comes from --node, or is a fresh initial node named after
/// nodeName (default: this machine's hostname). What each plugin changed,
/// or why it failed, goes to stderr. Beside the plugin directory's, the
/// config's plugins pulled from a registry (`image:`) run too, taken as
/// `run` takes them (the registry cache, else the registry, each signature
/// verified, `pullPolicy` followed); one that cannot be had fails the
/// command. --plugin files given alone run alone.
#[derive(clap::Args)]
pub struct Args {
    /// A plugin file to run; repeatable, beside or instead of the plugin
    /// directory (given alone, only these run). Its file name is its name,
    /// as in a directory.
    #[arg(long = "plugin", value_name = "FILE")]
    plugins: Vec<PathBuf>,
    /// Exit with status 1 when a plugin is refused at load or a setter
    /// fails (a policy refusal included), so that CI can gate on it.
    #[arg(long)]
    strict: bool,
    /// What goes to stdout: the resulting Node as JSON or YAML, or a
    /// unified diff of the input node against it.
    #[arg(long, value_enum, default_value_t = Output::Json)]
    output: Output,
    /// A Node as JSON to start from.
    #[arg(long)]
    node: Option<PathBuf>,
    /// The Kubernetes release (MAJOR.MINOR, for example 1.36) whose
    /// kubelet the node is written as: the fields and units that release's
    /// kubelet writes, as `run` writes them for a server of that release.
    /// Default: the newest nodestatus matches (1.37).
    #[arg(long, value_name = "MAJOR.MINOR", value_parser = parse_release)]
    kubernetes_version: Option<nodestatus_model::node::kubelet::ServerVersion>,
    /// The settings, pluginDir and the plugins' grants included.
    #[command(flatten)]
    layers: Layers,
}

impl Args {
    /// Loads the plugins, runs one pass and prints the result.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        let cfg = Arc::new(self.layers.load()?);
        // --plugin files alone run alone; with --plugin-dir (or without
        // files) the directory's plugins run too.
        let dir = match (&self.layers.flags.plugin_dir, self.plugins.is_empty()) {
            (None, false) => None,
            _ => Some(cfg.plugin_dir.as_path()),
        };
        // A plugin directory that is not there (the default one, on a
        // machine that is not a node) with image plugins in the config:
        // those run alone, as the config's own. One given by --plugin-dir
        // must be there.
        let images = cfg
            .plugins
            .values()
            .filter(|p| p.enabled && p.image.is_some())
            .count();
        let set = match dir {
            Some(d)
                if self.plugins.is_empty()
                    && self.layers.flags.plugin_dir.is_none()
                    && images > 0
                    && !d.exists() =>
            {
                eprintln!(
                    "the plugin directory {} (pluginDir) is not here: only the config's {images} image plugin(s) run",
                    d.display()
                );
                OnceFiles::empty()?
            }
            _ => OnceFiles::gather(dir, &self.plugins)?,
        };
        let present = nodestatus_engine::config::plugin_names_in(set.dir()).unwrap_or_default();
        for w in cfg.misspelled_plugins(&present) {
            eprintln!("warning: {w}");
        }
        let plugins =
            PluginDir::open_for_one_pass(&cfg, Some(set.dir().to_owned()), super::compiler_exe())?;
        // The image plugins run beside the directory's, as on a node.
        let _images = match dir {
            Some(_) => take_images(&cfg, &plugins, &mut std::io::stderr())?,
            None => None,
        };
        let node = match &self.node {
            Some(p) => read_node(p)?,
            None => nodestatus_model::node::kubelet::initial_node(
                &cfg.node_name,
                &cfg.hostname(&nodestatus_runtime::facts::Facts::default()),
            ),
        };
        // What a kubelet of the release writes (the newest supported by
        // default), as `run` writes for a server of that release (none in
        // companion mode).
        let release = self
            .kubernetes_version
            .unwrap_or(nodestatus_model::node::kubelet::ServerVersion::NEWEST);
        let options = pipeline::PassOptions {
            companion: cfg.companion,
            release: Some(release),
            ..Default::default()
        };
        let (mut loads, waited, out, report) = evaluate(&plugins, &node, &context(&cfg), options);
        for e in &mut loads {
            set.name_origin(e.file_mut());
        }
        let mut waits = plugins.status();
        for w in &mut waits {
            set.name_origin(&mut w.file);
        }
        write_waits(&mut std::io::stderr(), &waits, waited)?;
        write_report(&mut std::io::stderr(), &loads, &report)?;
        print!("{}", self.output.render(&node, &out)?);
        let failed = failed(&loads, &report);
        Ok(if self.strict && failed > 0 {
            eprintln!("--strict: {failed} plugin(s) refused or failed");
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// Why a command that runs one pass stops: an image plugin of the config
/// that it cannot get.
#[derive(Debug, thiserror::Error)]
#[error(
    "plugin {plugin} (image: {image}) cannot be had: {error}. No pass runs without it, since it would not be the node's (a node goes on with its failurePolicy, {policy}): {remedy}, or set enabled: false in plugins.{plugin} to run the pass without it"
)]
pub struct ImageUnavailable {
    /// The plugin.
    pub plugin: String,
    /// Its image.
    pub image: String,
    /// Why, with every cause.
    pub error: String,
    /// Its `failurePolicy`.
    pub policy: &'static str,
    /// What to do about it, by the failure's kind ([`remedy`]).
    pub remedy: String,
}

/// What to do about an image plugin that cannot be had, by the kind of
/// its failure (`nodestatus_engine::oci::Error::kind`).
pub fn remedy(kind: &str, plugin: &str, image: &str) -> String {
    let host = image.split('/').next().unwrap_or_default();
    match kind {
        "unsigned" => format!(
            "sign its digest with a key that plugins.{plugin}.verify (or the top-level verify) trusts, as docs/publishing.md step 4 shows"
        ),
        "bad-signature" => format!(
            "sign its digest with the key that plugins.{plugin}.verify (or the top-level verify) names, or name the signer's public key there; `nodestatus plugin pull {image} --key KEY` checks a key"
        ),
        "unauthorized" => format!("give credentials that may pull it (registries.{host}.auth)"),
        "settings" => {
            format!("fix the setting the error names (plugins.{plugin}, or registries.{host})")
        }
        "cache" => "make cacheDir a directory of this user's that no one else may write".to_owned(),
        "tls" => format!(
            "trust the registry's CA (registries.{host}.ca), or for a plain-HTTP registry set registries.{host}.insecure: true"
        ),
        "not-found" => format!("push it, or name one that exists in plugins.{plugin}.image"),
        "digest-mismatch" | "too-large" | "layout" | "refused" => format!(
            "publish a component that loads (`nodestatus plugin pull {image}` says why this one does not), or name another in plugins.{plugin}.image"
        ),
        // unreachable, timeout, server, not-cached.
        _ => format!("make the registry reachable (registries.{host})"),
    }
}

/// Takes the config's image plugins for a command that runs one pass, as
/// `run` takes them ([`nodestatus_engine::oci::Puller::prepare`]), and
/// hands them to `plugins` (loaded by its next rescan). Each is written in
/// a private directory, which lives as long as the value returned (`None`
/// when the config has no image plugin); what each came from goes to
/// `out`. One that cannot be had is an error ([`ImageUnavailable`]); one
/// kept at its cached version while the registry fails is said on `out`.
pub fn take_images(
    cfg: &nodestatus_engine::config::Config,
    plugins: &Arc<PluginDir>,
    out: &mut dyn Write,
) -> anyhow::Result<Option<tempfile::TempDir>> {
    let any = cfg.plugins.values().any(|p| p.enabled && p.image.is_some());
    if !any {
        return Ok(None);
    }
    let tmp = tempfile::tempdir()?;
    let mut puller = nodestatus_engine::oci::Puller::new(cfg, plugins.clone())
        .with_active_dir(tmp.path().join("registry-plugins"));
    let reports = nodestatus_runtime::block_on(puller.prepare(cfg));
    for r in &reports {
        let digest = r.running.as_ref().map(ToString::to_string);
        match (&r.error, digest) {
            (None, digest) => writeln!(
                out,
                "plugin {} from {}: {} ({})",
                r.plugin,
                r.reference,
                digest.unwrap_or_default(),
                r.result
            )?,
            (Some(e), Some(digest)) => writeln!(
                out,
                "warning: plugin {} from {}: {e}; the cached {digest} runs, as on a node",
                r.plugin, r.reference
            )?,
            (Some(e), None) => {
                let policy = cfg
                    .plugins
                    .get(&r.plugin)
                    .and_then(|p| p.image.as_ref())
                    .map_or("open", |i| i.failure_policy.as_str());
                let image = r.reference.to_string();
                return Err(ImageUnavailable {
                    plugin: r.plugin.clone(),
                    remedy: remedy(r.result, &r.plugin, &image),
                    image,
                    error: e.clone(),
                    policy,
                }
                .into());
            }
        }
    }
    Ok(Some(tmp))
}

/// The context of a one-shot pass: this machine's facts, and the container
/// runtime's (the kubelet's default socket unless the config names another;
/// none when the default socket is not there).
fn context(cfg: &nodestatus_engine::config::Config) -> CallContext {
    CallContext {
        container_runtime: cfg
            .cri_client()
            .filter(|c| c.present())
            .map(|c| std::sync::Arc::new(c.facts_blocking().map_err(|e| e.to_string()))),
        ..CallContext::default()
    }
}

/// Writes, for people, how long `once` waited for its plugins to load, and
/// for which: the ones it compiled (not in the precompile cache), each with
/// its own load time.
pub fn write_waits(
    out: &mut dyn Write,
    files: &[nodestatus_engine::plugin_dir::FileStatus],
    waited: std::time::Duration,
) -> std::io::Result<()> {
    let compiled: Vec<String> = files
        .iter()
        .filter(|f| f.compiled)
        .map(|f| {
            let name = f
                .plugin
                .clone()
                .unwrap_or_else(|| f.file.display().to_string());
            format!(
                "{name} ({}, {:.1}s)",
                f.compiler.unwrap_or("?"),
                f.load_seconds.unwrap_or_default()
            )
        })
        .collect();
    let loaded = files.iter().filter(|f| f.load_seconds.is_some()).count();
    if compiled.is_empty() {
        writeln!(
            out,
            "loaded {loaded} plugin file(s) in {:.1}s, no compile waited for",
            waited.as_secs_f64()
        )
    } else {
        writeln!(
            out,
            "loaded {loaded} plugin file(s) in {:.1}s, done; it waited for the compile of {}",
            waited.as_secs_f64(),
            compiled.join(", ")
        )
    }
}

/// Writes, for people, what loading did and what each setter changed.
pub fn write_report(
    out: &mut dyn Write,
    loads: &[ReloadEvent],
    report: &PassReport,
) -> std::io::Result<()> {
    for line in loads.iter().filter_map(ReloadEvent::not_running) {
        writeln!(out, "{line}")?;
    }
    let builtins = report.builtins.iter().map(|s| ("built-in ", s));
    for (kind, s) in report.setters.iter().map(|s| ("", s)).chain(builtins) {
        let plugin = format!("{kind}{}", s.plugin);
        match &s.outcome {
            Ok(changed) if changed.is_empty() => writeln!(
                out,
                "{plugin} {}: no change ({:.1?})",
                s.version, s.duration
            )?,
            Ok(changed) => {
                let fields: Vec<String> = changed.iter().map(ToString::to_string).collect();
                writeln!(
                    out,
                    "{plugin} {}: set {} ({:.1?})",
                    s.version,
                    fields.join(", "),
                    s.duration
                )?
            }
            Err(e) => writeln!(
                out,
                "{plugin} {}: FAILED [{}] {e}",
                s.version,
                e.kind.as_str()
            )?,
        }
    }
    for (plugin, path) in &report.released {
        writeln!(
            out,
            "removed {path} (owned by {plugin}, which is no longer loaded)"
        )?;
    }
    for (plugin, e) in &report.events {
        writeln!(
            out,
            "event from {plugin}: {} {}: {}",
            e.event_type.as_str(),
            e.reason,
            e.message
        )?;
    }
    Ok(())
}

/// Loads the directory (waiting for every load), runs one pass over
/// `node`, and returns the loads, how long they took, and the result.
pub fn evaluate(
    dir: &PluginDir,
    node: &Value,
    ctx: &CallContext,
    options: pipeline::PassOptions,
) -> (Vec<ReloadEvent>, std::time::Duration, Value, PassReport) {
    let started = std::time::Instant::now();
    let loads = dir.rescan();
    let waited = started.elapsed();
    let set = dir.current();
    let (out, report) = pipeline::pass(dir.runtime(), &set, node, ctx, options);
    (loads, waited, out, report)
}

/// How many plugins were refused at load or failed in the pass (a policy
/// refusal is a failure): what `once --strict` gates on.
pub fn failed(loads: &[ReloadEvent], report: &PassReport) -> usize {
    loads
        .iter()
        .filter(|e| matches!(e, ReloadEvent::Failed { .. }))
        .count()
        + report.failures().count()
        + report
            .builtins
            .iter()
            .filter(|s| s.outcome.is_err())
            .count()
}

/// What `once` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The resulting Node, as pretty JSON.
    Json,
    /// The resulting Node, as YAML.
    Yaml,
    /// A unified diff of the input node's pretty JSON against the result's.
    Diff,
}

impl Output {
    /// `after` (from `before`) in this form, ending with a newline.
    pub fn render(self, before: &Value, after: &Value) -> anyhow::Result<String> {
        Ok(match self {
            Output::Json => format!("{}\n", serde_json::to_string_pretty(after)?),
            Output::Yaml => serde_yaml::to_string(after)?,
            Output::Diff => {
                let old = format!("{}\n", serde_json::to_string_pretty(before)?);
                let new = format!("{}\n", serde_json::to_string_pretty(after)?);
                similar::TextDiff::from_lines(&old, &new)
                    .unified_diff()
                    .context_radius(3)
                    .header("node (input)", "node (after the setters)")
                    .to_string()
            }
        })
    }
}

/// The plugins of one `once`: a directory, or the files given one by one
/// (copied into a private directory, under their own file names), or both.
pub struct OnceFiles {
    dir: std::path::PathBuf,
    /// Each copy's source.
    origins: std::collections::HashMap<std::path::PathBuf, std::path::PathBuf>,
    _tmp: Option<tempfile::TempDir>,
}

impl OnceFiles {
    /// `dir` as it is when no `files` are given; otherwise a private
    /// directory with `dir`'s `*.wasm` files and `files`. Two files with
    /// one name are refused.
    pub fn gather(dir: Option<&Path>, files: &[std::path::PathBuf]) -> anyhow::Result<Self> {
        if files.is_empty() {
            let dir = dir.ok_or_else(|| anyhow::anyhow!("give --plugin-dir or --plugin"))?;
            if !dir.is_dir() {
                anyhow::bail!(
                    "the plugin directory {} is not a directory: give --plugin-dir DIR or --plugin FILE",
                    dir.display()
                );
            }
            return Ok(Self {
                dir: dir.to_owned(),
                origins: Default::default(),
                _tmp: None,
            });
        }
        let tmp = tempfile::tempdir()?;
        let mut sources: Vec<std::path::PathBuf> = Vec::new();
        if let Some(d) = dir {
            for entry in std::fs::read_dir(d)
                .map_err(|e| anyhow::anyhow!("cannot read --plugin-dir {}: {e}", d.display()))?
            {
                let path = entry?.path();
                if path.extension().is_some_and(|x| x == "wasm") {
                    sources.push(path);
                }
            }
        }
        sources.extend(files.iter().cloned());
        let mut origins = std::collections::HashMap::new();
        for src in &sources {
            let name = src
                .file_name()
                .ok_or_else(|| anyhow::anyhow!("--plugin {} names no file", src.display()))?;
            let dest = tmp.path().join(name);
            if dest.exists() {
                anyhow::bail!(
                    "two plugins named {}: {} and another; a plugin is named by its file",
                    name.to_string_lossy(),
                    src.display()
                );
            }
            let bytes = nodestatus_runtime::read_plugin_file(src)
                .map_err(|e| anyhow::anyhow!("--plugin {}: {e}", src.display()))?;
            std::fs::write(&dest, bytes)?;
            origins.insert(dest, src.clone());
        }
        Ok(Self {
            dir: tmp.path().to_owned(),
            origins,
            _tmp: Some(tmp),
        })
    }

    /// Names a file of the private directory by its source, the path the
    /// user gave.
    pub fn name_origin(&self, file: &mut std::path::PathBuf) {
        if let Some(src) = self.origins.get(file) {
            file.clone_from(src);
        }
    }

    /// A private directory with no plugin in it.
    pub fn empty() -> anyhow::Result<Self> {
        let tmp = tempfile::tempdir()?;
        Ok(Self {
            dir: tmp.path().to_owned(),
            origins: Default::default(),
            _tmp: Some(tmp),
        })
    }

    /// The directory to load.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Reads a node from a JSON file.
pub fn read_node(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read node file {}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", path.display()))?;
    nodestatus_model::policy::validate(&v)
        .map_err(|e| anyhow::anyhow!("{} is not a Node: {e}", path.display()))?;
    Ok(v)
}

/// `--kubernetes-version`: `MAJOR.MINOR`, a leading `v` and a patch
/// allowed (`v1.36.3` is 1.36).
fn parse_release(text: &str) -> Result<nodestatus_model::node::kubelet::ServerVersion, String> {
    let t = text.trim().trim_start_matches('v');
    let mut parts = t.split('.');
    let (major, minor) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    nodestatus_model::node::kubelet::ServerVersion::parse(major, minor)
        .filter(|v| v.major == 1)
        .ok_or_else(|| {
            format!("{text:?} is not a Kubernetes release (MAJOR.MINOR, for example 1.36)")
        })
}
