//! An HTTP/2 client for the tests (prior knowledge over TCP, the `h2` crate), on a tokio runtime
//! of its own so that a blocking test can call it.
#![allow(dead_code)] // each test binary uses a different subset

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use h2::RecvStream;
use h2::client::SendRequest;

/// Connects to `addr`, completes the HTTP/2 handshake (the connection is then driven in the
/// background) and runs `exchange` on it, on a current-thread runtime; what it returns. Panics
/// unless all of it ends within 15 s.
pub fn h2_exchange<T, F: Future<Output = T>>(
    addr: SocketAddr,
    exchange: impl FnOnce(SendRequest<Bytes>) -> F,
) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let run = async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (client, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        exchange(client).await
    };
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(15), run).await })
        .expect("the exchange ends in time")
}

/// The rest of `body` until its end, each DATA frame's capacity released as it comes.
pub async fn read_body(body: &mut RecvStream) -> Vec<u8> {
    let mut data = Vec::new();
    while let Some(d) = body.data().await {
        let d = d.expect("data");
        let _ = body.flow_control().release_capacity(d.len());
        data.extend_from_slice(&d);
    }
    data
}
