//! The client module's unit tests.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::settings::RegistrySettings;

/// A registry that answers `/v2/` and a HEAD of a manifest (with no
/// digest header), and serves every manifest as an endless chunked
/// body, with no `Content-Length`: counts what it sent.
fn endless_registry() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let sent = counter.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                reader.read_line(&mut request).unwrap();
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                if !request.contains("/manifests/") || request.starts_with("HEAD") {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return;
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                );
                let chunk = vec![b' '; 64 << 10];
                let head = format!("{:x}\r\n", chunk.len());
                loop {
                    let ok = stream
                        .write_all(head.as_bytes())
                        .and_then(|()| stream.write_all(&chunk))
                        .and_then(|()| stream.write_all(b"\r\n"));
                    if ok.is_err() {
                        return;
                    }
                    let total = sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    // A client that reads it whole is stopped here.
                    if total > 1 << 30 {
                        return;
                    }
                }
            });
        }
    });
    (host, sent)
}

#[tokio::test]
async fn an_endless_manifest_is_cut_at_the_bound() {
    let (host, sent) = endless_registry();
    let settings = RegistrySettings {
        insecure: true,
        ..Default::default()
    };
    let client = Client::new(Registries([(host.clone(), settings)].into()))
        .unwrap()
        .with_timeout(Duration::from_secs(30));
    let reference = Reference::parse(&format!("{host}/vendor/gpu:1")).unwrap();
    // The tag resolved: no digest header, so the manifest is read.
    let err = client.resolve(&reference).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::ManifestTooLarge {
                declared: None,
                limit: MAX_MANIFEST_BYTES,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.kind(), "too-large");
    let text = err.to_string();
    assert!(
        text.contains(&reference.to_string()) && text.contains("over the bound of 1048576"),
        "{text}"
    );
    let err = client.pull(&reference, 64 << 20).await.unwrap_err();
    assert!(matches!(err, Error::ManifestTooLarge { .. }), "{err}");
    // Cut near the bound, not read on: what the socket buffers hold
    // past it at most.
    let sent = sent.load(Ordering::Relaxed);
    assert!(
        sent < 2 * MAX_MANIFEST_BYTES + (32 << 20),
        "{sent} bytes sent"
    );
}
