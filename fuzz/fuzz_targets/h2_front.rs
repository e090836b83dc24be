//! The HTTP/2 frontend: the client preface, then the input as the client's frames, fed to the
//! real h2 connection and stream code (`stream::http::h2::serve_tracked`) over a socketpair, on
//! a paused-clock runtime (timeouts fire as soon as the connection idles, deterministically).
//! The frontend answers locally (`return`, `deny`, `redirect`, a backend without servers:
//! 503), so no server is involved. Oracle: never a panic, and the stream always ends (the
//! frontend's timeouts are finite and the clock is virtual).
#![no_main]

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use portcullis::engine::Shared;
use portcullis::engine::conn::Conn;
use portcullis::engine::io::{Backend, Stream};
use portcullis::engine::service::Origin;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONFIG: &str = "\
defaults
    mode http
    timeout client 5s
    timeout server 5s
    timeout connect 1s
    timeout http-request 2s
frontend fe
    bind 127.0.0.1:1 proto h2
    http-request set-header x-fuzz %[req.hdr(host)]
    http-request return status 200 content-type text/plain string ok if { path /r }
    http-request deny deny_status 403 if { path_beg /d }
    http-request redirect location /r if { path /x }
    http-response set-header x-out 1
    http-after-response set-header x-after 1
    default_backend be
backend be
";

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn shared() -> Arc<Shared> {
    let cfg = portcullis::config::parse_str("fuzz.cfg", CONFIG, &|_| None)
        .expect("the target's configuration")
        .config;
    let log = portcullis::log::Logger::new(&cfg).expect("logger");
    let model = Arc::new(portcullis::model::Model::build(cfg, None).expect("model"));
    Arc::new(Shared {
        model,
        io: Backend::Epoll,
        stopping: AtomicBool::new(false),
        sessions: AtomicUsize::new(0),
        stop_tx: tokio::sync::watch::channel(false).0,
        log,
        tls: Vec::new(),
        certs: Arc::new(portcullis::tls::CertStore::new()),
        handover: portcullis::engine::handover::Registry::new(Vec::new()),
    })
}

thread_local! {
    static SHARED: Arc<Shared> = shared();
}

fuzz_target!(|data: &[u8]| {
    let shared = SHARED.with(Arc::clone);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let (ours, theirs) = tokio::net::UnixStream::pair().expect("socketpair");
        let fe = Arc::clone(shared.model.proxy("fe").expect("fe"));
        let conn = Conn::Plain(Stream::Unix(ours));
        let origin = Origin::default();
        let sess = Rc::new(portcullis::stick::StkCtrs::default());
        let serve = portcullis::stream::http::h2::serve_tracked(
            shared,
            fe,
            conn,
            origin,
            (sess, Default::default()),
        );
        let client = async move {
            let (mut rd, mut wr) = theirs.into_split();
            let write = async move {
                let _ = wr.write_all(PREFACE).await;
                let _ = wr.write_all(data).await;
                // Not shut down: a client that half-closes gets no answer from an h2 server.
                // The connection ends by the frontend's idle timeout (virtual time) instead;
                // the write half stays open until the reader has seen that.
                wr
            };
            let read = async move {
                let mut got = Vec::new();
                let mut sink = vec![0u8; 16384];
                while let Ok(n) = rd.read(&mut sink).await {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&sink[..n]);
                }
                // `FUZZ_H2_DUMP=1 fuzz/target/…/h2_front <file>`: what the client got, to see
                // that a seed reaches the transaction (a HEADERS frame with its status).
                if std::env::var_os("FUZZ_H2_DUMP").is_some() {
                    eprintln!(
                        "client read {} bytes: {:?}",
                        got.len(),
                        String::from_utf8_lossy(&got)
                    );
                }
            };
            let (_wr, ()) = tokio::join!(write, read);
        };
        // Paused clock: the bound is virtual time, reached only if the server side hangs.
        let all = async {
            tokio::join!(serve, client);
        };
        tokio::time::timeout(Duration::from_secs(600), all)
            .await
            .expect("the h2 connection never ended");
    });
});
