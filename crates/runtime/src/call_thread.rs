//! Threads for the calls that may block in the kernel.
//!
//! A guest's file operations run on the thread of its call (WASI's
//! `allow_blocking_current_thread`): a read of a `/proc` file costs a system
//! call, not a trip through tokio's blocking pool and back. Neither an epoch
//! nor a tokio timer can stop a thread blocked in the kernel, though (a read
//! of a FIFO with no writer, a hung network mount, a stuck driver), so a call
//! whose sandbox holds a directory where that can happen runs on a thread of
//! its own, and its caller waits for it at most until the deadline. Past it the call is abandoned:
//! the caller reports a timeout and goes on, and the thread ends when the
//! kernel lets it go.
//!
//! The threads are reused: at most [`MAX_IDLE`] wait for work, and a thread
//! is started when none is idle. A plugin whose abandoned call is still
//! blocked is not called again until that call returns (see
//! [`Stuck`]), so each plugin holds at most one blocked thread.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Idle threads kept for the next calls.
const MAX_IDLE: usize = 4;

/// A call, run on a call thread. It returns the delivery of its result,
/// which the thread runs once it is idle again, so that the caller's next
/// call finds it free.
type Job = Box<dyn FnOnce() -> Box<dyn FnOnce() + Send> + Send>;

static IDLE: Mutex<Vec<SyncSender<Job>>> = Mutex::new(Vec::new());

/// Since when one plugin's abandoned call has been blocked, if it is.
/// Shared by the plugin and its call thread, which clears it on return.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stuck(Arc<Mutex<Option<Instant>>>);

impl Stuck {
    /// When the blocked call was abandoned, if one still is.
    pub fn since(&self) -> Option<Instant> {
        *self.0.lock().expect("stuck lock")
    }

    fn set(&self, value: Option<Instant>) {
        *self.0.lock().expect("stuck lock") = value;
    }
}

/// Where one call stands, as its caller and its thread see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Running,
    Returned,
    Abandoned,
}

/// Runs `f` on a call thread and waits for it at most `limit`. `None` when
/// the limit passed first: `stuck` then holds the time, until `f` returns.
/// A panic in `f` goes on in the caller, as if `f` had run there.
pub(crate) fn run<T: Send + 'static>(
    limit: Duration,
    stuck: &Stuck,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::sync_channel(1);
    let call = Arc::new(Mutex::new(Call::Running));
    let (state, mark) = (call.clone(), stuck.clone());
    dispatch(Box::new(move || {
        let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let mut state = state.lock().expect("call lock");
        if *state == Call::Abandoned {
            mark.set(None);
        }
        *state = Call::Returned;
        Box::new(move || {
            // The caller may be gone (abandoned): nobody to tell.
            let _ = tx.send(value);
        })
    }));
    let (got, rx) = crate::blocking(move || (rx.recv_timeout(limit), rx));
    let answer = |value: std::thread::Result<T>| match value {
        Ok(value) => Some(value),
        Err(panic) => std::panic::resume_unwind(panic),
    };
    if let Ok(value) = got {
        return answer(value);
    }
    let mut state = call.lock().expect("call lock");
    if *state == Call::Returned {
        // It returned between the timeout and the lock: its value is on the way.
        drop(state);
        return rx.recv().ok().and_then(answer);
    }
    *state = Call::Abandoned;
    stuck.set(Some(Instant::now()));
    None
}

fn dispatch(mut job: Job) {
    loop {
        let idle = IDLE.lock().expect("call threads lock").pop();
        let Some(worker) = idle else { break };
        match worker.send(job) {
            Ok(()) => return,
            // Its thread has ended; try the next.
            Err(mpsc::SendError(back)) => job = back,
        }
    }
    let (tx, rx) = mpsc::sync_channel(1);
    tx.send(job).expect("a fresh channel has room");
    std::thread::Builder::new()
        .name("nodestatus-call".into())
        .spawn(move || work(tx, rx))
        .expect("cannot start a call thread");
}

fn work(me: SyncSender<Job>, jobs: Receiver<Job>) {
    while let Ok(job) = jobs.recv() {
        let deliver = job();
        let mut idle = IDLE.lock().expect("call threads lock");
        let keep = idle.len() < MAX_IDLE;
        if keep {
            idle.push(me.clone());
        }
        drop(idle);
        deliver();
        if !keep {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_returns_in_time_is_answered_and_its_thread_reused() {
        let stuck = Stuck::default();
        let first = run(Duration::from_secs(5), &stuck, || {
            std::thread::current().id()
        });
        let second = run(Duration::from_secs(5), &stuck, || {
            std::thread::current().id()
        });
        assert!(first.is_some() && second.is_some());
        assert_ne!(first, Some(std::thread::current().id()));
        assert!(stuck.since().is_none());
    }

    #[test]
    fn a_panic_goes_on_in_the_caller_and_marks_nothing() {
        let stuck = Stuck::default();
        let caught = std::panic::catch_unwind(|| {
            run(Duration::from_secs(5), &stuck, || -> u8 {
                panic!("in the call")
            })
        });
        let payload = caught.expect_err("the panic reaches the caller");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"in the call"));
        assert!(stuck.since().is_none());
        assert_eq!(run(Duration::from_secs(5), &stuck, || 7), Some(7));
    }

    #[test]
    fn a_call_past_its_limit_is_abandoned_and_marked_until_it_returns() {
        let stuck = Stuck::default();
        let (release, wait) = mpsc::channel::<()>();
        let started = Instant::now();
        let got = run(Duration::from_millis(50), &stuck, move || wait.recv().ok());
        assert!(got.is_none());
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(stuck.since().is_some());
        release.send(()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while stuck.since().is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(stuck.since().is_none(), "the mark outlived the call");
    }
}
