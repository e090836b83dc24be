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

use crate::ana::vars::{SessVars, Vars};
use crate::config::model::Mode;
use crate::engine::Shared;
use crate::engine::conn::Conn;
use crate::engine::io::Accepted;
use crate::engine::service::{Origin, Service, SessionFuture, SessionGuard, spawn_session};
use crate::model::Proxy;
use crate::stick::StkCtrs;
use std::sync::atomic::Ordering;

/// `silent-drop`: the client socket is drained (unread bytes would make the close a reset),
/// what it received acknowledged, then made quiet (TCP_REPAIR, else a TTL of 1, as HAProxy) before the close that follows,
/// which then tells the client nothing.
pub(crate) fn silence(fd: std::os::fd::RawFd) {
    loop {
        // SAFETY: MSG_TRUNC discards what is queued without a buffer (as HAProxy's
        // `conn_sock_drain`); non-blocking on a socket the session owns.
        let n = unsafe {
            libc::recv(
                fd,
                std::ptr::null_mut(),
                1 << 30,
                libc::MSG_TRUNC | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n <= 0 {
            break;
        }
    }
    let set = |level, opt, v: libc::c_int| {
        // SAFETY: a setsockopt on a socket the session owns, with an int it points to.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    // What was received is acknowledged now: a delayed ACK would come after the socket is
    // gone, and the client's retransmission would draw a reset.
    set(libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1);
    if set(libc::IPPROTO_TCP, libc::TCP_REPAIR, 1) == 0 {
        // The close's shutdown queues its FIN in the send queue, which repair mode does not
        // transmit (`TCP_SEND_QUEUE`).
        set(libc::IPPROTO_TCP, libc::TCP_REPAIR_QUEUE, 2);
    } else {
        set(libc::IPPROTO_IP, libc::IP_TTL, 1);
        set(libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, 1);
    }
}

/// The sessions of `mode tcp` and `mode http` frontends.
pub struct Streams;

/// What a connection's admission leaves its session: the stick counters its `tcp-request
/// connection|session` rules track, whether an `expect-proxy layer4` rule applied, and the
/// `sess` variables its `tcp-request session` rules set.
pub struct Admission {
    sess: Rc<StkCtrs>,
    expect_proxy: bool,
    vars: SessVars,
}

impl Service for Streams {
    type Admitted = Admission;

    fn admit(&self, shared: &Shared, fe: &Proxy, acc: &Accepted, now: u64) -> Option<Admission> {
        let sess = StkCtrs::default();
        let addrs = (acc.peer, acc.local);
        crate::ana::tcp::connection_verdict(&shared.model, fe, addrs, &sess, now).map(|expect| {
            Admission {
                sess: Rc::new(sess),
                expect_proxy: expect,
                vars: SessVars::default(),
            }
        })
    }

    fn expects_proxy(&self, admitted: &Admission) -> bool {
        admitted.expect_proxy
    }

    /// The `tcp-request session` rules, on the addresses the PROXY header gave and the TLS
    /// facts; an accepted session counts on the counters it tracks (`sess_cnt`, `sess_rate`).
    fn establish(
        &self,
        shared: &Shared,
        fe: &Proxy,
        conn: &Conn,
        origin: &Origin,
        adm: &mut Admission,
    ) -> bool {
        use crate::ana::tcp::{SessionVerdict, base_ctx, session_verdict};
        let now = shared.model.now_ms();
        if !fe.rules.tcp_session.is_empty() {
            let vars = Vars::new(Rc::clone(&adm.vars));
            let mut ctx =
                base_ctx(fe, origin.peer, origin.local).with_tls(conn.tls().map(|t| &**t));
            ctx.proxied = origin.proxied.as_deref();
            ctx.vars = Some(&vars);
            match session_verdict(&shared.model, fe, ctx, &adm.sess, now) {
                SessionVerdict::Accept => {}
                SessionVerdict::Reject => {
                    fe.fe_counters.denied_sess.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                SessionVerdict::SilentDrop => {
                    fe.fe_counters.denied_req.fetch_add(1, Ordering::Relaxed);
                    silence(conn.raw_fd());
                    return false;
                }
            }
        }
        for t in adm.sess.iter() {
            t.count_session(now);
        }
        true
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
        adm: Admission,
        guard: SessionGuard,
    ) {
        let Admission { sess, vars, .. } = adm;
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
        // `show sess` / `shutdown session`: the stream is registered while it runs (the
        // registry's wrapper holds the session's future inline, in the session's task).
        let entry = crate::model::sessions::register(
            &fe,
            (origin.peer, origin.local),
            origin.bind,
            conn.raw_fd(),
        );
        match fe.cfg.mode {
            Mode::Tcp => spawn_session(
                guard,
                entry.track(tcp::run_tracked(shared, fe, conn, origin, sess, vars)),
            ),
            Mode::Http if h2 => spawn_session(
                guard,
                entry.track(http::h2::serve_tracked(
                    shared,
                    fe,
                    conn,
                    origin,
                    (sess, vars),
                )),
            ),
            // Its own task, which it leaves while parked between requests (it then holds its
            // guard and registration itself).
            Mode::Http => http::park::serve(shared, fe, conn, origin, (sess, vars), entry, guard),
        }
    }
}

#[cfg(test)]
mod tests {
    /// The size of the future `f` returns (what its task holds), without calling it.
    fn future_size<A, B, C, D, E, R>(_: fn(A, B, C, D, E) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// An HTTP/2 connection's future: 1112 bytes (3704 before the split into phases). A new
    /// toolchain may move it — measure `main` again then. (HTTP/1: `http::park`'s tests.)
    #[test]
    fn an_idle_connection_holds_no_more_than_before_the_split() {
        let h2: fn(_, _, crate::engine::conn::Conn, _, (_, _)) -> _ =
            super::http::h2::serve_tracked;
        let h2 = future_size(h2);
        assert!(h2 <= 1152, "an HTTP/2 connection's future: {h2} bytes");
    }
}
