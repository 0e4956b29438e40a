//! The runtime's endpoint, as the kubelet reads `containerRuntimeEndpoint`.

use std::path::PathBuf;

use super::Error;

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
