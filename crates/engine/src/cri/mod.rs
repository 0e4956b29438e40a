//! The container runtime's facts, over CRI: gRPC on the runtime's unix
//! socket (`containerRuntimeEndpoint`, for example
//! `unix:///run/containerd/containerd.sock`), with the `runtime.v1` API
//! (containerd 1.6+, CRI-O 1.20+).
//!
//! Once per pass, before the setters run, the host asks the runtime for its
//! version, its status (the `RuntimeReady` and `NetworkReady` conditions and
//! its runtime handlers) and its images, each call under
//! `runtimeRequestTimeout`. The answer, or the reason there is none, is
//! what the setters granted `containerRuntime` read through
//! `host.container-runtime`; a setter never waits on the runtime itself.
//!
//! A failed call drops the connection, so the next pass dials afresh (a
//! restarted runtime, or a socket that was replaced, is picked up).
//!
//! The client (tonic, k8s-cri's generated code and its `protoc` build) is
//! the `cri` feature, on by default. A build without it has no client: no
//! runtime is asked, the default endpoint is no runtime, and a
//! `containerRuntimeEndpoint` the operator sets is refused when the
//! config is checked.

use std::time::Duration;

mod endpoint;
pub use endpoint::socket_path;

#[cfg(not(feature = "cri"))]
mod absent;
#[cfg(feature = "cri")]
mod client;
#[cfg(not(feature = "cri"))]
pub use absent::Client;
#[cfg(feature = "cri")]
pub use client::Client;

/// The default deadline of one CRI call (`runtimeRequestTimeout`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the runtime's facts could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The endpoint is not a `unix://` URL with an absolute path.
    #[error(
        "containerRuntimeEndpoint {endpoint:?} is not a unix socket URL: write unix:///run/containerd/containerd.sock (or the runtime's socket)"
    )]
    BadEndpoint {
        /// The endpoint as configured.
        endpoint: String,
    },
    /// A call did not answer within the deadline.
    #[error("the runtime's {call} did not answer within {timeout:?} (runtimeRequestTimeout)")]
    Deadline {
        /// The CRI call.
        call: &'static str,
        /// The deadline.
        timeout: Duration,
    },
    /// A call failed: the socket is absent or refused, or the runtime
    /// answered an error.
    #[error("the runtime's {call} failed: {message}")]
    Call {
        /// The CRI call.
        call: &'static str,
        /// What went wrong, with its causes.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            socket_path("unix:///run/containerd/containerd.sock").unwrap(),
            PathBuf::from("/run/containerd/containerd.sock")
        );
        assert_eq!(
            socket_path("/run/crio/crio.sock").unwrap(),
            PathBuf::from("/run/crio/crio.sock")
        );
        for bad in ["tcp://10.0.0.1:1234", "unix://relative.sock", "", "unix://"] {
            assert!(
                matches!(socket_path(bad), Err(Error::BadEndpoint { .. })),
                "{bad}"
            );
        }
    }
}
