//! HTTP/2 on the frontend (ALPN `h2`): the connection. The `h2` crate runs the protocol (flow
//! control, HPACK, limits, rapid-reset and CONTINUATION-flood defences); each stream runs one
//! transaction of the same L7 session code as an HTTP/1 client's, its client side an
//! [`H2Front`] (`h2front.rs`), so rules, routing, server pools, shutdown-sessions and logs are
//! shared.

use crate::engine::service::Origin;
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use h2::server::SendResponse;

use crate::stick::StkCtrs;
use h2::RecvStream;

use crate::engine::Shared;
use crate::engine::conn::Conn;
use crate::engine::io::spawn;
use crate::engine::pollio::PollIo;
use crate::model::Proxy;
use crate::tls::stream::TlsInfo;

use super::h2front::H2Front;

/// HAProxy's `tune.h2.max-concurrent-streams` default.
const MAX_CONCURRENT_STREAMS: u32 = 100;
/// Largest header list accepted (HAProxy's is bounded by `tune.bufsize`, 16 KiB, per block; a
/// little more room here, still far from a CONTINUATION flood's).
const MAX_HEADER_LIST: u32 = 64 * 1024;
/// Serves an HTTP/2 client connection until it closes, the client goes idle, or the process
/// stops (GOAWAY, then the streams in flight finish).
/// Serves an HTTP/2 connection: one L7 transaction per stream. `sess` holds the counters the
/// connection's `tcp-request connection` rules tracked (every stream sees them).
pub async fn serve_tracked(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    conn: Conn,
    origin: Origin,
    sess: Rc<StkCtrs>,
) {
    let conn = Rc::new(conn);
    let (client, idle) = {
        let t = fe.cfg.timeouts;
        (t.client, t.http_keep_alive.or(t.client))
    };
    let streams = H2Conn {
        tls: conn.tls().cloned(),
        shared,
        fe,
        origin,
        sess,
        active: Rc::new(Cell::new(0)),
        ended: Rc::new(tokio::sync::Notify::new()),
    };
    let Some(mut h2c) = handshake(Rc::clone(&conn), client).await else {
        return;
    };
    let mut count = 0u64;
    let mut stop = streams.shared.stop_tx.subscribe();
    let mut stopping = *stop.borrow_and_update();
    if stopping {
        h2c.graceful_shutdown();
    }
    loop {
        let idle_timer = async {
            match idle {
                Some(d) if streams.active.get() == 0 => tokio::time::sleep(d).await,
                _ => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = h2c.accept() => match r {
                Some(Ok((req, respond))) => {
                    count += 1;
                    streams.spawn(req, respond, count == 1);
                }
                Some(Err(e)) => {
                    tracing::debug!("{}: h2 connection error: {e}", streams.fe.name);
                    drop(h2c);
                    linger(&conn).await;
                    return;
                }
                None => break,
            },
            r = stop.changed(), if !stopping => {
                if r.is_ok() && *stop.borrow_and_update() {
                    stopping = true;
                    h2c.graceful_shutdown();
                }
            }
            _ = streams.ended.notified() => {}
            _ = idle_timer => {
                h2c.graceful_shutdown();
                if streams.active.get() == 0 {
                    // Lets the GOAWAY out before the connection is dropped.
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_millis(100),
                        std::future::poll_fn(|cx| h2c.poll_closed(cx)),
                    )
                    .await;
                    break;
                }
            }
        }
    }
}

/// The server side of the HTTP/2 preface and SETTINGS, within `timeout client`.
async fn handshake(
    conn: Rc<Conn>,
    client: Option<std::time::Duration>,
) -> Option<h2::server::Connection<PollIo, Bytes>> {
    let io = PollIo::new(conn, None);
    let mut builder = h2::server::Builder::new();
    // RFC 8441's extended CONNECT (WebSocket over h2), which HAProxy 2.6 advertises too.
    builder
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST)
        .enable_connect_protocol();
    let hs = builder.handshake::<_, Bytes>(io);
    match client {
        Some(d) => tokio::time::timeout(d, hs).await.ok()?.ok(),
        None => hs.await.ok(),
    }
}

/// What every stream of one HTTP/2 connection shares, and how many are running.
struct H2Conn {
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    origin: Origin,
    tls: Option<Arc<TlsInfo>>,
    sess: Rc<StkCtrs>,
    active: Rc<Cell<usize>>,
    /// Signalled when the last running stream ends (the idle timer then starts).
    ended: Rc<tokio::sync::Notify>,
}

impl H2Conn {
    /// Runs a new stream (`first`: the connection's first) in a task of its own.
    fn spawn(&self, req: http::Request<RecvStream>, respond: SendResponse<Bytes>, first: bool) {
        self.active.set(self.active.get() + 1);
        let (active, ended) = (Rc::clone(&self.active), Rc::clone(&self.ended));
        // Boxed: the task then holds a pointer, not the whole session's future, which the
        // runtime would otherwise copy around (about 8 KiB) per stream.
        let fut = Box::pin(stream(
            Arc::clone(&self.shared),
            Arc::clone(&self.fe),
            req,
            respond,
            (self.origin.clone(), first),
            self.tls.clone(),
            Rc::clone(&self.sess),
        ));
        spawn(async move {
            fut.await;
            let left = active.get().saturating_sub(1);
            active.set(left);
            // Only the idle timer waits for this, and only once none is left.
            if left == 0 {
                ended.notify_one();
            }
        });
    }
}

/// After a connection error (GOAWAY sent): what the client still sends is read and dropped
/// for a moment before the close, since closing on unread bytes sends a RST, which can destroy
/// the GOAWAY before the client reads it (e.g. in the middle of a rapid-reset burst).
async fn linger(conn: &Conn) {
    const LINGER: std::time::Duration = std::time::Duration::from_millis(500);
    const LINGER_MAX: usize = 1 << 20;
    let drain = async {
        let (mut buf, mut total) = (Vec::with_capacity(16 * 1024), 0usize);
        while total < LINGER_MAX {
            buf.clear();
            let (r, b) = conn.read(buf).await;
            buf = b;
            match r {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// One stream: its front ([`H2Front`]) into a fresh L7 session. Not async itself, so that the
/// future is only the session's (no request parts kept beside it).
fn stream(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    req: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
    (origin, first): (Origin, bool),
    tls: Option<Arc<TlsInfo>>,
    sess: Rc<StkCtrs>,
) -> impl Future<Output = ()> {
    let front = H2Front::new(req, respond, tls, first);
    super::run_tracked(shared, fe, front, origin, sess)
}
