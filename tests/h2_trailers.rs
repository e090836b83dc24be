//! An HTTP/1 server's chunked response to an HTTP/2 client, beside HAProxy 2.6: the payload as
//! DATA without the chunk framing, and the trailer fields as a last HEADERS frame.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/h2client.rs"]
mod h2client;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use backend::{free_port, lo};
use proxy::Proc;

/// A server answering every request with a chunked body and a trailer.
fn server() -> SocketAddr {
    let l = TcpListener::bind(lo(0)).expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { break };
            std::thread::spawn(move || {
                let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                let mut head = Vec::new();
                let mut b = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let _ = c.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n\
                      5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-checksum: abc\r\nx-n: 2\r\n\r\n",
                );
                let _ = c.read(&mut b);
            });
        }
    });
    addr
}

/// The response an h2 client gets: status, fields, body, trailers.
type Got = (u16, Vec<(String, String)>, Vec<u8>, Vec<(String, String)>);

fn get(port: u16) -> Got {
    h2client::h2_exchange(lo(port), |client| async move {
        let mut client = client.ready().await.expect("ready");
        let req = http::Request::get("http://127.0.0.1/t")
            .body(())
            .expect("request");
        let (resp, _) = client.send_request(req, true).expect("send");
        let resp = resp.await.expect("response");
        let fields = |h: &http::HeaderMap| -> Vec<(String, String)> {
            h.iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("?").to_string()))
                .collect()
        };
        let (status, head) = (resp.status().as_u16(), fields(resp.headers()));
        let mut body = resp.into_body();
        let data = h2client::read_body(&mut body).await;
        let trailers = body.trailers().await.expect("trailers").unwrap_or_default();
        (status, head, data, fields(&trailers))
    })
}

fn run(start: impl Fn(&str, SocketAddr) -> Option<Proc>) -> Option<Got> {
    let srv = server();
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    \
         timeout server 5s\nlisten l\n    bind 127.0.0.1:{port} proto h2\n    server s1 {srv}\n"
    );
    let _p = start(&cfg, lo(port))?;
    Some(get(port))
}

#[test]
fn chunked_payload_and_trailers_reach_an_h2_client_as_haproxy() {
    let ours = run(|cfg, at| Some(Proc::portcullis(cfg, at))).expect("ran");
    let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
    assert_eq!(ours.0, 200);
    assert_eq!(ours.1, [pair("content-type", "text/plain")]);
    assert_eq!(ours.2, b"hello world");
    assert_eq!(ours.3, [pair("x-checksum", "abc"), pair("x-n", "2")]);
    if let Some(theirs) = run(Proc::haproxy) {
        assert_eq!(ours, theirs);
    }
}
