//! The seam between the transport and the streams: a worker accepts a connection, asks the
//! [`Service`] whether to admit it, terminates TLS for `bind … ssl`, and hands the connection to
//! the service. The engine names no session type; `main` gives the service (the stream
//! layer's `Streams`).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use super::Shared;
use super::conn::Conn;
use super::io::Accepted;
use crate::model::Proxy;

/// Where a session's connection comes from: the socket's addresses, or those the PROXY protocol
/// header of an `accept-proxy` bind carried (they then are `src`/`dst` for rules, stick tables,
/// logs and `X-Forwarded-For`, as in HAProxy).
#[derive(Clone, Debug, Default)]
pub struct Origin {
    /// The client (`src`).
    pub peer: Option<SocketAddr>,
    /// What the client connected to (`dst`).
    pub local: Option<SocketAddr>,
    /// The header received (`fc_rcvd_proxy`, `fc_pp_*`).
    pub proxied: Option<Arc<crate::proxy_proto::Header>>,
    /// Which `bind` line of the frontend accepted the connection.
    pub bind: usize,
}

impl Origin {
    /// The socket's own addresses.
    pub fn of(conn: &Conn, peer: Option<SocketAddr>) -> Origin {
        Origin {
            peer,
            local: conn.local_addr(),
            proxied: None,
            bind: 0,
        }
    }

    /// The listener id HAProxy logs for a unix-socket client (`%cp`): listeners are numbered
    /// from 1 in bind order. None for TCP clients (they have an address).
    pub fn unix_listener(&self) -> Option<u32> {
        self.peer
            .is_none()
            .then(|| u32::try_from(self.bind + 1).unwrap_or(u32::MAX))
    }

    /// The addresses of a received header replace the socket's (unless it carries none:
    /// `LOCAL`, `UNKNOWN`, unix or unspecified families).
    pub fn proxied(mut self, h: crate::proxy_proto::Header) -> Origin {
        if let (false, Some((src, dst))) = (h.local, h.addrs.inet()) {
            self.peer = Some(src);
            self.local = Some(dst);
        }
        self.proxied = Some(Arc::new(h));
        self
    }
}

/// A background task's future (see [`Service::background`]).
pub type SessionFuture = Pin<Box<dyn Future<Output = ()>>>;

/// The `maxconn` slots (frontend and process) an admitted session holds, released however it
/// ends.
pub struct SessionGuard {
    pub(super) shared: Arc<Shared>,
    pub(super) fe: Arc<Proxy>,
}

impl SessionGuard {
    /// The guard of slots just taken: the session is counted as current (`smax`, the worker's
    /// sessions) until the guard drops.
    pub(super) fn taken(shared: &Arc<Shared>, fe: &Arc<Proxy>) -> SessionGuard {
        fe.fe_counters.smax.update(fe.feconn.current());
        shared
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        SessionGuard {
            shared: Arc::clone(shared),
            fe: Arc::clone(fe),
        }
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.fe.feconn.leave();
        self.shared.model.actconn.leave();
        self.shared
            .sessions
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Runs a session in a task of its own on this worker, holding `guard` until it ends. The
/// session's future is the task's state, inline: one allocation for a connection's whole life
/// (an idle keep-alive connection holds it), where a boxed future inside the accept task made
/// two, the task's own sized for the largest accept stage.
pub fn spawn_session<F: Future<Output = ()> + 'static>(guard: SessionGuard, session: F) {
    super::io::spawn(Guarded {
        session,
        _guard: guard,
    });
}

pin_project_lite::pin_project! {
    /// A session with its guard, written by hand: an `async` block awaiting its captured
    /// future would hold it twice (the capture and the awaited copy), doubling the task.
    struct Guarded<F> {
        #[pin]
        session: F,
        _guard: SessionGuard,
    }
}

impl<F: Future<Output = ()>> Future for Guarded<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.project().session.poll(cx)
    }
}

/// What runs on the connections a worker accepts.
pub trait Service: Send + Sync + 'static {
    /// What the service learns at accept and keeps for the session (stick counters tracked by
    /// `tcp-request connection` rules); lives on the worker thread only.
    type Admitted: 'static;

    /// Called once per accepted connection, before it is a session: None refuses it (the worker
    /// counts it in `dcon`, resets it and logs nothing, as HAProxy does).
    fn admit(
        &self,
        shared: &Shared,
        fe: &Proxy,
        acc: &Accepted,
        now: u64,
    ) -> Option<Self::Admitted>;

    /// Whether the admission asks for a PROXY protocol header although the bind has no
    /// `accept-proxy` (`tcp-request connection expect-proxy layer4`).
    fn expects_proxy(&self, _admitted: &Self::Admitted) -> bool {
        false
    }

    /// Called once an admitted connection is established (its PROXY header read, its TLS
    /// handshake done), before it counts as a session: false ends it without a word to the
    /// client (`tcp-request session reject|silent-drop`, which the service counts itself).
    fn establish(
        &self,
        _shared: &Shared,
        _fe: &Proxy,
        _conn: &Conn,
        _origin: &Origin,
        _admitted: &mut Self::Admitted,
    ) -> bool {
        true
    }

    /// Starts the session of an admitted connection (PROXY header read for `accept-proxy`, TLS
    /// terminated for `bind … ssl`) with [`spawn_session`], which holds `guard` (the session's
    /// `maxconn` slots) until the session ends.
    fn serve(
        &self,
        shared: Arc<Shared>,
        fe: Arc<Proxy>,
        conn: Conn,
        origin: Origin,
        admitted: Self::Admitted,
        guard: SessionGuard,
    );

    /// Control-plane tasks the service keeps running beside the health checks (the DNS
    /// resolvers); started on the control thread, they end when the process stops.
    fn background(&self, _shared: &Arc<Shared>) -> Vec<SessionFuture> {
        Vec::new()
    }
}
