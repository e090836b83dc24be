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
