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

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::{ListImagesRequest, StatusRequest, VersionRequest};
use nodestatus_runtime::facts::{
    RuntimeCondition, RuntimeFacts, RuntimeFeatures, RuntimeHandler, RuntimeImage,
};
use tonic::transport::{Channel, Endpoint, Uri};

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

/// A CRI client for one runtime socket.
#[derive(Debug)]
pub struct Client {
    socket: PathBuf,
    timeout: Duration,
    channel: Mutex<Option<Channel>>,
    /// A socket that is not there is no runtime (the default endpoint),
    /// not an error.
    optional: bool,
}

impl Client {
    /// A client for `endpoint` (`unix:///path`), each call bounded by
    /// `timeout`. Nothing is dialled until the first call.
    pub fn new(endpoint: &str, timeout: Duration) -> Result<Self, Error> {
        Ok(Self {
            socket: socket_path(endpoint)?,
            timeout,
            channel: Mutex::new(None),
            optional: false,
        })
    }

    /// The same client, for which a socket that is not there means no
    /// runtime (`optional`: the default endpoint, which the operator did
    /// not set) rather than an error.
    pub fn optional(mut self, optional: bool) -> Self {
        self.optional = optional;
        self
    }

    /// Whether there is a runtime to ask: always for an endpoint the
    /// operator set; for the default one, whether its socket exists (one
    /// `stat`, no dial, no wait), so a machine without containerd has no
    /// runtime, and one where it starts later has one from the next pass.
    pub fn present(&self) -> bool {
        !self.optional
            || !matches!(std::fs::metadata(&self.socket), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
    }

    /// Reads the facts from synchronous code (the one-shot commands),
    /// through [`nodestatus_runtime::block_on`].
    pub fn facts_blocking(&self) -> Result<RuntimeFacts, Error> {
        nodestatus_runtime::block_on(self.facts())
    }

    /// The socket's path.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    fn channel(&self) -> Channel {
        let mut slot = self.channel.lock().expect("cri channel lock");
        slot.get_or_insert_with(|| {
            let socket = self.socket.clone();
            // The URI is not used: the connector dials the socket. The
            // deadline is `call`'s, around the dial and the call together.
            Endpoint::from_static("http://cri.invalid").connect_with_connector_lazy(
                tower::service_fn(move |_: Uri| {
                    let socket = socket.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(socket).await?;
                        Ok::<_, std::io::Error>(TokioIo::new(stream))
                    }
                }),
            )
        })
        .clone()
    }

    /// Forgets the connection, so the next call dials afresh.
    fn reset(&self) {
        *self.channel.lock().expect("cri channel lock") = None;
    }

    async fn call<T>(
        &self,
        call: &'static str,
        f: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, Error> {
        let result = match tokio::time::timeout(self.timeout, f).await {
            Ok(Ok(response)) => return Ok(response.into_inner()),
            Ok(Err(status)) if status.code() == tonic::Code::DeadlineExceeded => {
                Err(Error::Deadline {
                    call,
                    timeout: self.timeout,
                })
            }
            Ok(Err(status)) => Err(Error::Call {
                call,
                message: status_message(&status),
            }),
            Err(_) => Err(Error::Deadline {
                call,
                timeout: self.timeout,
            }),
        };
        self.reset();
        result
    }

    /// Reads the runtime's version, status and images: three calls, each
    /// under the deadline.
    pub async fn facts(&self) -> Result<RuntimeFacts, Error> {
        let mut runtime = RuntimeServiceClient::new(self.channel());
        let version = self
            .call("Version", runtime.version(VersionRequest::default()))
            .await?;
        let status = self
            .call("Status", runtime.status(StatusRequest { verbose: false }))
            .await?;
        let mut images = ImageServiceClient::new(self.channel());
        let list = self
            .call(
                "ListImages",
                images.list_images(ListImagesRequest { filter: None }),
            )
            .await?;
        Ok(RuntimeFacts {
            name: version.runtime_name,
            version: version.runtime_version,
            api_version: version.runtime_api_version,
            conditions: status
                .status
                .map(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .map(|c| RuntimeCondition {
                    type_: c.r#type,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                })
                .collect(),
            images: list
                .images
                .into_iter()
                .map(|i| RuntimeImage {
                    id: i.id,
                    repo_tags: i.repo_tags,
                    repo_digests: i.repo_digests,
                    size: i.size,
                })
                .collect(),
            handlers: status
                .runtime_handlers
                .into_iter()
                .map(|h| {
                    let f = h.features.unwrap_or_default();
                    RuntimeHandler {
                        name: h.name,
                        recursive_read_only_mounts: f.recursive_read_only_mounts,
                        user_namespaces: f.user_namespaces,
                    }
                })
                .collect(),
            features: status.features.map(|f| RuntimeFeatures {
                supplemental_groups_policy: f.supplemental_groups_policy,
            }),
        })
    }
}

/// The socket path of a `unix://` endpoint (a bare absolute path is taken
/// as one too, as the kubelet does).
pub fn socket_path(endpoint: &str) -> Result<PathBuf, Error> {
    let path = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
    if !path.starts_with('/') || path.len() < 2 {
        return Err(Error::BadEndpoint {
            endpoint: endpoint.to_owned(),
        });
    }
    Ok(PathBuf::from(path))
}

/// A status's message with the transport error under it (for an absent
/// socket, "No such file or directory").
fn status_message(status: &tonic::Status) -> String {
    match std::error::Error::source(status) {
        Some(source) => format!(
            "{}: {}",
            status.message(),
            nodestatus_runtime::error_chain(source)
        ),
        None => status.message().to_owned(),
    }
}

#[cfg(test)]
mod tests {
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
