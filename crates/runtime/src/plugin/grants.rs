//! A plugin's metadata checked, and its grants resolved against the
//! operator's.

use std::path::PathBuf;
use std::sync::Arc;

use nodestatus_apimachinery::Metadata;

use super::errors::{LoadError, MetadataError, Withheld};
use super::settings::{PathGrant, PluginSettings, Ungranted};
use crate::facts;
use crate::host_api::Grants;
use crate::host_api::bindings::exports::nodestatus::plugin0_2_1::setter::PluginInfo;
use crate::proc_view::{self, ProcGrant};

pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

pub(super) fn valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

pub(super) fn validate_metadata(m: PluginInfo) -> Result<Metadata, LoadError> {
    let bad = |e| Err(LoadError::BadMetadata(e));
    if !valid_name(&m.name) {
        return bad(MetadataError::Name(m.name));
    }
    if m.version.len() > 64 || m.description.len() > 1024 {
        return bad(MetadataError::TooLong);
    }
    for p in &m.paths {
        match facts::normalize_abs(p) {
            Some(n) if n.to_string_lossy() == *p => {}
            _ => return bad(MetadataError::Path(p.clone())),
        }
    }
    if let Some(e) = m.env.iter().find(|e| !valid_env_name(e)) {
        return bad(MetadataError::Env(e.clone()));
    }
    Ok(Metadata {
        name: m.name,
        version: m.version,
        description: m.description,
        paths: m.paths,
        env: m.env,
        affects_readiness: m.affects_readiness,
    })
}

/// Refuses grants that would expose the host's processes (see
/// [`proc_view`]): a `/proc/<pid>` or `/proc/self`. Returns what is withheld
/// from a directory that holds a procfs mount (served for `statvfs` only).
pub(super) fn check_process_grants(grants: &Grants) -> Result<Vec<Withheld>, LoadError> {
    let mut withheld = Vec::new();
    for g in &grants.paths {
        if !crate::facts::path_exists(&g.from) {
            continue;
        }
        match proc_view::classify(&g.from) {
            ProcGrant::Refused(reason) => {
                return Err(LoadError::GrantRefused {
                    path: g.from.clone(),
                    reason,
                });
            }
            ProcGrant::HoldsProc => withheld.push(Withheld::FilesUnderProc(g.path.clone())),
            ProcGrant::Plain
            | ProcGrant::KernelMm
            | ProcGrant::Root
            | ProcGrant::Allowed
            | ProcGrant::Driver => {}
        }
    }
    Ok(withheld)
}

/// Grants = what the plugin asks for ∩ what the operator granted.
pub(super) fn resolve_grants(
    m: &Metadata,
    s: &PluginSettings,
) -> Result<(Grants, Vec<Withheld>), LoadError> {
    let mut withheld = Vec::new();
    let mut paths = Vec::new();
    for asked in &m.paths {
        let asked_path = PathBuf::from(asked);
        // The innermost grant that holds the asked path serves it.
        let holder = s
            .paths
            .iter()
            .filter(|g| asked_path.starts_with(&g.path))
            .max_by_key(|g| g.path.components().count());
        if let Some(g) = holder {
            let from = g.host_path(&asked_path).expect("asked path is inside");
            paths.push(PathGrant {
                path: asked_path,
                from,
            });
            continue;
        }
        // The operator may grant less than asked: a directory inside it.
        let narrower: Vec<&PathGrant> = s
            .paths
            .iter()
            .filter(|g| g.path.starts_with(&asked_path))
            .collect();
        if narrower.is_empty() {
            withheld.push(Withheld::Path(asked.clone()));
        } else {
            paths.extend(narrower.into_iter().cloned());
            withheld.push(Withheld::PartOfPath(asked.clone()));
        }
    }
    paths.sort_by(|a, b| a.path.cmp(&b.path));
    paths.dedup();
    let mut env = Vec::new();
    for var in &m.env {
        if s.env.iter().any(|g| g == var) {
            if let Ok(value) = std::env::var(var) {
                env.push((var.clone(), value));
            }
        } else {
            withheld.push(Withheld::Env(var.clone()));
        }
    }
    if !withheld.is_empty() && s.on_ungranted == Ungranted::Refuse {
        return Err(LoadError::Ungranted {
            name: m.name.clone(),
            withheld,
        });
    }
    Ok((
        Grants {
            paths,
            env,
            config: Arc::from(s.config.to_string()),
            container_runtime: s.container_runtime,
            events_per_window: s.events_per_minute,
        },
        withheld,
    ))
}
