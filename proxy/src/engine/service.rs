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

/// A session's future, boxed: a worker's task then holds a pointer, not the largest session's
/// state inline (an idle keep-alive connection would carry it all).
pub type SessionFuture = Pin<Box<dyn Future<Output = ()>>>;

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

    /// Runs the session of an admitted connection (TLS already terminated for `bind … ssl`),
    /// until it ends. The worker holds the session's `maxconn` slots meanwhile.
    fn serve(
        &self,
        shared: Arc<Shared>,
        fe: Arc<Proxy>,
        conn: Conn,
        peer: Option<SocketAddr>,
        admitted: Self::Admitted,
    ) -> SessionFuture;
}
