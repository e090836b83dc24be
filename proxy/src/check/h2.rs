//! Health checks over HTTP/2 (`check-proto h2`, or ALPN `h2` negotiated through `check-alpn`):
//! each `http-check send` goes out as one stream of an h2 connection (h2c with prior knowledge
//! on a plain connection), and its response comes back as the status, headers and body that the
//! `expect` rules judge — the same shape the HTTP/1 path parses.

use crate::http::head::h2_forbidden as connection_specific;
use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};

/// An h2 connection a check opened: the stream handle, and the task driving the connection
/// (stopped when the check drops it).
pub struct Link {
    send: SendRequest<Bytes>,
    driver: tokio::task::JoinHandle<()>,
    pending: Option<ResponseFuture>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// What the server answered.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body ended (END_STREAM) rather than filling `max` bytes.
    pub complete: bool,
}

/// The client preface and SETTINGS exchange on `io`.
pub async fn handshake<T>(io: T) -> Result<Link, h2::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Link {
        send,
        driver,
        pending: None,
    })
}

impl Link {
    /// Sends one request. `host` becomes `:authority` (HAProxy's H2 mux does the same with the
    /// Host header); `te` is kept only as `trailers`.
    pub async fn send(
        &mut self,
        method: &str,
        uri: &str,
        headers: &[(String, String)],
        body: Option<&str>,
    ) -> Result<(), String> {
        let host = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map(|(_, v)| v.as_str());
        let target = match host {
            Some(h) if uri.starts_with('/') => format!("http://{h}{uri}"),
            _ => uri.to_string(),
        };
        let mut req = http::Request::builder()
            .method(method)
            .uri(target)
            .body(())
            .map_err(|e| e.to_string())?;
        for (n, v) in headers {
            let te_other = n.eq_ignore_ascii_case("te") && !v.eq_ignore_ascii_case("trailers");
            if connection_specific(n) || n.eq_ignore_ascii_case("host") || te_other {
                continue;
            }
            if let (Ok(name), Ok(value)) = (
                http::header::HeaderName::from_bytes(n.to_ascii_lowercase().as_bytes()),
                http::HeaderValue::from_str(v),
            ) {
                req.headers_mut().append(name, value);
            }
        }
        if let Some(b) = body {
            req.headers_mut().insert(
                http::header::CONTENT_LENGTH,
                http::HeaderValue::from(b.len()),
            );
        }
        let ready = self.send.clone().ready().await.map_err(|e| e.to_string())?;
        self.send = ready;
        let end = body.is_none();
        let (resp, mut stream) = self
            .send
            .send_request(req, end)
            .map_err(|e| e.to_string())?;
        if let Some(b) = body {
            stream
                .send_data(Bytes::copy_from_slice(b.as_bytes()), true)
                .map_err(|e| e.to_string())?;
        }
        self.pending = Some(resp);
        Ok(())
    }

    /// The response to the last request: its head, and its body up to `max` bytes when
    /// `need_body` (what the HTTP/1 path would have buffered).
    pub async fn response(&mut self, need_body: bool, max: usize) -> Result<Answer, String> {
        let Some(pending) = self.pending.take() else {
            return Err("no request sent".into());
        };
        let resp = pending.await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let mut recv = resp.into_body();
        let mut body = Vec::new();
        let mut complete = recv.is_end_stream();
        while need_body && !complete && body.len() < max {
            match recv.data().await {
                Some(chunk) => {
                    let chunk = chunk.map_err(|e| e.to_string())?;
                    let _ = recv.flow_control().release_capacity(chunk.len());
                    let room = max - body.len();
                    body.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
                }
                None => complete = true,
            }
        }
        Ok(Answer {
            status,
            headers,
            body,
            complete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real h2 server (the h2 crate) on one end of an in-memory duplex.
    #[test]
    fn request_and_response_over_h2() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let server = tokio::spawn(async move {
                let mut conn = h2::server::handshake(b).await.unwrap();
                let (req, mut respond) = conn.accept().await.unwrap().unwrap();
                let (parts, mut body) = req.into_parts();
                let mut got = Vec::new();
                while let Some(c) = body.data().await {
                    got.extend_from_slice(&c.unwrap());
                }
                let seen = format!(
                    "{} {} {:?} {:?} {}",
                    parts.method,
                    parts.uri,
                    parts.headers.get("x-test"),
                    parts.headers.get("connection"),
                    String::from_utf8_lossy(&got)
                );
                let resp = http::Response::builder()
                    .status(503)
                    .header("x-why", "drain")
                    .body(())
                    .unwrap();
                let mut s = respond.send_response(resp, false).unwrap();
                s.send_data(Bytes::from_static(b"not now"), true).unwrap();
                // Keep the connection driven until the client has read everything.
                let _ = conn.accept().await;
                seen
            });
            let mut link = handshake(a).await.unwrap();
            let headers = vec![
                ("host".to_string(), "chk.example".to_string()),
                ("X-Test".to_string(), "1".to_string()),
                ("connection".to_string(), "close".to_string()),
            ];
            link.send("GET", "/health", &headers, Some("ping"))
                .await
                .unwrap();
            let a = link.response(true, 16384).await.unwrap();
            assert_eq!(a.status, 503);
            assert!(
                a.headers
                    .contains(&("x-why".to_string(), "drain".to_string()))
            );
            assert_eq!(a.body, b"not now");
            assert!(a.complete);
            drop(link);
            let seen = server.await.unwrap();
            assert_eq!(seen, "GET http://chk.example/health Some(\"1\") None ping");
        });
    }
}
