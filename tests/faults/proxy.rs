//! A fault-injecting proxy between one engine and the real kube-apiserver.
//!
//! It terminates TLS on 127.0.0.1 with a self-signed certificate (the
//! engine's kubeconfig skips verification, as it does for the apiserver's
//! own self-signed one), reads each HTTP/1.1 request and forwards it with
//! the engine's own `Authorization` header, so the apiserver sees the node's
//! identity. Watches stream through. A [`Fault`] changes what happens:
//!
//! - at the TCP level: connections refused ([`Fault::Unreachable`]), or
//!   open connections that stop answering for good ([`Fault::Hang`]);
//! - at the HTTP level: every response late ([`Fault::Slow`]), or requests
//!   answered with an error status and a Kubernetes `Status` body without
//!   reaching the apiserver ([`Fault::Status`]).

use std::convert::Infallible;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use kube::client::Body;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

/// Which requests a [`Fault::Status`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    /// Every request.
    All,
    /// Lease updates only (`PUT .../leases/<name>`).
    LeaseUpdates,
}

/// What the proxy does to the traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything.
    None,
    /// The port is closed (connect is refused) and every open connection is
    /// cut: the apiserver is unreachable.
    Unreachable,
    /// Every open connection stops answering, for good (a half-open TCP
    /// connection, a dead load balancer); new connections are accepted but
    /// never answered while the fault lasts. Connections opened after it
    /// work.
    Hang,
    /// Each request waits this long before it is forwarded.
    Slow(Duration),
    /// Matching requests are answered with this status and a Kubernetes
    /// `Status` body, and never reach the apiserver.
    Status(u16, Only),
}

/// Counts of what the proxy did: each fault has its own count, so that a
/// scenario can check that its fault really happened
/// ([`FaultProxy::injected`]).
#[derive(Debug, Default)]
pub struct Counts {
    /// Requests forwarded to the apiserver.
    pub forwarded: AtomicU64,
    /// Requests answered with an injected status ([`Fault::Status`]).
    pub injected: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Open connections closed by [`FaultProxy::cut`] or
    /// [`Fault::Unreachable`].
    pub cut: AtomicU64,
    /// Connections stopped by [`Fault::Hang`]: open when it began, or
    /// accepted while it lasted.
    pub hung: AtomicU64,
    /// Requests forwarded only after their [`Fault::Slow`] delay.
    pub delayed: AtomicU64,
}

struct Conn {
    hung: AtomicBool,
}

struct Shared {
    fault: Mutex<Fault>,
    conns: Mutex<Vec<(Weak<Conn>, AbortHandle)>>,
    upstream: kube::Client,
    tls: TlsAcceptor,
    counts: Counts,
}

/// A running proxy; dropping it closes it and every connection.
pub struct FaultProxy {
    port: u16,
    shared: Arc<Shared>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

/// Reads the PEM certificate chain and key the proxy serves.
pub fn tls_acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

impl FaultProxy {
    /// A proxy on a free loopback port to the apiserver at `server`.
    pub async fn start(server: &str, tls: TlsAcceptor) -> anyhow::Result<Self> {
        let mut config = kube::Config::new(server.parse()?);
        config.accept_invalid_certs = true;
        // No token of its own: the engine's Authorization header goes through.
        config.read_timeout = None;
        config.connect_timeout = Some(Duration::from_secs(5));
        let upstream = kube::Client::try_from(config)?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            fault: Mutex::new(Fault::None),
            conns: Mutex::new(Vec::new()),
            upstream,
            tls,
            counts: Counts::default(),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Self {
            port,
            shared,
            accept: Mutex::new(Some(accept)),
        })
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// What the proxy did so far.
    pub fn counts(&self) -> &Counts {
        &self.shared.counts
    }

    /// How many times so far the proxy did what `fault` does: connections
    /// cut ([`Fault::Unreachable`]), connections hung ([`Fault::Hang`]),
    /// requests delayed ([`Fault::Slow`]) or answered with an injected
    /// status ([`Fault::Status`]); 0 for [`Fault::None`].
    pub fn injected(&self, fault: &Fault) -> u64 {
        let c = &self.shared.counts;
        match fault {
            Fault::None => 0,
            Fault::Unreachable => c.cut.load(Ordering::SeqCst),
            Fault::Hang => c.hung.load(Ordering::SeqCst),
            Fault::Slow(_) => c.delayed.load(Ordering::SeqCst),
            Fault::Status(..) => c.injected.load(Ordering::SeqCst),
        }
    }

    /// Closes every open connection (the listener stays): clients must
    /// connect again, and their watches start anew, as after an apiserver
    /// restart.
    pub fn cut(&self) {
        for (conn, task) in self.shared.conns.lock().unwrap().drain(..) {
            if conn.strong_count() > 0 {
                self.shared.counts.cut.fetch_add(1, Ordering::SeqCst);
            }
            task.abort();
        }
    }

    /// Switches to `fault`.
    pub async fn set(&self, fault: Fault) {
        let old = std::mem::replace(&mut *self.shared.fault.lock().unwrap(), fault.clone());
        match &fault {
            Fault::Unreachable => {
                if let Some(a) = self.accept.lock().unwrap().take() {
                    a.abort();
                }
                self.cut();
            }
            Fault::Hang => {
                for (c, _) in self.shared.conns.lock().unwrap().iter() {
                    if let Some(c) = c.upgrade()
                        && !c.hung.swap(true, Ordering::SeqCst)
                    {
                        self.shared.counts.hung.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
            _ => {}
        }
        if old == Fault::Unreachable && fault != Fault::Unreachable {
            // Listen again on the same port.
            let mut tries = 0;
            let listener = loop {
                match TcpListener::bind(("127.0.0.1", self.port)).await {
                    Ok(l) => break l,
                    Err(e) if tries < 50 => {
                        tries += 1;
                        eprintln!("proxy: rebinding port {}: {e}", self.port);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => panic!("proxy: cannot listen on port {} again: {e}", self.port),
                }
            };
            *self.accept.lock().unwrap() =
                Some(tokio::spawn(accept_loop(listener, self.shared.clone())));
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(a) = self.accept.lock().unwrap().take() {
            a.abort();
        }
        self.cut();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        shared.counts.connections.fetch_add(1, Ordering::Relaxed);
        let _ = tcp.set_nodelay(true);
        let hung = *shared.fault.lock().unwrap() == Fault::Hang;
        if hung {
            shared.counts.hung.fetch_add(1, Ordering::SeqCst);
        }
        let conn = Arc::new(Conn {
            hung: AtomicBool::new(hung),
        });
        let weak = Arc::downgrade(&conn);
        let task = tokio::spawn(serve(tcp, conn, shared.clone()));
        let mut conns = shared.conns.lock().unwrap();
        conns.retain(|(c, _)| c.strong_count() > 0);
        conns.push((weak, task.abort_handle()));
    }
}

async fn serve(tcp: TcpStream, conn: Arc<Conn>, shared: Arc<Shared>) {
    let gate = Gate { inner: tcp, conn };
    let Ok(tls) = shared.tls.accept(gate).await else {
        return;
    };
    let svc = {
        let shared = shared.clone();
        hyper::service::service_fn(move |req| handle(shared.clone(), req))
    };
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), svc)
        .await;
}

fn status_reason(code: u16) -> &'static str {
    match code {
        401 => "Unauthorized",
        403 => "Forbidden",
        409 => "Conflict",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let fault = shared.fault.lock().unwrap().clone();
    match fault {
        Fault::Status(code, only) => {
            let hit = match only {
                Only::All => true,
                Only::LeaseUpdates => {
                    req.method() == http::Method::PUT && req.uri().path().contains("/leases/")
                }
            };
            if hit {
                shared.counts.injected.fetch_add(1, Ordering::SeqCst);
                let body = serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure",
                    "message": format!("injected by the fault rig: {} {}", req.method(), req.uri().path()),
                    "reason": status_reason(code), "code": code,
                });
                let mut resp = Response::builder()
                    .status(StatusCode::from_u16(code).expect("a valid status"))
                    .header("content-type", "application/json");
                if code == 429 {
                    // As API Priority and Fairness answers a rejected request.
                    resp = resp.header("retry-after", "1");
                }
                let resp = resp
                    .body(Body::from(body.to_string().into_bytes()))
                    .expect("a valid response");
                return Ok(resp);
            }
        }
        Fault::Slow(d) => {
            tokio::time::sleep(d).await;
            shared.counts.delayed.fetch_add(1, Ordering::SeqCst);
        }
        _ => {}
    }
    Ok(forward(&shared, req).await)
}

async fn forward(shared: &Shared, req: Request<Incoming>) -> Response<Body> {
    let (mut parts, body) = req.into_parts();
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return bad_gateway(format!("reading the request: {e}")),
    };
    for h in [
        http::header::HOST,
        http::header::CONNECTION,
        http::header::CONTENT_LENGTH,
        http::header::TRANSFER_ENCODING,
    ] {
        parts.headers.remove(h);
    }
    let req = Request::from_parts(parts, Body::from(bytes.to_vec()));
    match shared.upstream.send(req).await {
        Ok(mut resp) => {
            shared.counts.forwarded.fetch_add(1, Ordering::SeqCst);
            resp.headers_mut().remove(http::header::CONNECTION);
            resp
        }
        Err(e) => bad_gateway(format!("forwarding: {e}")),
    }
}

fn bad_gateway(msg: String) -> Response<Body> {
    Response::builder()
        .status(StatusCode::BAD_GATEWAY)
        .body(Body::from(msg.into_bytes()))
        .expect("a valid response")
}

/// A TCP stream that stops moving bytes, both ways and for good, once its
/// connection is hung.
struct Gate {
    inner: TcpStream,
    conn: Arc<Conn>,
}

impl AsyncRead for Gate {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.conn.hung.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Gate {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.conn.hung.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.conn.hung.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.conn.hung.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
