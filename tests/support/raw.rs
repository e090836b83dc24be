//! Raw TCP on both sides of a test: a server made of one closure per connection, the
//! byte-counting server the `mode tcp` differential tests route to, and a client socket bound to
//! a chosen loopback source (the source address is what `src` ACLs and stick tables see).
//! Unlike the servers of backend.rs, these live as long as the test process.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// A server on 127.0.0.1 (a free port) running `handler` on each connection, in a thread of its
/// own; its address.
pub fn serve(handler: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a test server");
    let addr = l.local_addr().expect("local address");
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let h = Arc::clone(&handler);
            std::thread::spawn(move || h(s));
        }
    });
    addr
}

/// A server that reads until EOF or `silence` without a byte, then answers
/// `<tag> <bytes received>` and closes.
pub fn counting_server(tag: &'static str, silence: Duration) -> SocketAddr {
    serve(move |mut s| {
        let _ = s.set_read_timeout(Some(silence));
        let mut n = 0;
        let mut buf = [0u8; 4096];
        while let Ok(k) = s.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k;
        }
        let _ = s.write_all(format!("{tag} {n}").as_bytes());
    })
}

/// A connection to `to` from the loopback address `src` (any port), its reads timing out after
/// `timeout`.
pub fn connect_from(src: [u8; 4], to: SocketAddr, timeout: Duration) -> TcpStream {
    let sock =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.bind(&SocketAddr::from((src, 0)).into())
        .expect("bind the source address");
    sock.connect(&to.into()).expect("connect");
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(timeout)).expect("read timeout");
    s
}
