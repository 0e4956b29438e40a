//! The node's own shutdown, from logind, as the kubelet's node shutdown
//! manager sees it.
//!
//! Where logind runs on the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, or the
//! default `/run/dbus/system_bus_socket`), [`watch`] subscribes to
//! `org.freedesktop.login1.Manager`'s `PrepareForShutdown(bool start)`
//! signal and takes a delay inhibitor lock (`Inhibit("shutdown", ..,
//! "delay")`), so that logind waits (up to its `InhibitDelayMaxSec`, 5 s
//! by default) while the node is marked Ready=False `node is shutting down`
//! ([`AgentHandle::node_shutdown`](crate::agent::AgentHandle::node_shutdown)). The lock is released once that status is
//! written (or failed to be). `PrepareForShutdown(false)` (a cancelled
//! shutdown) clears the mark and takes a new lock.
//!
//! Where no system bus or no logind exists (a container without the bus
//! socket, a system without systemd), [`watch`] logs once at info and
//! returns: this is never fatal. A bus that goes away after start is
//! connected to again with a backoff.

use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use zbus::zvariant::OwnedFd;

use crate::agent::AgentHandle;

/// logind's well-known name on the system bus.
pub const LOGIND: &str = "org.freedesktop.login1";

/// What can go wrong between nodestatus and logind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No system bus to connect to.
    #[error(
        "cannot connect to the D-Bus system bus ({0}); mount /run/dbus/system_bus_socket \
         or set DBUS_SYSTEM_BUS_ADDRESS to watch for the node's shutdown"
    )]
    NoBus(#[source] zbus::Error),
    /// The system bus has no logind on it.
    #[error("no {LOGIND} on the system bus (not a systemd-logind system)")]
    NoLogind,
    /// A call to the bus failed.
    #[error("D-Bus call {call} failed: {source}")]
    Call {
        /// The call.
        call: &'static str,
        /// The bus's answer.
        #[source]
        source: zbus::Error,
    },
}

#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1",
    gen_blocking = false
)]
trait Manager {
    /// Takes an inhibitor lock; it lasts as long as the returned fd is open.
    fn inhibit(&self, what: &str, who: &str, why: &str, mode: &str) -> zbus::Result<OwnedFd>;

    /// Sent before a shutdown (`start` true) and when one is cancelled.
    #[zbus(signal)]
    fn prepare_for_shutdown(&self, start: bool) -> zbus::Result<()>;
}

/// How a watch on logind ended.
enum Ended {
    /// The watch was cancelled.
    Cancelled,
    /// The signal stream ended: the bus connection is gone.
    Disconnected,
}

/// Takes the delay lock; a failure (no right to it, say) is logged and the
/// watch goes on without one.
async fn take_lock(manager: &ManagerProxy<'_>) -> Option<OwnedFd> {
    match manager
        .inhibit(
            "shutdown",
            "nodestatus",
            "nodestatus marks the node not Ready before it shuts down",
            "delay",
        )
        .await
    {
        Ok(fd) => {
            tracing::debug!("took logind's delay inhibitor lock for shutdown");
            Some(fd)
        }
        Err(e) => {
            tracing::warn!(
                "{}; watching for the node's shutdown without it (logind will not wait for \
                 the status update)",
                Error::Call {
                    call: "Inhibit",
                    source: e
                }
            );
            None
        }
    }
}

/// Connects, checks that logind is there, subscribes and takes the lock.
async fn connect() -> Result<(zbus::Connection, ManagerProxy<'static>), Error> {
    let conn = zbus::Connection::system().await.map_err(Error::NoBus)?;
    let dbus = zbus::fdo::DBusProxy::new(&conn)
        .await
        .map_err(|source| Error::Call {
            call: "org.freedesktop.DBus",
            source,
        })?;
    let name = zbus::names::BusName::try_from(LOGIND).expect("a valid bus name");
    let has = dbus.name_has_owner(name).await.map_err(|e| Error::Call {
        call: "NameHasOwner",
        source: e.into(),
    })?;
    if !has {
        return Err(Error::NoLogind);
    }
    let manager = ManagerProxy::new(&conn)
        .await
        .map_err(|source| Error::Call {
            call: "org.freedesktop.login1.Manager",
            source,
        })?;
    Ok((conn, manager))
}

/// Follows PrepareForShutdown on one connection until it ends.
async fn follow(
    agent: &AgentHandle,
    manager: &ManagerProxy<'_>,
    cancel: &CancellationToken,
) -> Result<Ended, Error> {
    // Subscribe before taking the lock, so no signal falls between them.
    let mut signals = manager
        .receive_prepare_for_shutdown()
        .await
        .map_err(|source| Error::Call {
            call: "AddMatch PrepareForShutdown",
            source,
        })?;
    let mut lock = take_lock(manager).await;
    tracing::info!("watching logind for the node's shutdown (PrepareForShutdown)");
    loop {
        let signal = tokio::select! {
            _ = cancel.cancelled() => return Ok(Ended::Cancelled),
            s = signals.next() => s,
        };
        let Some(signal) = signal else {
            return Ok(Ended::Disconnected);
        };
        let start = match signal.args() {
            Ok(a) => a.start,
            Err(e) => {
                tracing::warn!("ignoring a malformed PrepareForShutdown: {e}");
                continue;
            }
        };
        if start {
            tracing::warn!("logind: PrepareForShutdown(true): the node is shutting down");
            if let Err(e) = agent.node_shutdown().await {
                tracing::warn!(
                    "could not write {}: {e}; the next pass retries",
                    crate::agent::SHUTTING_DOWN
                );
            }
            // The status is posted (or failed): let the shutdown go on.
            if lock.take().is_some() {
                tracing::info!("released logind's delay inhibitor lock");
            }
        } else {
            tracing::info!("logind: PrepareForShutdown(false): the shutdown was cancelled");
            agent.node_shutdown_cancelled();
            if lock.is_none() {
                lock = take_lock(manager).await;
            }
        }
    }
}

/// Watches logind for the node's own shutdown until `cancel` fires. Never
/// fails: where there is no bus or no logind it logs once and returns.
pub async fn watch(agent: AgentHandle, cancel: CancellationToken) {
    let mut backoff = Duration::from_secs(1);
    let mut connected_once = false;
    loop {
        let result = match connect().await {
            Ok((_conn, manager)) => {
                connected_once = true;
                backoff = Duration::from_secs(1);
                follow(&agent, &manager, &cancel).await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(Ended::Cancelled) => return,
            Ok(Ended::Disconnected) => {
                tracing::warn!("the D-Bus system bus went away; connecting again")
            }
            Err(e) if !connected_once => {
                tracing::info!(
                    "{e}: the node's shutdown is not watched; SIGUSR2 marks it shutting down"
                );
                return;
            }
            Err(e) => tracing::warn!("{e}; trying again in {backoff:?}"),
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}
