//! The top-level settings, each defined once.
//!
//! [`settings!`] is the one list: from each entry it derives the config
//! file's key (and the flag of the same name), the field of [`ConfigFile`],
//! the layering ([`ConfigFile::over`]), the row of `config check`
//! ([`Config::provenance`]) and the live-reload class
//! ([`Class`], used by [`crate::live_config`]). A new setting is one entry
//! here and its validation in `validate.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Config, GoDuration, Labels, PluginFile, Result, Taints, VerifyFile};

/// Whether a running engine can change a setting when the config file is
/// edited ([`crate::live_config`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Put in force at the next pass boundary.
    Live,
    /// Only at a restart: a file that changes it is refused whole.
    Restart,
}

/// One top-level setting: its key in the file, its class, and how its value
/// in force is shown.
pub struct Setting {
    /// The key, as written in the file (`nodeStatusUpdateFrequency`).
    pub key: &'static str,
    /// Whether it can change while the engine runs.
    pub class: Class,
    /// The value in force, for `config check`.
    pub show: fn(&Config) -> String,
    /// Whether a layer sets it.
    pub set: fn(&ConfigFile) -> bool,
    /// Its flag's clap attributes (`skip`: the file only).
    pub arg: &'static str,
    /// Its field of [`ConfigFile`] (and its flag's clap id).
    pub field: &'static str,
    /// Its type as the list writes it (`GoDuration`).
    pub ty: &'static str,
    /// Its doc comment, a line each.
    pub doc: &'static str,
}

impl Setting {
    /// Whether it is a flag too (else the file only).
    pub fn has_flag(&self) -> bool {
        self.arg != "skip"
    }
}

impl std::fmt::Debug for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setting")
            .field("key", &self.key)
            .field("class", &self.class)
            .finish_non_exhaustive()
    }
}

fn or_none<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "(none)".to_owned(), |v| v.to_string())
}

fn list<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    let s: Vec<String> = items.into_iter().map(|i| i.to_string()).collect();
    if s.is_empty() {
        "(none)".to_owned()
    } else {
        s.join(",")
    }
}

macro_rules! settings {
    ($(
        $(#[doc = $doc:literal])*
        $key:literal $field:ident: $ty:ty, $class:ident,
            #[arg($($arg:tt)*)]
            show |$c:ident| $show:expr;
    )*) => {
        /// The settings as one layer gives them: the config file, or the
        /// flags.
        ///
        /// One shape serves both: each field is a config file key (its
        /// KubeletConfiguration name where one exists) and a flag of the
        /// same name (`nodeStatusUpdateFrequency`,
        /// `--node-status-update-frequency`). [`Layers::load`] puts the
        /// flags over the file (or over the embedded [`DEFAULT_CONFIG`] when
        /// no file is given), and [`ConfigFile::validate`] turns the result
        /// into a [`Config`].
        #[derive(Debug, Clone, Default, PartialEq, Deserialize, clap::Args)]
        #[serde(deny_unknown_fields)]
        pub struct ConfigFile {
            $(
                $(#[doc = $doc])*
                #[serde(rename = $key)]
                #[arg($($arg)*)]
                pub $field: Option<$ty>,
            )*
            /// Per-plugin settings, by plugin name (file only).
            #[serde(default)]
            #[arg(skip)]
            pub plugins: BTreeMap<String, PluginFile>,
        }

        /// Every top-level setting, in the order of the file's reference.
        pub const SETTINGS: &[Setting] = &[$(
            Setting {
                key: $key,
                class: Class::$class,
                show: |$c: &Config| $show,
                set: |f: &ConfigFile| f.$field.is_some(),
                arg: stringify!($($arg)*),
                field: stringify!($field),
                ty: stringify!($ty),
                doc: concat!($($doc, "\n",)*),
            },
        )*];

        impl ConfigFile {
            /// `top` over `self`: each setting that `top` sets replaces
            /// this one's. The plugin sections are the file's alone.
            pub fn over(self, top: ConfigFile) -> ConfigFile {
                ConfigFile {
                    $( $field: top.$field.or(self.$field), )*
                    plugins: self.plugins,
                }
            }
        }
    };
}

settings! {
    /// nodeName: the Node's name (default: the hostname, or
    /// hostnameOverride).
    "nodeName" node_name: String, Restart,
        #[arg(long)]
        show |c| c.node_name.clone();
    /// hostnameOverride: replaces the hostname in the node's name and
    /// Hostname address.
    "hostnameOverride" hostname_override: String, Restart,
        #[arg(long)]
        show |c| or_none(c.hostname_override.as_ref());
    /// nodeIP: the node's IP, or two comma-separated for dual stack
    /// (`10.0.0.11,fd00::11`).
    "nodeIP" node_ip: String, Restart,
        #[arg(long = "node-ip")]
        show |c| list(&c.node_ips);
    /// nodeLabels: labels added at registration (flag: key=value,...);
    /// refused at start when NodeRestriction would refuse them from a node.
    "nodeLabels" node_labels: Labels, Restart,
        #[arg(long, value_name = "KEY=VALUE,...")]
        show |c| list(c.node_labels.iter().map(|(k, v)| format!("{k}={v}")));
    /// registerNode: create the Node (true, the default) or wait for it
    /// (false).
    "registerNode" register_node: bool, Restart,
        #[arg(long)]
        show |c| c.register_node.to_string();
    /// registerWithTaints: taints added at registration (flag:
    /// key=value:Effect,...); the effect is NoSchedule, PreferNoSchedule or
    /// NoExecute.
    "registerWithTaints" register_with_taints: Taints, Restart,
        #[arg(long, value_name = "KEY=VALUE:EFFECT,...")]
        show |c| list(c.register_with_taints.iter().map(|t| format!("{}={}:{}", t.key, t.value, t.effect)));
    /// providerID: `spec.providerID`, 1 to 512 characters.
    "providerID" provider_id: String, Restart,
        #[arg(long = "provider-id")]
        show |c| or_none(c.provider_id.as_ref());
    /// nodeStatusUpdateFrequency: how often the setters run (10s; 100ms
    /// to 5m).
    "nodeStatusUpdateFrequency" node_status_update_frequency: GoDuration, Live,
        #[arg(long)]
        show |c| format!("{:?}", c.node_status_update_frequency);
    /// nodeStatusReportFrequency: how often an unchanged status is
    /// reported anyway (5m; at least nodeStatusUpdateFrequency, at most 1h);
    /// follows nodeStatusUpdateFrequency when only that one is set.
    "nodeStatusReportFrequency" node_status_report_frequency: GoDuration, Live,
        #[arg(long)]
        show |c| format!("{:?}", c.node_status_report_frequency);
    /// incrementalPasses: `on` (the default) calls a setter only when an
    /// input of its last call changed (the node, a file or host answer it
    /// read) and at least once per nodeStatusReportFrequency, its last part
    /// standing in between; `off` calls every setter every pass, as the
    /// kubelet does; `check` calls every setter and logs (and counts in
    /// nodestatus_incremental_mismatches_total) a part that would have
    /// stood and differs. The environment's NODESTATUS_INCREMENTAL_PASSES,
    /// when set, is the default.
    "incrementalPasses" incremental_passes: String, Live,
        #[arg(long)]
        show |c| c.incremental.to_string();
    /// nodeLeaseDurationSeconds: the Lease's duration (40; 1 to 3600).
    "nodeLeaseDurationSeconds" node_lease_duration_seconds: i64, Restart,
        #[arg(long)]
        show |c| c.node_lease_duration_seconds.to_string();
    /// nodeStatusMaxImages: the most images reported (50; -1 for no limit).
    "nodeStatusMaxImages" node_status_max_images: i64, Live,
        #[arg(long, allow_hyphen_values = true)]
        show |c| c.node_status_max_images.to_string();
    /// pluginDir: the directory of `*.wasm` setters, watched for changes
    /// (/etc/nodestatus/plugins).
    "pluginDir" plugin_dir: PathBuf, Restart,
        #[arg(long)]
        show |c| c.plugin_dir.display().to_string();
    /// cacheDir: the precompile cache directory (`$XDG_CACHE_HOME`, else
    /// `~/.cache`, else /var/cache; then `nodestatus/precompiled`).
    "cacheDir" cache_dir: PathBuf, Restart,
        #[arg(long)]
        show |c| c.cache_dir.display().to_string();
    /// cacheMaxSize: the precompile cache's size cap (512Mi; 16Mi to 1Ti):
    /// the least recently used entries are evicted past it.
    "cacheMaxSize" cache_max_size: String, Restart,
        #[arg(long)]
        show |c| format!("{} bytes", c.cache_max_bytes);
    /// compileTimeout: the deadline of one plugin's compilation, in a
    /// child process (2m; 1s to 1h).
    "compileTimeout" compile_timeout: GoDuration, Restart,
        #[arg(long)]
        show |c| format!("{:?}", c.compile_limits.timeout);
    /// compileMemoryLimit: the memory one plugin's compilation may
    /// allocate (2Gi; 64Mi to 64Gi).
    "compileMemoryLimit" compile_memory_limit: String, Restart,
        #[arg(long)]
        show |c| format!("{} bytes", c.compile_limits.memory);
    /// compiler: which compilers load a plugin that the precompile cache
    /// does not hold: `tiered` (Winch at once, Cranelift in the background,
    /// its code cached; the default), `cranelift` (a load waits for
    /// Cranelift) or `winch` (Winch only: the least compile time and
    /// memory, slower calls).
    "compiler" compiler: String, Restart,
        #[arg(long)]
        show |c| c.compiler.to_string();
    /// containerRuntimeEndpoint: the container runtime's CRI socket,
    /// `unix:///...` (the kubelet's default,
    /// unix:///run/containerd/containerd.sock); empty: none.
    "containerRuntimeEndpoint" container_runtime_endpoint: String, Restart,
        #[arg(long)]
        show |c| match (&c.container_runtime_endpoint, c.container_runtime_defaulted) {
            (None, _) => "(none)".into(),
            (Some(e), true) => format!("{e} (if the socket is there)"),
            (Some(e), false) => e.clone(),
        };
    /// runtimeRequestTimeout: the deadline of one CRI call (2s; 100ms to
    /// 2m).
    "runtimeRequestTimeout" runtime_request_timeout: GoDuration, Restart,
        #[arg(long)]
        show |c| format!("{:?}", c.runtime_request_timeout);
    /// companion: beside a real kubelet, never create the node, no lease,
    /// no Ready at shutdown; only the plugins' own fields are patched
    /// (false).
    "companion" companion: bool, Restart,
        #[arg(long)]
        show |c| c.companion.to_string();
    /// reRegisterDeletedNode: register the node again when it is deleted
    /// while running (off by default: the kubelet never registers twice in
    /// one run).
    "reRegisterDeletedNode" re_register_deleted_node: bool, Restart,
        #[arg(long)]
        show |c| c.re_register_deleted_node.to_string();
    /// cloudProvider: `external` means a cloud-controller-manager owns the
    /// addresses, providerID and the cloud labels; the node registers with
    /// the `uninitialized` taint.
    "cloudProvider" cloud_provider: String, Restart,
        #[arg(long)]
        show |c| if c.external_cloud_provider { "external".to_owned() } else { "(none)".to_owned() };
    /// registries: per `HOST[:PORT]`, a CA bundle (`ca`), plain HTTP
    /// (`insecure`) and pull credentials (`auth`, a dockerconfigjson file)
    /// (file only).
    "registries" registries: nodestatus_registry::Registries, Live,
        #[arg(skip)]
        show |c| list(c.registries.0.iter().map(|(host, r)| {
            let mut s = host.clone();
            if let Some(ca) = &r.ca {
                s += &format!(" ca={}", ca.display());
            }
            if r.insecure {
                s += " insecure";
            }
            if let Some(auth) = &r.auth {
                s += &format!(" auth={}", auth.display());
            }
            s
        }));
    /// registryCacheMaxSize: the registry cache's size bound (1Gi; 1Mi to
    /// 1Ti): past it, the versions no plugin uses go, least recently used
    /// first.
    "registryCacheMaxSize" registry_cache_max_size: String, Live,
        #[arg(long)]
        show |c| format!("{} bytes", c.registry_cache.max_bytes);
    /// registryCacheMaxAge: how long a version that no plugin uses stays
    /// in the registry cache after its last use (168h; 1m to 8760h).
    "registryCacheMaxAge" registry_cache_max_age: GoDuration, Live,
        #[arg(long)]
        show |c| format!("{:?}", c.registry_cache.max_unused);
    /// verify: the key (or the signature policy) every plugin `image` must
    /// be signed with, unless its own `verify` names another (file only).
    "verify" verify: VerifyFile, Live,
        #[arg(skip)]
        show |c| match &c.verify_policy {
            Some(p) => format!("a signature policy (trustedRoot {})", p.trusted_root.as_ref().map_or("none".into(), |r| r.display().to_string())),
            None => or_none(c.verify_key.as_ref().map(|p| p.display())),
        };
}

/// The config reference (`docs/reference/config.md`), rendered from
/// [`SETTINGS`]: each key with its flag, its type, when a change takes
/// effect, and its doc comment (which holds its default and range).
pub fn reference() -> String {
    use clap::Args;
    let flags = ConfigFile::augment_args(clap::Command::new("nodestatus"));
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Written from the list of settings (`settings!` in \
         crates/engine/src/config/settings.rs) by `NODESTATUS_BLESS=1 cargo test -p \
         nodestatus --bin nodestatus reference`; do not edit. -->\n\n\
         The top-level keys of the config file (`--config`; without it the \
         embedded default, which `nodestatus config default` prints), each also a \
         flag of `run`, `once`, `simulate`, `plugin` and `config check` unless it \
         says *file only*: flags over the file over the defaults. In parentheses: \
         the default, then the accepted range. The per-plugin \
         sections (`plugins.<name>`) are in [Configuration](../configuration.md).\n\n\
         | key | flag | type | a change while it runs |\n|---|---|---|---|\n",
    );
    for s in SETTINGS {
        let flag = flags
            .get_arguments()
            .find(|a| a.get_id() == s.field)
            .and_then(|a| a.get_long())
            .map_or_else(|| "file only".to_owned(), |l| format!("`--{l}`"));
        let class = match s.class {
            Class::Live => "in force at the next pass",
            Class::Restart => "needs a restart",
        };
        out += &format!(
            "| [`{0}`](#{1}) | {flag} | {2} | {class} |\n",
            s.key,
            s.key.to_lowercase(),
            type_name(s.ty)
        );
    }
    for s in SETTINGS {
        let doc: Vec<&str> = s.doc.lines().map(str::trim).collect();
        let doc = doc.join(" ");
        let doc = doc.strip_prefix(&format!("{}: ", s.key)).unwrap_or(&doc);
        let mut first = doc.chars();
        let doc: String = first
            .next()
            .map(|c| c.to_uppercase())
            .into_iter()
            .flatten()
            .chain(first)
            .collect();
        out += &format!("\n## {}\n\n{doc}\n", s.key);
    }
    out
}

/// The reader's name of a setting's type.
fn type_name(ty: &str) -> &str {
    match ty {
        "String" => "string",
        "bool" => "boolean",
        "i64" => "integer",
        "PathBuf" => "path",
        "GoDuration" => "duration (`10s`, `5m`, `1h30m`)",
        "Labels" => "map of labels",
        "Taints" => "list of taints",
        "nodestatus_registry::Registries" => "map, by `HOST[:PORT]`",
        "VerifyFile" => "a key, or a signature policy",
        other => other,
    }
}

/// The keys accepted at the top of the file: every setting, and `plugins`.
pub fn top_keys() -> Vec<&'static str> {
    SETTINGS
        .iter()
        .map(|s| s.key)
        .chain(std::iter::once("plugins"))
        .collect()
}

impl Config {
    /// The settings of `class` whose value in force differs between `self`
    /// and `other`, by key: the values as [`Config::provenance`] shows them,
    /// after the defaults and the rules between settings
    /// (`nodeStatusReportFrequency` follows `nodeStatusUpdateFrequency`
    /// when only that one is set).
    pub fn changed(&self, other: &Config, class: Class) -> Vec<&'static str> {
        SETTINGS
            .iter()
            .filter(|s| s.class == class && (s.show)(self) != (s.show)(other))
            .map(|s| s.key)
            .collect()
    }

    /// Each top-level setting in force, its value, and where it came from:
    /// `flag` (set in `flags`), `file` (set in `written`), or `default`.
    pub fn provenance(
        &self,
        written: &ConfigFile,
        flags: &ConfigFile,
    ) -> Vec<(&'static str, String, &'static str)> {
        SETTINGS
            .iter()
            .map(|s| {
                let source = if (s.set)(flags) {
                    "flag"
                } else if (s.set)(written) {
                    "file"
                } else {
                    "default"
                };
                (s.key, (s.show)(self), source)
            })
            .collect()
    }
}

/// The default configuration, embedded in the binary: the grants and
/// settings the bundled setters need (`deploy/default-config.yaml`). Used
/// when no `--config` is given; `nodestatus config default` prints it.
pub const DEFAULT_CONFIG: &str = include_str!("../../../../deploy/default-config.yaml");

/// Where the settings come from: `--config FILE` (else the embedded
/// [`DEFAULT_CONFIG`]), and the flags over it. The one place where the
/// precedence is written: flags over file over defaults.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Layers {
    /// Config file (YAML, KubeletConfiguration field names). Default: the
    /// embedded default config (`nodestatus config default` prints it).
    #[arg(long = "config", id = "config", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The flags, each over the file's field of the same name.
    #[command(flatten)]
    pub flags: ConfigFile,
}

impl Layers {
    /// The file as written: `--config`, else the embedded default.
    pub fn written(&self) -> Result<ConfigFile> {
        match &self.file {
            Some(p) => ConfigFile::read(p),
            None => ConfigFile::parse(DEFAULT_CONFIG, Path::new("(embedded default config)")),
        }
    }

    /// The flags over the file, validated.
    pub fn load(&self) -> Result<Config> {
        self.written()?.over(self.flags.clone()).validate()
    }
}
