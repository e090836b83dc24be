//! The stream layer: what runs on an accepted connection. [`Streams`] is the engine's
//! [`Service`]: it applies the `tcp-request connection` rules at accept, then runs the session
//! the frontend's mode and the ALPN call for (`mode tcp`: [`tcp`]; HTTP/1 and each HTTP/2
//! stream: the L7 transaction of [`http`], over a [`http::Front`]). Every stream ends in [`end::finish`]. See `LIFECYCLE.md`.

pub mod end;
pub mod http;
pub mod tcp;
pub mod tcp_response;

use std::rc::Rc;
use std::sync::Arc;

use crate::config::model::Mode;
use crate::engine::Shared;
use crate::engine::conn::Conn;
use crate::engine::io::Accepted;
use crate::engine::service::{Origin, Service, SessionFuture};
use crate::model::Proxy;
use crate::stick::StkCtrs;

/// The sessions of `mode tcp` and `mode http` frontends.
pub struct Streams;

impl Service for Streams {
    /// The stick counters `tcp-request connection track-sc` rules tracked at accept, and
    /// whether an `expect-proxy layer4` rule applied.
    type Admitted = (Rc<StkCtrs>, bool);

    fn admit(
        &self,
        shared: &Shared,
        fe: &Proxy,
        acc: &Accepted,
        now: u64,
    ) -> Option<(Rc<StkCtrs>, bool)> {
        let sess = StkCtrs::default();
        let addrs = (acc.peer, acc.local);
        crate::ana::tcp::connection_verdict(&shared.model, fe, addrs, &sess, now)
            .map(|expect| (Rc::new(sess), expect))
    }

    fn expects_proxy(&self, admitted: &(Rc<StkCtrs>, bool)) -> bool {
        admitted.1
    }

    fn background(&self, shared: &Arc<Shared>) -> Vec<SessionFuture> {
        let mut t = crate::resolve::tasks(shared);
        t.extend(crate::peers::tasks(shared));
        t
    }

    fn serve(
        &self,
        shared: Arc<Shared>,
        fe: Arc<Proxy>,
        conn: Conn,
        origin: Origin,
        (sess, _): (Rc<StkCtrs>, bool),
    ) -> SessionFuture {
        // `bind … proto h1|h2` forces the protocol (h2 on a plain bind: prior knowledge);
        // otherwise ALPN decides.
        let h2 = match fe
            .cfg
            .binds
            .get(origin.bind)
            .and_then(|b| b.proto.as_deref())
        {
            Some("h2") => true,
            Some("h1") => false,
            _ => conn.tls().and_then(|t| t.alpn.as_deref()) == Some("h2"),
        };
        // `show sess` / `shutdown session`: the stream is registered while it runs (one box:
        // the registry's wrapper holds the session's future inline).
        use crate::model::sessions::track;
        let (live_fe, live_origin, fd) = (Arc::clone(&fe), origin.clone(), conn.raw_fd());
        match fe.cfg.mode {
            Mode::Tcp => Box::pin(track(
                &live_fe,
                &live_origin,
                fd,
                tcp::run_tracked(shared, fe, conn, origin, sess),
            )),
            Mode::Http if h2 => Box::pin(track(
                &live_fe,
                &live_origin,
                fd,
                http::h2::serve_tracked(shared, fe, conn, origin, sess),
            )),
            Mode::Http => Box::pin(track(
                &live_fe,
                &live_origin,
                fd,
                http::run_tracked(shared, fe, conn, origin, sess),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    /// The size of the future `f` returns (what its task holds), without calling it.
    fn future_size<A, B, C, D, E, R>(_: fn(A, B, C, D, E) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// An idle keep-alive connection is mostly its stream's future (the exchange itself is
    /// boxed): the split into phases must not grow it. The bounds are the sizes before the
    /// split (rustc 1.95: 2000 bytes for HTTP/1, 3704 for an HTTP/2 connection; 1792 and 3552
    /// after); a new toolchain may move them — measure `main` again then.
    #[test]
    fn an_idle_connection_holds_no_more_than_before_the_split() {
        use crate::engine::conn::Conn;
        let h1: fn(_, _, Conn, _, _) -> _ = super::http::run_tracked;
        let h2: fn(_, _, Conn, _, _) -> _ = super::http::h2::serve_tracked;
        let (h1, h2) = (future_size(h1), future_size(h2));
        assert!(h1 <= 2000, "an HTTP/1 connection's future: {h1} bytes");
        assert!(h2 <= 3704, "an HTTP/2 connection's future: {h2} bytes");
    }
}
