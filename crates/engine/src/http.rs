//! The HTTP endpoint: `/livez`, `/readyz`, `/metrics` (Prometheus text) and
//! `/status` (JSON: loaded plugins with versions and hashes, the last result
//! of each setter, and the last node the server returned).

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::AgentHandle;

/// The router, for tests and for [`serve`].
pub fn router(agent: AgentHandle) -> Router {
    Router::new()
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .with_state(agent)
}

async fn readyz(State(agent): State<AgentHandle>) -> impl IntoResponse {
    // A plugin source that fails (a registry down) leaves the version that
    // runs: ready, with the detail below.
    let mut detail = String::new();
    for (plugin, problem) in agent.plugins().source_problems() {
        detail += &format!("\nplugin {plugin}: {problem}");
    }
    match agent.ready_reason() {
        None => (StatusCode::OK, format!("ok{detail}")),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}{detail}")),
    }
}

async fn metrics(State(agent): State<AgentHandle>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        agent.metrics().encode(),
    )
}

async fn status(State(agent): State<AgentHandle>) -> Json<Value> {
    let pass = agent.last_pass().map(|r| {
        r.setters
            .iter()
            .map(|s| {
                let mut v = json!({
                    "plugin": s.plugin,
                    "version": s.version,
                    "durationSeconds": s.duration.as_secs_f64(),
                    "affectsReadiness": s.affects_readiness,
                });
                match &s.outcome {
                    Ok(changed) => v["changed"] = json!(changed),
                    Err(e) => v["error"] = json!({"kind": e.kind.as_str(), "message": e.message}),
                }
                v
            })
            .collect::<Vec<_>>()
    });
    let plugins: Vec<Value> = agent
        .plugins()
        .current()
        .setters()
        .iter()
        .map(|s| {
            let p = s.plugin();
            json!({
                "name": p.name(),
                "version": p.metadata().version,
                "wit": p.interface(),
                "sha256": p.sha256(),
                "file": p.source(),
                "order": s.order(),
                "withheld": p.withheld(),
            })
        })
        .collect();
    let streams: serde_json::Map<String, Value> = agent
        .streams()
        .map(|s| s.status())
        .unwrap_or_default()
        .into_iter()
        .map(|(plugin, s)| (plugin, json!(s)))
        .collect();
    Json(json!({
        "node": agent.name(),
        "plugins": plugins,
        "streams": streams,
        "files": agent.plugins().status(),
        "lastPass": pass,
        "lastNode": agent.cached_node().as_deref(),
    }))
}

/// Serves the endpoint on `addr` until `cancel` fires, then drains for at
/// most 5 s.
pub async fn serve(
    addr: SocketAddr,
    agent: AgentHandle,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    serve_on(bind(addr).await?, agent, cancel).await
}

/// Binds the endpoint's address; `nodestatus run` does it before anything
/// else starts, so that a busy port stops the start with this error instead
/// of an engine without `/readyz` and `/metrics`.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// [`serve`] on a listener already bound ([`bind`]).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    agent: AgentHandle,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "serving /livez /readyz /metrics /status");
    let shutdown = cancel.clone();
    let server = axum::serve(listener, router(agent))
        .with_graceful_shutdown(async move { shutdown.cancelled().await });
    tokio::select! {
        r = server => r,
        _ = async { cancel.cancelled().await; tokio::time::sleep(Duration::from_secs(5)).await } => Ok(()),
    }
}
