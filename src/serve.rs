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
//! - **A per-client share** (`server.max_connections_per_client`): one client — one IPv4
//!   address, or one IPv6 /64, as a host usually holds a whole /64 ([`client_key`]) — holds at
//!   most this many connections; one more is closed as soon as it is accepted, so a single
//!   client cannot take every slot of the cap.
//! - **The most idle connection makes room**: while the cap is reached, the connection on which
//!   no byte has moved for the longest is asked to close (now, if it is an idle keep-alive
//!   connection; after its current response otherwise), one a second, so new clients are not
//!   locked out by connections parked open.
//!
//! Each request carries the peer's address as `ConnectInfo<SocketAddr>` (the per-client cap on
//! event streams reads it). Behind a reverse proxy every connection comes from the proxy's
//! address, so the per-client shares apply to the proxy as a whole: raise them, or let the
//! proxy enforce its own. Shutdown stops accepting, then lets every connection finish its
//! in-flight requests (HTTP/1 keep-alive connections close after their current response,
//! HTTP/2 ones get a GOAWAY).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// The limits of [`serve`].
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub max_connections_per_client: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

/// Who holds a connection, for the per-client shares: an IPv4 address (also written as
/// IPv4-mapped IPv6), or the /64 of an IPv6 address.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        IpAddr::V4(_) => ip,
    }
}

/// The open connections: how many each client holds, and each one's last activity and close
/// signal (to ask the most idle one to make room).
struct Open {
    started: Instant,
    state: Mutex<OpenState>,
}

#[derive(Default)]
struct OpenState {
    per_client: HashMap<IpAddr, usize>,
    connections: HashMap<u64, Tracked>,
    next: u64,
}

struct Tracked {
    /// Milliseconds since [`Open::started`] at the last byte moved.
    last: Arc<AtomicU64>,
    close: CancellationToken,
}

/// One admitted connection; counted in [`Open`] until dropped.
struct Admitted {
    open: Arc<Open>,
    client: IpAddr,
    id: u64,
    last: Arc<AtomicU64>,
    close: CancellationToken,
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, OpenState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a connection of `client`, unless it holds `max` already.
    fn admit(self: &Arc<Self>, client: IpAddr, max: usize, all: &CancellationToken) -> Option<Admitted> {
        let mut state = self.lock();
        let held = state.per_client.entry(client).or_default();
        if *held >= max {
            return None;
        }
        *held += 1;
        state.next += 1;
        let id = state.next;
        let last = Arc::new(AtomicU64::new(self.millis()));
        let close = all.child_token();
        state.connections.insert(
            id,
            Tracked {
                last: last.clone(),
                close: close.clone(),
            },
        );
        Some(Admitted {
            open: self.clone(),
            client,
            id,
            last,
            close,
        })
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Asks the connection idle the longest, of those not asked yet, to close.
    fn close_most_idle(&self) {
        let state = self.lock();
        let most_idle = (state.connections.values())
            .filter(|c| !c.close.is_cancelled())
            .min_by_key(|c| c.last.load(Ordering::Relaxed));
        if let Some(connection) = most_idle {
            tracing::debug!("at server.max_connections: closing the most idle connection");
            connection.close.cancel();
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut state = self.open.lock();
        state.connections.remove(&self.id);
        if let Some(held) = state.per_client.get_mut(&self.client) {
            *held -= 1;
            if *held == 0 {
                state.per_client.remove(&self.client);
            }
        }
    }
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
    let open = Arc::new(Open {
        started: Instant::now(),
        state: Mutex::default(),
    });
    // Cancelled at shutdown: every connection then closes after its in-flight requests.
    let all = CancellationToken::new();
    let connections = TaskTracker::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // At the cap, the most idle connection is asked to make room, another each second
        // until a slot is free.
        let permit = loop {
            if permits.available_permits() == 0 {
                open.close_most_idle();
            }
            tokio::select! {
                biased;
                () = &mut shutdown => break None,
                permit = permits.clone().acquire_owned() => break permit.ok(),
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        };
        let Some(permit) = permit else { break };
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
        let Some(admitted) = open.admit(client_key(remote.ip()), limits.max_connections_per_client, &all) else {
            tracing::debug!(peer = %remote, "closing a connection past server.max_connections_per_client");
            continue;
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
        let activity = Activity {
            open: open.clone(),
            last: admitted.last.clone(),
        };
        let io = TokioIo::new(Idle::new(stream, limits.idle_timeout, activity));
        let connection = builder
            .serve_connection(io, TowerToHyperService::new(service))
            .into_owned();
        connections.spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                () = admitted.close.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = ended {
                tracing::trace!(peer = %remote, error = %err, "connection ended with an error");
            }
            drop(admitted);
            drop(permit);
        });
    }
    drop(listener);
    all.cancel();
    connections.close();
    connections.wait().await;
    Ok(())
}

/// Where a connection's last activity is recorded for [`Open::close_most_idle`].
struct Activity {
    open: Arc<Open>,
    last: Arc<AtomicU64>,
}

impl Activity {
    fn touch(&self) {
        self.last.store(self.open.millis(), Ordering::Relaxed);
    }
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
    activity: Activity,
    /// Armed for `last + timeout` as it was when armed; re-armed when bytes moved since.
    timer: Pin<Box<Sleep>>,
}

impl<T> Idle<T> {
    fn new(inner: T, timeout: Duration, activity: Activity) -> Self {
        let last = Instant::now();
        Self {
            inner,
            timeout,
            last,
            activity,
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
                    this.activity.touch();
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
            this.activity.touch();
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
            this.activity.touch();
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
