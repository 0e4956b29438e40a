//! Loading one plugin file: which names are plugin files, and the load
//! itself under the plugin's config.

use std::path::Path;
use std::sync::Arc;

use nodestatus_runtime::{Plugin, Runtime, TierUp, name_of_file};

use super::Refusal;
use crate::pipeline::Setter;

/// Whether a directory entry's name is a plugin file.
pub fn is_plugin_file_name(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".wasm") && name.len() > ".wasm".len()
}

/// `bytes` loaded as the plugin of `file` under `config`: the setter, and
/// Cranelift's compile that is to replace Winch's code, if any.
pub(super) fn load_setter(
    runtime: &Runtime,
    file: &Path,
    bytes: &[u8],
    config: &Arc<crate::config::PluginConfig>,
) -> Result<(Setter, Option<TierUp>), Refusal> {
    if !config.enabled {
        // Not even compiled.
        return Err(Refusal::Disabled(name_of_file(file).unwrap_or_default()));
    }
    let (plugin, tier_up) =
        Plugin::load_deferring_tier_up(runtime, file, bytes, &|_| config.sandbox.clone())
            .map_err(Refusal::Failed)?;
    for w in plugin.withheld() {
        // What the operator can grant is worth a warning; the files under
        // a directory that holds /proc (`/`, granted for statvfs) never
        // are: that grant serves what it is for.
        if w.grantable() {
            tracing::warn!(
                plugin = plugin.name(),
                "not granted, loading without it: {w}"
            );
        } else {
            tracing::info!(plugin = plugin.name(), "granted for statvfs only: {w}");
        }
    }
    Ok((Setter::new(Arc::new(plugin), config.clone()), tier_up))
}
