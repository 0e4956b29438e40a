//! The CRI client itself (the `cri` feature): gRPC over the runtime's
//! unix socket with tonic.

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

use super::Error;
use super::endpoint::socket_path;

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
