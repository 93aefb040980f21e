//! The accept loop: the router served by hyper with the connection limits `axum::serve` does not
//! offer.
//!
//! - **A connection cap** (`server.max_connections`): past it, quarry stops accepting, and new
//!   connections wait in the kernel's backlog until one closes, instead of taking file
//!   descriptors until none is left for the stores.
//! - **A header-read timeout** (`server.header_read_timeout_s`): an HTTP/1 request head must
//!   arrive whole within it (hyper's own timer), so a client trickling headers cannot hold a
//!   connection.
//! - **An idle timeout** (`server.idle_timeout_s`): a connection on which no byte moved either
//!   way for that long is closed — one that never sent a byte, one left open after its last
//!   response, an HTTP/2 connection nobody uses. It is longer than the request timeout, and
//!   event streams send a keep-alive comment every 15 s, so no request in progress is cut.
//!
//! Each request carries the peer's address as `ConnectInfo<SocketAddr>` (the per-client cap on
//! event streams reads it). Shutdown stops accepting, then lets every connection finish its
//! in-flight requests (HTTP/1 keep-alive connections close after their current response,
//! HTTP/2 ones get a GOAWAY).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt as _;

/// The limits of [`serve`].
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` completes, then waits for the open
/// connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let (stream, remote) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    accept_failed(&err).await;
                    continue;
                }
            },
        };
        // Small answers and SSE events go out at once instead of waiting on Nagle's algorithm.
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(error = %err, "could not set TCP_NODELAY on a connection");
        }
        let service = router
            .clone()
            .map_request(move |mut req: axum::http::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(remote));
                req.map(Body::new)
            });
        let io = TokioIo::new(Idle::new(stream, limits.idle_timeout));
        let connection = builder
            .serve_connection(io, TowerToHyperService::new(service))
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::trace!(peer = %remote, error = %err, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Errors of `accept` that concern one connection are skipped; others (out of descriptors,
/// out of memory) get a pause, so that the loop does not spin while they last.
async fn accept_failed(err: &io::Error) {
    if matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::warn!(error = %err, "accepting a connection failed; pausing for 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// A socket that fails its pending read with `TimedOut` once no byte has been read or written
/// for `timeout`; hyper then closes the connection.
struct Idle<T> {
    inner: T,
    timeout: Duration,
    last: Instant,
    /// Armed for `last + timeout` as it was when armed; re-armed when bytes moved since.
    timer: Pin<Box<Sleep>>,
}

impl<T> Idle<T> {
    fn new(inner: T, timeout: Duration) -> Self {
        let last = Instant::now();
        Self {
            inner,
            timeout,
            last,
            timer: Box::pin(tokio::time::sleep_until(last + timeout)),
        }
    }

    /// Whether the connection has been idle for the whole timeout; registers a wake-up for the
    /// deadline otherwise.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            let deadline = self.last + self.timeout;
            if self.timer.deadline() != deadline {
                self.timer.as_mut().reset(deadline);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            if self.last + self.timeout <= Instant::now() {
                return true;
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Idle<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.last = Instant::now();
                }
                Poll::Ready(result)
            }
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the connection was idle for longer than server.idle_timeout_s",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Idle<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, data));
        if matches!(written, Ok(n) if n > 0) {
            this.last = Instant::now();
        }
        Poll::Ready(written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs));
        if matches!(written, Ok(n) if n > 0) {
            this.last = Instant::now();
        }
        Poll::Ready(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The peer of a request served by [`serve`] (none for a request built in a test).
pub fn peer(req_extensions: &axum::http::Extensions) -> Option<SocketAddr> {
    req_extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr)
}
