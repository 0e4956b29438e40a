//! The delivery of the node's events, as client-go's event recorder does
//! it (`tools/record`, `recordToSink`): a POST that gets no answer (the
//! server unreachable, a timeout, a dropped connection) is tried again,
//! up to [`EVENT_TRIES`] times, [`EVENT_RETRY`] apart (the first wait a
//! random part of it, so that a fleet's retries spread); an answer with an
//! error status (the event refused, a namespace terminating, already
//! there) ends it at once. An event is never the reason a loop waits: each
//! is delivered on its own task.

use std::future::Future;
use std::time::Duration;

use super::client::Error;

/// How many times one event is tried (client-go's `maxTriesPerEvent`).
pub const EVENT_TRIES: u32 = 12;

/// The wait between two tries (client-go's `sleepDuration`).
pub const EVENT_RETRY: Duration = Duration::from_secs(10);

/// What became of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// The server took it, at this try.
    Yes(u32),
    /// The server refused it: not tried again.
    Refused(String),
    /// No answer in [`EVENT_TRIES`] tries.
    GaveUp(String),
}

/// Whether an event whose POST failed with `e` is tried again: only when
/// the server did not answer.
pub fn retried(e: &Error) -> bool {
    matches!(e, Error::Transport { .. })
}

/// Delivers one event: `post` tries it once, `first_wait` (in `[0, 1)`)
/// is the part of [`EVENT_RETRY`] waited before the second try.
pub async fn deliver<F, Fut, T>(mut post: F, first_wait: f64) -> Delivered
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    for attempt in 1..=EVENT_TRIES {
        match post().await {
            Ok(_) => return Delivered::Yes(attempt),
            Err(e) if !retried(&e) => return Delivered::Refused(e.to_string()),
            Err(e) if attempt == EVENT_TRIES => return Delivered::GaveUp(e.to_string()),
            Err(_) => {
                let wait = match attempt {
                    1 => EVENT_RETRY.mul_f64(first_wait.clamp(0.0, 1.0)),
                    _ => EVENT_RETRY,
                };
                tokio::time::sleep(wait).await;
            }
        }
    }
    unreachable!("the last try returns")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A transport error, as a POST to a port nothing listens on gets it.
    async fn transport_error() -> Error {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        let client = super::super::client::NodeClient::from_config(
            config,
            "n",
            Arc::new(super::super::client::Traffic::default()),
            Duration::from_secs(5),
        )
        .unwrap();
        let event = k8s_openapi::api::core::v1::Event::default();
        client.create_event(&event).await.unwrap_err()
    }

    fn refused() -> Error {
        Error::Api {
            kind: "create-event",
            code: 422,
            reason: "Invalid".into(),
            message: "no".into(),
        }
    }

    #[tokio::test]
    async fn a_post_that_got_no_answer_is_one_to_try_again() {
        let unanswered = transport_error().await;
        assert!(retried(&unanswered), "{unanswered}");
        assert!(!retried(&refused()));
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_the_server_did_not_answer_is_tried_again_until_it_is_taken() {
        let tries = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let got = deliver(
            || {
                let n = tries.fetch_add(1, Ordering::SeqCst) + 1;
                async move { if n < 4 { Err(transport_like()) } else { Ok(()) } }
            },
            0.5,
        )
        .await;
        assert_eq!(got, Delivered::Yes(4));
        // Half a wait, then two whole ones.
        assert_eq!(started.elapsed(), Duration::from_secs(25));
    }

    /// A transport error without I/O (time is paused): a timeout's.
    fn transport_like() -> Error {
        Error::Transport {
            kind: "create-event",
            source: kube::Error::Service("deadline has elapsed".into()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_event_is_not_tried_again_and_an_unanswered_one_twelve_times() {
        let tries = AtomicU32::new(0);
        let got = deliver(
            || {
                tries.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(refused()) }
            },
            0.0,
        )
        .await;
        assert!(matches!(got, Delivered::Refused(_)), "{got:?}");
        assert_eq!(tries.load(Ordering::SeqCst), 1);

        let tries = AtomicU32::new(0);
        let got = deliver(
            || {
                tries.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(transport_like()) }
            },
            0.0,
        )
        .await;
        assert!(matches!(got, Delivered::GaveUp(_)), "{got:?}");
        assert_eq!(tries.load(Ordering::SeqCst), EVENT_TRIES);
    }
}
