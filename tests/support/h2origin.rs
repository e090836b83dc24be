//! An HTTP/2 origin server (h2c, prior knowledge) on loopback, built on the `h2` crate, for the
//! tests of `server … proto h2`. By path:
//! - `/echo`: 200 with `content-length`, the request body back, and what it saw of the request
//!   in `x-seen-*` headers (method, scheme, authority, trailers);
//! - `/chunked`: 200 without `content-length`, three DATA frames;
//! - `/trailers`: a gRPC-like answer: DATA, then `grpc-status`/`grpc-message` trailers;
//! - `/empty`: 200 with END_STREAM on the headers; `/204`, `/304`: those statuses;
//! - `/goaway`: 200, then GOAWAY on its connection (the server closes it);
//! - an extended CONNECT (RFC 8441): 200 with `x-seen-protocol`, then every DATA echoed;
//! - `/hang`: never answers; `/reset`: RST_STREAM instead of an answer; `/stall`: headers and
//!   part of the body, then nothing.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use h2::server::SendResponse;
use http::{HeaderMap, Request, Response};

pub struct H2Origin {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl H2Origin {
    pub fn start() -> H2Origin {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.set_nonblocking(true).expect("nonblocking");
        let addr = l.local_addr().expect("addr");
        let conns = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (c, r) = (Arc::clone(&conns), Arc::clone(&requests));
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let l = tokio::net::TcpListener::from_std(l).expect("listener");
                let accept = async {
                    loop {
                        let Ok((s, _)) = l.accept().await else {
                            continue;
                        };
                        c.fetch_add(1, Ordering::SeqCst);
                        tokio::task::spawn_local(serve(s, Arc::clone(&r)));
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = rx => {}
                }
            });
        });
        H2Origin {
            addr,
            conns,
            requests,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for H2Origin {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(s: tokio::net::TcpStream, requests: Arc<AtomicUsize>) {
    let Ok(mut conn) = h2::server::Builder::new()
        .enable_connect_protocol()
        .handshake::<_, Bytes>(s)
        .await
    else {
        return;
    };
    let goaway = Arc::new(tokio::sync::Notify::new());
    loop {
        tokio::select! {
            r = conn.accept() => match r {
                Some(Ok((req, respond))) => {
                    requests.fetch_add(1, Ordering::SeqCst);
                    tokio::task::spawn_local(answer(req, respond, Arc::clone(&goaway)));
                }
                _ => break,
            },
            _ = goaway.notified() => {
                conn.graceful_shutdown();
            }
        }
    }
}

async fn answer(
    req: Request<h2::RecvStream>,
    mut respond: SendResponse<Bytes>,
    goaway: Arc<tokio::sync::Notify>,
) {
    let (parts, mut body) = req.into_parts();
    if parts.method == http::Method::CONNECT {
        return tunnel(parts, body, respond).await;
    }
    let mut got = Vec::new();
    while let Some(Ok(d)) = body.data().await {
        let _ = body.flow_control().release_capacity(d.len());
        got.extend_from_slice(&d);
    }
    let trailers = body.trailers().await.ok().flatten().unwrap_or_default();
    let path = parts.uri.path().to_string();
    let resp = |status: u16| Response::builder().status(status);
    match path.as_str() {
        "/hang" => {
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        }
        "/reset" => respond.send_reset(h2::Reason::INTERNAL_ERROR),
        "/stall" => {
            let r = resp(200).header("content-length", "100");
            let Ok(mut s) = respond.send_response(r.body(()).unwrap(), false) else {
                return;
            };
            let _ = s.send_data(Bytes::from_static(b"partial"), false);
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        }
        "/chunked" => {
            let Ok(mut s) = respond.send_response(resp(200).body(()).unwrap(), false) else {
                return;
            };
            for (i, piece) in ["aaa", "bbb", "ccc"].iter().enumerate() {
                let _ = s.send_data(Bytes::from_static(piece.as_bytes()), i == 2);
            }
        }
        "/trailers" => {
            let r = resp(200).header("content-type", "application/grpc");
            let Ok(mut s) = respond.send_response(r.body(()).unwrap(), false) else {
                return;
            };
            let _ = s.send_data(Bytes::from_static(b"payload"), false);
            let mut t = HeaderMap::new();
            t.insert("grpc-status", "7".parse().unwrap());
            t.insert("grpc-message", "denied".parse().unwrap());
            let _ = s.send_trailers(t);
        }
        "/empty" | "/204" | "/304" => {
            let status = path[1..].parse().unwrap_or(200);
            let _ = respond.send_response(resp(status).body(()).unwrap(), true);
        }
        _ => {
            let seen_trailers: Vec<String> = trailers
                .iter()
                .map(|(n, v)| format!("{n}={}", v.to_str().unwrap_or("")))
                .collect();
            let r = resp(200)
                .header("content-length", got.len())
                .header("x-seen-method", parts.method.as_str())
                .header("x-seen-scheme", parts.uri.scheme_str().unwrap_or("-"))
                .header(
                    "x-seen-authority",
                    parts.uri.authority().map_or("-", |a| a.as_str()),
                )
                .header("x-seen-trailers", seen_trailers.join(","));
            let end = got.is_empty() || parts.method == http::Method::HEAD;
            let Ok(mut s) = respond.send_response(r.body(()).unwrap(), end) else {
                return;
            };
            if !end {
                let _ = s.send_data(Bytes::from(got), true);
            }
            if path == "/goaway" {
                goaway.notify_one();
            }
        }
    }
}

/// An RFC 8441 tunnel: accepted, and what comes in goes back out until the client ends.
async fn tunnel(
    parts: http::request::Parts,
    mut body: h2::RecvStream,
    mut respond: SendResponse<Bytes>,
) {
    let proto = parts
        .extensions
        .get::<h2::ext::Protocol>()
        .map_or("-".to_string(), |p| p.as_str().to_string());
    let r = Response::builder()
        .status(200)
        .header("x-seen-protocol", proto)
        .body(())
        .unwrap();
    let Ok(mut s) = respond.send_response(r, false) else {
        return;
    };
    while let Some(Ok(d)) = body.data().await {
        let _ = body.flow_control().release_capacity(d.len());
        if s.send_data(d, false).is_err() {
            return;
        }
    }
    let _ = s.send_data(Bytes::new(), true);
}
