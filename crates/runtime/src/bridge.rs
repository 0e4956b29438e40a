//! The one bridge between synchronous and asynchronous code.
//!
//! - [`blocking`] runs blocking work from any caller without stalling an
//!   async runtime's worker;
//! - [`block_on`] drives a future to completion from any caller, async
//!   runtime or not.
//!
//! Every synchronous caller of async code, and every async caller that
//! runs blocking code in place, goes through one of these (the guest calls,
//! the CRI client of the one-shot commands, the CLI's registry commands).
//! Async code that hands blocking work to a thread of its own uses tokio's
//! `spawn_blocking`.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

/// Runs the blocking `f` from any caller: a plain thread, a `spawn_blocking`
/// task, a multi-threaded runtime's worker (through `block_in_place`, so the
/// worker's other tasks move elsewhere), or a current-thread runtime (on a
/// scoped thread, since that runtime cannot block in place).
pub fn blocking<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Err(_) => f(),
        Ok(RuntimeFlavor::CurrentThread) => std::thread::scope(|s| {
            // A fresh thread has no runtime of its own.
            s.spawn(f)
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
        Ok(_) => tokio::task::block_in_place(f),
    }
}

/// Drives `fut` to completion from any caller. Inside a multi-threaded
/// runtime, on that runtime (in place); elsewhere, on one process-wide
/// runtime of one worker, kept for the process's life, so that what a
/// future leaves behind (a connection's background task, say) lives on for
/// the next call.
pub fn block_on<F>(fut: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => {
            tokio::task::block_in_place(|| Handle::current().block_on(fut))
        }
        Ok(_) => blocking(|| shared().block_on(fut)),
        Err(_) => shared().block_on(fut),
    }
}

/// The process-wide runtime of [`block_on`] for callers outside any runtime.
fn shared() -> &'static Runtime {
    static SHARED: OnceLock<Runtime> = OnceLock::new();
    SHARED.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("nodestatus-bridge")
            .enable_all()
            .build()
            .expect("the bridge runtime starts (threads and an epoll instance)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer() -> u32 {
        tokio::task::yield_now().await;
        42
    }

    #[test]
    fn block_on_works_from_a_plain_thread() {
        assert_eq!(block_on(answer()), 42);
        // The runtime is kept: a task spawned by one call runs for the next.
        let (tx, rx) = tokio::sync::oneshot::channel();
        block_on(async move {
            tokio::spawn(async move {
                let _ = tx.send(7u32);
            });
        });
        assert_eq!(block_on(rx).unwrap(), 7);
    }

    #[test]
    fn block_on_works_inside_either_kind_of_runtime() {
        let current = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(current.block_on(async { block_on(answer()) }), 42);
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(multi.block_on(async { block_on(answer()) }), 42);
        assert_eq!(multi.block_on(async { blocking(|| 5) }), 5);
        assert_eq!(current.block_on(async { blocking(|| 6) }), 6);
    }
}
