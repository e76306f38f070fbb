//! Accept loops that apply [`ListenerLimits`].

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use futures::StreamExt as _;

use crate::tls::ReloadingTls;
use crate::{GrpcConn, Guarded, ListenerLimits, TimedBody};

/// How long an accept error (out of file descriptors, say) pauses the loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

fn refused(listener: &'static str) {
    metrics::counter!("tp_net_connections_refused_total", "listener" => listener).increment(1);
}

/// What answers the requests of [`serve_http1`]'s connections.
///
/// Unlike a `tower::Service`, whose future must have a name (so a service written with
/// `async` boxes it: one allocation per request, often one large enough to miss the
/// allocator's per-thread cache), a handler's future is kept inline in the connection's one
/// in-flight slot, which hyper allocates once per connection. A tower service serves through
/// [`TowerHandler`].
pub trait Handler<B>: Clone + Send + 'static {
    /// The answer to `request`.
    fn handle(
        &self,
        request: IncomingRequest,
    ) -> impl Future<Output = http::Response<B>> + Send + use<Self, B>;
}

/// A request as [`serve_http1`] reads it: its body read under the listener's body timeout.
pub type IncomingRequest = http::Request<TimedBody<Incoming>>;

/// A `tower::Service` that never fails, as a [`Handler`] (its future as the service makes it).
#[derive(Debug, Clone)]
pub struct TowerHandler<S>(pub S);

impl<S, B> Handler<B> for TowerHandler<S>
where
    S: tower::Service<
            http::Request<TimedBody<Incoming>>,
            Response = http::Response<B>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    fn handle(
        &self,
        request: IncomingRequest,
    ) -> impl Future<Output = http::Response<B>> + Send + use<S, B> {
        use tower::ServiceExt as _;
        let service = self.0.clone();
        async move {
            match service.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}

/// Serves HTTP/1 on `listener` with `handler` until `shutdown` resolves, then stops accepting
/// and lets open connections finish their requests for up to `drain` before returning.
///
/// Every connection holds a slot of `limits.max_connections`; every request's body is a
/// [`TimedBody`]; every connection must send request heads within
/// `limits.header_read_timeout_ms`; after `limits.max_requests_per_connection` requests the
/// answer says `Connection: close`.
pub async fn serve_http1<H, B>(
    listener: TcpListener,
    handler: H,
    limits: &ListenerLimits,
    shutdown: impl Future<Output = ()> + Send,
    drain: Duration,
) -> std::io::Result<()>
where
    H: Handler<B>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_http1_tls(listener, handler, limits, shutdown, drain, None).await
}

/// [`serve_http1`] over TLS when `tls` is set: the handshake must finish within
/// `limits.header_read_timeout_ms` of the connection being accepted, and runs on the
/// connection's own task, so slow handshakes never hold up the accept loop.
pub async fn serve_http1_tls<H, B>(
    listener: TcpListener,
    handler: H,
    limits: &ListenerLimits,
    shutdown: impl Future<Output = ()> + Send,
    drain: Duration,
    tls: Option<Arc<ReloadingTls>>,
) -> std::io::Result<()>
where
    H: Handler<B>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let header_timeout = limits.header_read_timeout();
    let settings = Http1Settings {
        header_timeout,
        body_timeout: limits.body_read_timeout(),
        max_requests: limits.max_requests_per_connection,
    };
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            refused("http");
            drop(tcp);
            continue;
        };
        // TCP_NODELAY: SSE answers are several small writes (Nagle + delayed ACK = 40 ms).
        let _ = tcp.set_nodelay(true);
        let io = Guarded::new(tcp, Some(slot), None, None);
        let handler = handler.clone();
        let watcher = graceful.watcher();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(io, handler, watcher, settings).await,
                Some(tls) => match tokio::time::timeout(header_timeout, tls.acceptor().accept(io))
                    .await
                {
                    Ok(Ok(stream)) => serve_connection(stream, handler, watcher, settings).await,
                    Ok(Err(error)) => handshake_failed("http", &error),
                    Err(_) => handshake_failed("http", &"timed out"),
                },
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(drain) => {
            tracing::warn!(?drain, "connections still open after the drain timeout; closing them");
        }
    }
    Ok(())
}

fn handshake_failed(listener: &'static str, error: &dyn std::fmt::Display) {
    tracing::debug!(%error, "TLS handshake failed");
    metrics::counter!("tp_net_tls_handshake_failures_total", "listener" => listener).increment(1);
}

/// What every HTTP/1 connection of a listener is held to.
#[derive(Debug, Clone, Copy)]
struct Http1Settings {
    header_timeout: Duration,
    body_timeout: Duration,
    max_requests: u32,
}

/// Serves one HTTP/1 connection (plain or TLS) until it closes or the listener drains.
async fn serve_connection<IO, H, B>(
    io: IO,
    handler: H,
    watcher: hyper_util::server::graceful::Watcher,
    settings: Http1Settings,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    H: Handler<B>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Http1Settings {
        header_timeout,
        body_timeout,
        max_requests,
    } = settings;
    let served = Arc::new(AtomicU32::new(0));
    let per_request = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let count = served.fetch_add(1, Ordering::Relaxed) + 1;
        let request = request.map(|body| TimedBody::new(body, body_timeout));
        let answer = handler.handle(request);
        async move {
            let mut response = answer.await;
            if count >= max_requests {
                response.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            Ok::<_, Infallible>(response)
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .max_buf_size(READ_BUFFER_BYTES)
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), per_request);
    if let Err(error) = watcher.watch(connection).await {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// Largest read buffer of one HTTP/1 connection; a request head that has not ended when a read
/// leaves the buffer this full gets 431. hyper's default (about 400 KiB) lets every connection sending a large body hold that
/// much outside any request's share of the in-flight byte budget; at 64 KiB a thousand such
/// connections hold 64 MiB.
pub(crate) const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Accepted connections for tonic's `serve_with_incoming_shutdown`: each holds a slot of
/// `limits.max_connections` (beyond, connections are closed as they are accepted), must send
/// its first bytes within `limits.header_read_timeout_ms`, and is closed after
/// `limits.idle_timeout_ms` without a byte either way. TCP_NODELAY on every socket.
pub fn grpc_incoming(
    listener: TcpListener,
    limits: &ListenerLimits,
) -> impl futures::Stream<Item = Result<Guarded<TcpStream>, std::io::Error>> + Send + 'static {
    accept_grpc(listener, limits, Some(limits.idle_timeout()))
}

/// [`grpc_incoming`] with the connections' byte-level idle deadline `idle`.
fn accept_grpc(
    listener: TcpListener,
    limits: &ListenerLimits,
    idle: Option<Duration>,
) -> impl futures::Stream<Item = Result<Guarded<TcpStream>, std::io::Error>> + Send + 'static {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let first_byte = limits.header_read_timeout();
    futures::stream::unfold((listener, slots), move |(listener, slots)| async move {
        loop {
            let tcp = match listener.accept().await {
                Ok((tcp, _)) => tcp,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                refused("grpc");
                drop(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let guarded = Guarded::new(tcp, Some(slot), Some(first_byte), idle);
            return Some((Ok(guarded), (listener, slots)));
        }
    })
}

/// [`grpc_incoming`], over TLS when `tls` is set, with the idle deadline judged on HTTP/2
/// frames ([`GrpcConn`]: keep-alive pings are not activity). Handshakes run on tasks of their
/// own and must finish within `limits.header_read_timeout_ms`, so a slow client never holds
/// up the accept loop; connections that fail their handshake are counted
/// (`tp_net_tls_handshake_failures_total{listener="grpc"}`) and never reach the server.
pub fn grpc_incoming_tls(
    listener: TcpListener,
    limits: &ListenerLimits,
    tls: Option<Arc<ReloadingTls>>,
) -> impl futures::Stream<Item = Result<GrpcConn, std::io::Error>> + Send + 'static {
    let (sender, receiver) = tokio::sync::mpsc::channel::<GrpcConn>(64);
    let handshake = limits.header_read_timeout();
    let idle = Some(limits.idle_timeout());
    // Idleness is judged by GrpcConn on frames, not by the connection on bytes.
    let mut plain = Box::pin(accept_grpc(listener, limits, None));
    tokio::spawn(async move {
        use futures::StreamExt as _;
        loop {
            let next = tokio::select! {
                () = sender.closed() => return,
                next = plain.next() => next,
            };
            let Some(Ok(io)) = next else { return };
            let sender = sender.clone();
            match &tls {
                None => {
                    let _ = sender.send(GrpcConn::plain(io, idle)).await;
                }
                Some(tls) => {
                    let acceptor = tls.acceptor();
                    tokio::spawn(async move {
                        match tokio::time::timeout(handshake, acceptor.accept(io)).await {
                            Ok(Ok(stream)) => {
                                let _ = sender.send(GrpcConn::tls(stream, idle)).await;
                            }
                            Ok(Err(error)) => handshake_failed("grpc", &error),
                            Err(_) => handshake_failed("grpc", &"timed out"),
                        }
                    });
                }
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(receiver).map(Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn ok_service() -> impl tower::Service<
        http::Request<TimedBody<Incoming>>,
        Response = http::Response<http_body_util::Full<Bytes>>,
        Error = Infallible,
        Future = impl Send,
    > + Clone
    + Send
    + 'static {
        tower::service_fn(|request: http::Request<TimedBody<Incoming>>| async move {
            use http_body_util::BodyExt as _;
            let status = match request.into_body().collect().await {
                Ok(_) => http::StatusCode::OK,
                Err(error) if crate::body::is_body_timeout(error.as_ref()) => {
                    http::StatusCode::REQUEST_TIMEOUT
                }
                Err(_) => http::StatusCode::BAD_REQUEST,
            };
            Ok::<_, Infallible>(
                http::Response::builder()
                    .status(status)
                    .body(http_body_util::Full::new(Bytes::from_static(b"ok")))
                    .unwrap_or_default(),
            )
        })
    }

    async fn start(limits: ListenerLimits) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            serve_http1(
                listener,
                TowerHandler(ok_service()),
                &limits,
                std::future::pending(),
                Duration::from_secs(1),
            )
            .await
        });
        addr
    }

    async fn read_all(stream: &mut TcpStream) -> String {
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn slow_heads_and_slow_bodies_are_cut_and_the_cap_holds() {
        let addr = start(ListenerLimits {
            max_connections: 2,
            header_read_timeout_ms: 300,
            body_read_timeout_ms: 300,
            max_requests_per_connection: 2,
            ..Default::default()
        })
        .await;
        // A head that never ends: the connection is closed.
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"POST / HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let _ = read_all(&mut slow).await;
        assert!(started.elapsed() < Duration::from_secs(3));
        // A body that never ends: 408.
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
            .await
            .unwrap();
        let answer = read_all(&mut slow).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        // Keep-alive limit: the second answer closes the connection.
        let mut fine = TcpStream::connect(addr).await.unwrap();
        fine.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let answer = read_all(&mut fine).await;
        assert_eq!(answer.matches("HTTP/1.1 200").count(), 2, "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"));
        // The cap: two idle connections hold both slots; a third is closed at once.
        let _a = TcpStream::connect(addr).await.unwrap();
        let _b = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut third = TcpStream::connect(addr).await.unwrap();
        let _ = third.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
        let answer = read_all(&mut third).await;
        assert!(answer.is_empty(), "{answer}");
    }
}
