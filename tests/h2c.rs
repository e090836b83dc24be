//! `bind … proto h2`: HTTP/2 with prior knowledge on a plain listener (h2c), beside an HTTP/1
//! bind of the same frontend, with real clients (curl, h2load).

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::process::Command;

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::Proc;

fn curl(args: &[&str], url: &str) -> (bool, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "10",
            "-w",
            "\n%{http_version} %{http_code}",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("curl is installed by cargo xtask setup");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn h2_prior_knowledge_on_a_plain_bind() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let (h2, h1) = (free_port(), free_port());
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{h2} proto h2\n    bind 127.0.0.1:{h1}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(h1));
    let (ok, out) = curl(
        &["--http2-prior-knowledge"],
        &format!("http://127.0.0.1:{h2}/x"),
    );
    assert!(ok, "{out}");
    assert!(out.ends_with("\n2 200"), "{out}");
    assert!(out.contains("node=n1 path=/x"), "{out}");
    // The other bind of the same frontend stays HTTP/1.
    let (ok, out) = curl(&["--http1.1"], &format!("http://127.0.0.1:{h1}/y"));
    assert!(ok && out.ends_with("\n1.1 200"), "{out}");
    // An HTTP/1 request on the h2 bind is no HTTP/2 preface: the connection is refused.
    let (_, out) = curl(&["--http1.1"], &format!("http://127.0.0.1:{h2}/z"));
    assert!(!out.ends_with(" 200"), "{out}");
    // Many streams over few connections.
    let out = Command::new("h2load")
        .args(["-n", "2000", "-c", "4", "-m", "10"])
        .arg(format!("http://127.0.0.1:{h2}/"))
        .output()
        .expect("h2load is installed by cargo xtask setup");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed"),
        "{text}"
    );
    let rec = node
        .requests()
        .into_iter()
        .find(|r| r.target == "/x")
        .expect("the h2 request");
    assert!(rec.head.starts_with("GET /x HTTP/1.1\r\n"), "{}", rec.head);
}

/// Sends GET requests for `paths` one after another on one HTTP/2 connection (h2c); the bodies.
fn sequential_gets(port: u16, paths: &[&str]) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let run = async move {
        let tcp = tokio::net::TcpStream::connect(lo(port))
            .await
            .expect("connect");
        let (client, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut bodies = Vec::new();
        for p in paths {
            let mut client = client.clone().ready().await.expect("ready");
            let req = http::Request::get(format!("http://127.0.0.1{p}"))
                .body(())
                .expect("request");
            let (resp, _) = client.send_request(req, true).expect("send");
            let mut body = resp.await.expect("response").into_body();
            let mut data = Vec::new();
            while let Some(d) = body.data().await {
                let d = d.expect("data");
                let _ = body.flow_control().release_capacity(d.len());
                data.extend_from_slice(&d);
            }
            bodies.push(String::from_utf8_lossy(&data).into_owned());
        }
        bodies
    };
    rt.block_on(async { tokio::time::timeout(std::time::Duration::from_secs(15), run).await })
        .expect("the exchanges end in time")
}

/// `sess.*` variables belong to the connection: a later stream of the same HTTP/2 connection
/// reads what an earlier one set, as in HAProxy 2.6 (streams share their session).
#[test]
fn sess_variables_are_shared_by_a_connections_streams_as_haproxy() {
    let run = |port: u16, start: &dyn Fn(&str) -> Option<Proc>| {
        let cfg = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             frontend fe\n    bind 127.0.0.1:{port} proto h2\n\
             \x20   http-request set-var(sess.first) path if !{{ var(sess.first) -m found }}\n\
             \x20   http-request set-var(sess.n) int(0) if !{{ var(sess.n) -m found }}\n\
             \x20   http-request set-var(sess.n) var(sess.n),add(1)\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"first=%[var(sess.first)] n=%[var(sess.n)] path=%[path]\"\n"
        );
        let _p = start(&cfg)?;
        Some(sequential_gets(port, &["/a", "/b", "/c"]))
    };
    let p = free_port();
    let ours = run(p, &|c| Some(Proc::portcullis(c, lo(p)))).expect("portcullis");
    assert_eq!(
        ours,
        [
            "first=/a n=1 path=/a",
            "first=/a n=2 path=/b",
            "first=/a n=3 path=/c"
        ]
    );
    let h = free_port();
    if let Some(theirs) = run(h, &|c| Proc::haproxy(c, lo(h))) {
        assert_eq!(ours, theirs, "HAProxy 2.6 differs");
    }
}
