//! WebSocket over HTTP/2 (RFC 8441 extended CONNECT) to an HTTP/1.1 server, beside HAProxy 2.6
//! on the same config: the h2 bind advertises SETTINGS_ENABLE_CONNECT_PROTOCOL, the server gets
//! a `GET` upgrade with a generated key, its 101 reaches the client as a 200 and the stream then
//! carries the tunnel; a 101 with a wrong accept value is a 502.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/h2client.rs"]
mod h2client;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backend::{free_port, lo};
use bytes::Bytes;
use proxy::Proc;

/// A one-connection-at-a-time WebSocket server: answers the upgrade (with the right accept
/// value unless `bad_key`), then echoes what it reads. Keeps each request head it got.
fn ws_server(bad_key: bool) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind(lo(0)).expect("bind");
    let addr = l.local_addr().expect("addr");
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { break };
            let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
            let mut head = Vec::new();
            let mut b = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let key = text
                .lines()
                .find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.eq_ignore_ascii_case("sec-websocket-key")
                        .then(|| v.trim().to_string())
                })
                .unwrap_or_default();
            seen.lock().unwrap().push(text);
            let accept = if bad_key {
                "invalid".into()
            } else {
                accept(&key)
            };
            let resp = format!(
                "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\
                 sec-websocket-accept: {accept}\r\n\r\n"
            );
            if c.write_all(resp.as_bytes()).is_err() {
                continue;
            }
            loop {
                match c.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if c.write_all(&b[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
        }
    });
    (addr, heads)
}

fn accept(key: &str) -> String {
    use base64::Engine;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(ctx.finish())
}

/// What one extended CONNECT got: whether the setting was advertised, the status, and the
/// echo of "ping" (empty when no tunnel).
fn ws_over_h2(port: u16) -> (bool, u16, Vec<u8>) {
    h2client::h2_exchange(lo(port), |client| async move {
        let mut client = client.clone().ready().await.expect("ready");
        // The server's SETTINGS arrive after the handshake returns.
        let mut enabled = false;
        for _ in 0..200 {
            enabled = client.is_extended_connect_protocol_enabled();
            if enabled {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let req = http::Request::builder()
            .method("CONNECT")
            .uri("http://127.0.0.1/chat")
            .extension(h2::ext::Protocol::from("websocket"))
            .body(())
            .expect("request");
        let (resp, mut send) = client.send_request(req, false).expect("send");
        let resp = resp.await.expect("response");
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut echo = Vec::new();
        if status == 200 {
            send.send_data(Bytes::from_static(b"ping"), false)
                .expect("data");
            while echo.len() < 4 {
                match body.data().await {
                    Some(Ok(d)) => {
                        let _ = body.flow_control().release_capacity(d.len());
                        echo.extend_from_slice(&d);
                    }
                    _ => break,
                }
            }
            let _ = send.send_data(Bytes::new(), true);
        }
        (enabled, status, echo)
    })
}

fn config(port: u16, good: SocketAddr, bad_port: u16, bad: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    \
         timeout server 5s\n    timeout tunnel 5s\n\
         listen ws\n    bind 127.0.0.1:{port} proto h2\n    server s1 {good}\n\
         listen ws_bad\n    bind 127.0.0.1:{bad_port} proto h2\n    server s1 {bad}\n"
    )
}

/// One run against `start`: the good server's tunnel (and the request head it got, its key
/// value masked and names lowercase), then the bad key's 502.
fn run(name: &str, start: impl Fn(&str, SocketAddr) -> Option<Proc>) -> Option<String> {
    let (good, heads) = ws_server(false);
    let (bad, _) = ws_server(true);
    let (port, bad_port) = (free_port(), free_port());
    let _p = start(&config(port, good, bad_port, bad), lo(port))?;
    let (enabled, status, echo) = ws_over_h2(port);
    assert!(enabled, "{name}: SETTINGS_ENABLE_CONNECT_PROTOCOL");
    assert_eq!(status, 200, "{name}");
    assert_eq!(echo, b"ping", "{name}");
    let head = heads.lock().unwrap().first().cloned().unwrap_or_default();
    let (_, status, echo) = ws_over_h2(bad_port);
    assert_eq!(
        (status, echo.len()),
        (502, 0),
        "{name}: a wrong accept value"
    );
    let masked: Vec<String> = head
        .split("\r\n")
        .map(|l| match l.split_once(": ") {
            Some((n, v)) => {
                let n = n.to_ascii_lowercase();
                if n == "sec-websocket-key" {
                    assert_eq!(v.len(), 24, "{name}: a generated key: {head}");
                    format!("{n}: <key>")
                } else {
                    format!("{n}: {v}")
                }
            }
            None => l.to_string(),
        })
        .collect();
    Some(masked.join("\r\n"))
}

#[test]
fn websocket_over_h2_to_an_h1_server_as_haproxy() {
    let ours = run("portcullis", |cfg, at| Some(Proc::portcullis(cfg, at))).expect("ran");
    assert_eq!(
        ours,
        "GET /chat HTTP/1.1\r\nupgrade: websocket\r\nconnection: upgrade\r\nhost: 127.0.0.1\r\n\
         sec-websocket-key: <key>\r\n\r\n"
    );
    if let Some(theirs) = run("haproxy", Proc::haproxy) {
        assert_eq!(ours, theirs);
    }
}
