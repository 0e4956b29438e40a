//! The one directory watcher: inotify events, debounced, backed by a check
//! on a period (inotify can overflow, and a mounted ConfigMap's updates are
//! symlink swaps that some file systems do not report).
//!
//! The plugin directory ([`crate::plugin_dir`]) and the config file
//! ([`crate::live_config`]) both watch through [`spawn`].

use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a burst of events (write, rename, chmod) settles before the
/// callback runs.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// How often the watcher looks at its stop condition.
const TICK: Duration = Duration::from_millis(100);

/// Whether the watcher may run on its period alone when inotify cannot
/// watch the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inotify {
    /// A directory that cannot be watched is an error.
    Required,
    /// Fall back to the period (logged at debug).
    BestEffort,
}

/// Watches `dir` (not recursively) on a thread named `name` until `stop`
/// returns true: calls `on_change` after every debounced burst of events,
/// and every `period` when none came.
pub fn spawn(
    name: &str,
    dir: &Path,
    period: Duration,
    inotify: Inotify,
    stop: impl Fn() -> bool + Send + 'static,
    mut on_change: impl FnMut() + Send + 'static,
) -> Result<JoinHandle<()>, notify::Error> {
    use notify_debouncer_full::notify::RecursiveMode;
    let (tx, rx) = std::sync::mpsc::channel();
    let debouncer = notify_debouncer_full::new_debouncer(DEBOUNCE, None, move |res| {
        let _ = tx.send(res);
    })
    .and_then(|mut d| d.watch(dir, RecursiveMode::NonRecursive).map(|()| d));
    let debouncer = match (debouncer, inotify) {
        (Ok(d), _) => Some(d),
        (Err(e), Inotify::Required) => return Err(e),
        (Err(e), Inotify::BestEffort) => {
            tracing::debug!(dir = %dir.display(), error = %e, "no inotify watch; checking every {period:?}");
            None
        }
    };
    Ok(std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // Kept alive for the thread's life: dropping it ends the events.
            let _debouncer = debouncer;
            let mut since = Duration::ZERO;
            while !stop() {
                match rx.recv_timeout(TICK) {
                    Ok(Ok(_events)) => {}
                    Ok(Err(errors)) => {
                        for e in errors {
                            tracing::warn!(error = %e, "directory watch error; checking again");
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        since += TICK;
                        if since < period {
                            continue;
                        }
                    }
                    // No watch (best effort): the period alone.
                    Err(RecvTimeoutError::Disconnected) => {
                        std::thread::sleep(TICK);
                        since += TICK;
                        if since < period {
                            continue;
                        }
                    }
                }
                since = Duration::ZERO;
                on_change();
            }
        })
        .expect("spawning a watcher thread"))
}
