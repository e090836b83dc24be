//! The configuration texts of the bench: one HAProxy config (run by HAProxy and by portcullis),
//! the nginx proxy config (same listeners) and the nginx backend.

use std::net::SocketAddr;
use std::path::Path;

/// The listeners every target exposes (direct: the backend's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub http: u16,
    pub https: u16,
    pub echo: u16,
    pub iperf: u16,
    /// HTTP/2 with prior knowledge, to the backend's h2c port (`proto h2` servers).
    pub h2c: u16,
}

/// What the proxies forward to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upstreams {
    pub http: SocketAddr,
    pub echo: SocketAddr,
    pub iperf: SocketAddr,
    /// The backend's HTTP/2 prior-knowledge port.
    pub h2c: SocketAddr,
}

/// Connections every process accepts: the memory workload holds up to 10k client connections,
/// and a proxy may hold as many towards the backend. Bounded by the hard RLIMIT_NOFILE: HAProxy
/// refuses to start when it cannot get 2 × maxconn descriptors.
pub fn maxconn(hard_nofile: u64) -> u32 {
    (hard_nofile.saturating_sub(200) / 2).min(40_000) as u32
}

/// One thread, the five frontends, and timeouts long enough for idle keep-alive connections.
pub fn haproxy(p: Ports, up: Upstreams, bundle: &Path, maxconn: u32) -> String {
    format!(
        "global\n    nbthread 1\n    maxconn {maxconn}\n\n\
         defaults\n    mode http\n    maxconn {maxconn}\n    timeout connect 5s\n    \
         timeout client 60s\n    timeout server 60s\n    timeout http-keep-alive 60s\n\n\
         frontend http\n    bind 127.0.0.1:{}\n    default_backend app\n\n\
         frontend https\n    bind 127.0.0.1:{} ssl crt {} alpn h2,http/1.1\n    default_backend app\n\n\
         frontend echo\n    mode tcp\n    bind 127.0.0.1:{}\n    default_backend echo\n\n\
         frontend iperf\n    mode tcp\n    bind 127.0.0.1:{}\n    default_backend iperf\n\n\
         frontend h2c\n    bind 127.0.0.1:{} proto h2\n    default_backend app_h2\n\n\
         backend app\n    http-reuse always\n    server app1 {}\n\n\
         backend app_h2\n    http-reuse always\n    server app2 {} proto h2\n\n\
         backend echo\n    mode tcp\n    server echo1 {}\n\n\
         backend iperf\n    mode tcp\n    server iperf1 {}\n",
        p.http,
        p.https,
        bundle.display(),
        p.echo,
        p.iperf,
        p.h2c,
        up.http,
        up.h2c,
        up.echo,
        up.iperf
    )
}

/// `text` with `portcullis-relay <relay>` in its `defaults` (a portcullis extension: only the
/// relay-specific portcullis targets run it).
pub fn with_relay(text: &str, relay: &str) -> String {
    text.replacen(
        "defaults\n",
        &format!("defaults\n    portcullis-relay {relay}\n"),
        1,
    )
}

/// [`haproxy`]'s text with an admin socket that hands its listeners over (`-x`), for reloads;
/// HAProxy and portcullis read the same line.
pub fn with_admin_socket(cfg: &str, sock: &Path) -> String {
    let line = format!(
        "    stats socket {} level admin expose-fd listeners\n",
        sock.display()
    );
    match cfg.strip_prefix("global\n") {
        Some(rest) => format!("global\n{line}{rest}"),
        None => format!("global\n{line}\n{cfg}"),
    }
}

fn nginx_main(dir: &Path, name: &str, stream_module: Option<&Path>, maxconn: u32) -> String {
    let d = dir.display();
    let load = stream_module.map_or(String::new(), |m| format!("load_module {};\n", m.display()));
    format!(
        "{load}daemon off;\nmaster_process off;\nworker_processes 1;\nworker_rlimit_nofile {};\n\
         pid {d}/{name}.pid;\nerror_log {d}/{name}-error.log warn;\n\
         events {{ worker_connections {maxconn}; }}\n",
        maxconn * 2 + 100
    )
}

fn nginx_http_common(dir: &Path, name: &str) -> String {
    let d = dir.display();
    format!(
        "    access_log off;\n    keepalive_requests 100000000;\n    keepalive_timeout 120s;\n    \
         client_body_temp_path {d}/{name}-tmp-body;\n    proxy_temp_path {d}/{name}-tmp-proxy;\n    \
         fastcgi_temp_path {d}/{name}-tmp-fastcgi;\n    uwsgi_temp_path {d}/{name}-tmp-uwsgi;\n    \
         scgi_temp_path {d}/{name}-tmp-scgi;\n"
    )
}

/// The backend: `/` answers `ok`, `/16k` a 16 KiB file from `<dir>/www`; plain HTTP on
/// `http`, TLS (+h2) on `https` for the direct rows of the TLS workloads, and HTTP/2 with prior
/// knowledge on `h2c` for the `proto h2` servers.
pub fn nginx_backend(
    dir: &Path,
    (http, h2c): (SocketAddr, SocketAddr),
    https: SocketAddr,
    cert: &Path,
    key: &Path,
    maxconn: u32,
) -> String {
    format!(
        "{}http {{\n{}    server {{\n        listen {http};\n        listen {h2c} http2;\n        \
         listen {https} ssl http2;\n        \
         ssl_certificate {};\n        ssl_certificate_key {};\n        \
         ssl_protocols TLSv1.2 TLSv1.3;\n        root {}/www;\n        \
         location = / {{ return 200 \"ok\"; }}\n    }}\n}}\n",
        nginx_main(dir, "backend", None, maxconn),
        nginx_http_common(dir, "backend"),
        cert.display(),
        key.display(),
        dir.display()
    )
}

/// nginx as a proxy under test: the same four listeners as [`haproxy`]; the two TCP ones only
/// with the stream module.
pub fn nginx_proxy(
    dir: &Path,
    p: Ports,
    up: Upstreams,
    cert: &Path,
    key: &Path,
    stream_module: Option<&Path>,
    maxconn: u32,
) -> String {
    let stream = match stream_module {
        Some(_) => format!(
            "stream {{\n    server {{ listen 127.0.0.1:{}; proxy_pass {}; }}\n    \
             server {{ listen 127.0.0.1:{}; proxy_pass {}; }}\n}}\n",
            p.echo, up.echo, p.iperf, up.iperf
        ),
        None => String::new(),
    };
    format!(
        "{}http {{\n{}    upstream app {{ server {}; keepalive 256; }}\n    server {{\n        \
         listen 127.0.0.1:{};\n        listen 127.0.0.1:{} ssl http2;\n        \
         ssl_certificate {};\n        ssl_certificate_key {};\n        \
         ssl_protocols TLSv1.2 TLSv1.3;\n        location / {{\n            \
         proxy_pass http://app;\n            proxy_http_version 1.1;\n            \
         proxy_set_header Connection \"\";\n        }}\n    }}\n}}\n{stream}",
        nginx_main(dir, "proxy", stream_module, maxconn),
        nginx_http_common(dir, "proxy"),
        up.http,
        p.http,
        p.https,
        cert.display(),
        key.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Ports = Ports {
        http: 9001,
        https: 9002,
        echo: 9003,
        iperf: 9004,
        h2c: 9005,
    };

    fn up() -> Upstreams {
        Upstreams {
            http: "127.0.0.1:8001".parse().unwrap(),
            echo: "127.0.0.1:8003".parse().unwrap(),
            iperf: "127.0.0.1:8004".parse().unwrap(),
            h2c: "127.0.0.1:8005".parse().unwrap(),
        }
    }

    #[test]
    fn haproxy_config() {
        let c = haproxy(P, up(), Path::new("/b/bundle.pem"), 9900);
        assert!(c.starts_with("global\n    nbthread 1\n    maxconn 9900\n"));
        assert_eq!(maxconn(20_000), 9900);
        assert_eq!(maxconn(1 << 20), 40_000);
        assert_eq!(maxconn(100), 0);
        assert!(c.contains("    bind 127.0.0.1:9002 ssl crt /b/bundle.pem alpn h2,http/1.1\n"));
        assert!(c.contains("frontend echo\n    mode tcp\n    bind 127.0.0.1:9003\n"));
        assert!(c.contains("backend app\n    http-reuse always\n    server app1 127.0.0.1:8001\n"));
        assert!(c.ends_with("backend iperf\n    mode tcp\n    server iperf1 127.0.0.1:8004\n"));
        assert!(c.contains("frontend h2c\n    bind 127.0.0.1:9005 proto h2\n"));
        assert!(c.contains("    server app2 127.0.0.1:8005 proto h2\n"));
        let k = with_relay(&c, "kernel max-unacked 4g bulk-rate 0");
        assert!(k.contains(
            "\ndefaults\n    portcullis-relay kernel max-unacked 4g bulk-rate 0\n    mode http\n"
        ));
        assert_eq!(k.matches("portcullis-relay").count(), 1);
    }

    #[test]
    fn admin_socket_goes_into_global() {
        let c = haproxy(P, up(), Path::new("/b/bundle.pem"), 9900);
        let a = with_admin_socket(&c, Path::new("/w/haproxy.sock"));
        assert!(a.starts_with(
            "global\n    stats socket /w/haproxy.sock level admin expose-fd listeners\n    nbthread 1\n"
        ));
        assert_eq!(
            a.replace(
                "    stats socket /w/haproxy.sock level admin expose-fd listeners\n",
                ""
            ),
            c
        );
        assert_eq!(
            with_admin_socket("defaults\n", Path::new("/s")),
            "global\n    stats socket /s level admin expose-fd listeners\n\ndefaults\n"
        );
    }

    #[test]
    fn nginx_configs() {
        let d = Path::new("/w");
        let (c, k) = (Path::new("/w/c.pem"), Path::new("/w/k.pem"));
        let m = Path::new("/m/ngx_stream_module.so");
        let p = nginx_proxy(d, P, up(), c, k, Some(m), 9900);
        assert!(p.starts_with("load_module /m/ngx_stream_module.so;\ndaemon off;\nmaster_process off;\nworker_processes 1;\n"));
        assert!(p.contains("    upstream app { server 127.0.0.1:8001; keepalive 256; }\n"));
        assert!(p.contains("        listen 127.0.0.1:9002 ssl http2;\n"));
        assert!(p.contains("    server { listen 127.0.0.1:9004; proxy_pass 127.0.0.1:8004; }\n"));
        let p = nginx_proxy(d, P, up(), c, k, None, 9900);
        assert!(!p.contains("stream {"));
        assert!(!p.contains("load_module"));
        let b = nginx_backend(
            d,
            (
                "127.0.0.1:1".parse().unwrap(),
                "127.0.0.1:3".parse().unwrap(),
            ),
            "127.0.0.1:2".parse().unwrap(),
            c,
            k,
            9900,
        );
        assert!(b.contains("        listen 127.0.0.1:2 ssl http2;\n"));
        assert!(b.contains("        listen 127.0.0.1:3 http2;\n"));
        assert!(b.contains("        location = / { return 200 \"ok\"; }\n"));
        assert!(b.contains("worker_rlimit_nofile 19900;\n"));
        assert!(b.contains("worker_connections 9900;"));
    }
}
