//! nodestatus's integration tests: real components built from `plugins/`,
//! hostile WAT components, real files in watched directories, and (in
//! `kube`) a real kube-apiserver.

mod admission;
mod agent_loops;
mod cli;
mod common;
mod config;
mod cosign;
mod cri;
mod events;
mod features;
mod fleet;
mod fleet_peer;
mod grants;
mod guests;
mod guides;
mod hostile;
mod hot_reload;
mod incremental;
mod keyless;
mod kube;
mod live_config;
mod loading;
mod logind;
mod newcomer;
mod operator;
mod oras;
mod output;
mod parts;
mod patch_props;
mod process;
mod registry;
mod registry_auth;
mod registry_policy;
mod reporters;
mod sandbox;
mod scaffold;
mod second_hour;
mod tiers;
mod watch_list;
