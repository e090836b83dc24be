//! `tcp-response content` rules in `mode tcp` (HAProxy's `AN_RES_INSPECT`): once the server is
//! connected, its first bytes are peeked at (they stay in the socket for the relay) and the
//! backend's rules evaluated at once, then on every arrival, until one decides; a rule whose
//! fetch needs more bytes waits until `tcp-response inspect-delay` (counted from the connection)
//! expires, the server closes, or the buffer is full. Meanwhile the client's bytes keep flowing
//! to the server, as HAProxy only holds the response direction.

use tokio::time::Instant;

use crate::ana::rules::apply_tcp_rules;
use crate::ana::sample::SampleCtx;
use crate::config::model::TcpRequestAction;
use crate::engine::io::{Peeker, Stream};
use crate::model::Proxy;

/// What the inspection decided, how many server bytes it looked at (they are still in the
/// server socket) and how many client bytes it forwarded meanwhile.
pub struct Inspected {
    pub verdict: TcpRequestAction,
    pub len: usize,
    pub c2s: u64,
}

/// Runs `be`'s `tcp-response content` rules over the server's first bytes, copied into `buf`
/// (its length is the inspection buffer). `client` is the client socket when it can be
/// watched without reading ahead (a plain one): its bytes are forwarded while the rules wait.
pub async fn inspect(
    be: &Proxy,
    client: Option<&Stream>,
    server: &Stream,
    base: SampleCtx<'_>,
    buf: &mut [u8],
) -> Inspected {
    let delay = be.cfg.tcp_res_inspect_delay.filter(|d| !d.is_zero());
    let deadline = delay.map(|d| Instant::now() + d);
    let speek = Peeker::new(server).ok();
    let mut len = speek
        .as_ref()
        .and_then(|p| p.try_peek(buf).ok())
        .unwrap_or(0);
    let mut closed = speek.is_none();
    let cpeek = client.and_then(|c| Peeker::new(c).ok().map(|p| (c, p)));
    let mut client_open = cpeek.is_some();
    let mut c2s = 0;
    loop {
        let expired = deadline.is_none_or(|d| Instant::now() >= d);
        let partial = !(expired || closed || len >= buf.len());
        let ctx = SampleCtx {
            res_payload: Some(buf.get(..len).unwrap_or(&[])),
            partial,
            ..base
        };
        if let Some(verdict) = apply_tcp_rules(&be.rules.tcp_response, &ctx) {
            return Inspected { verdict, len, c2s };
        }
        let (Some(sp), Some(d)) = (&speek, deadline) else {
            return Inspected {
                verdict: TcpRequestAction::Accept,
                len,
                c2s,
            };
        };
        let watched = cpeek.as_ref().filter(|_| client_open);
        let from_client = async move {
            let mut probe = [0u8; 1];
            match watched {
                Some((_, p)) => p.peek(&mut probe).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = tokio::time::timeout_at(d, sp.peek(buf)) => match r {
                Ok(Ok((n, c))) => (len, closed) = (n, c),
                Ok(Err(_)) => closed = true,
                // Expired: the next pass is final.
                Err(_) => {}
            },
            r = from_client => match (r, &cpeek) {
                (Ok((n, _)), Some((c, _))) if n > 0 => match forward(c, server).await {
                    Some(n) => c2s += n,
                    None => client_open = false,
                },
                // The client closed (or failed): the relay sees it and passes it on.
                _ => client_open = false,
            },
        }
    }
}

/// Moves what the client has pending to the server (the peek saw it: the read does not
/// wait); None when the client has closed or either side failed.
async fn forward(client: &Stream, server: &Stream) -> Option<u64> {
    let (r, data) = client.read(Vec::with_capacity(16 * 1024)).await;
    let n = r.ok().filter(|n| *n > 0)?;
    let (w, _) = server.write_all(data).await;
    w.ok()?;
    Some(n as u64)
}
