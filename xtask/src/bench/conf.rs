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

/// A section of [`haproxy`]'s text: its header (`frontend h2c`, `defaults`) and its lines,
/// 1-based, from the header to the line before the next section.
struct Section<'a> {
    header: &'a str,
    lines: std::ops::RangeInclusive<usize>,
}

fn sections(cfg: &str) -> Vec<Section<'_>> {
    let mut out: Vec<Section> = Vec::new();
    for (i, line) in cfg.lines().enumerate() {
        let n = i + 1;
        if !line.is_empty() && !line.starts_with([' ', '\t', '#']) {
            out.push(Section {
                header: line.trim(),
                lines: n..=n,
            });
        } else if let Some(last) = out.last_mut() {
            last.lines = *last.lines.start()..=n;
        }
    }
    out
}

/// The `frontend`/`backend` sections an older portcullis build refused, each with the alert
/// that says why, from the log of its failed start on `cfg`: an `[ALERT]` with `parsing
/// [<file>:<line>]` names the line's section, one without names its proxy in quotes (`Proxy
/// 'h2c': …`); a frontend whose `default_backend` is refused goes with it. `None` when an alert
/// concerns `global`, `defaults` or no section: nothing of the config runs without it.
pub fn refused(cfg: &str, log: &str) -> Option<Vec<(String, String)>> {
    let secs = sections(cfg);
    let mut out: Vec<(String, String)> = Vec::new();
    fn add(out: &mut Vec<(String, String)>, header: &str, why: &str) {
        if !out.iter().any(|(h, _)| h == header) {
            out.push((header.to_string(), why.to_string()));
        }
    }
    for line in log.lines().filter(|l| l.starts_with("[ALERT]")) {
        let msg = line.split_once(" : config : ").map_or(line, |(_, m)| m);
        if msg.starts_with("Error(s) found in configuration file")
            || msg.starts_with("Fatal errors found")
        {
            continue;
        }
        let hit: Vec<&Section> = match msg.strip_prefix("parsing [") {
            Some(rest) => {
                let (at, _) = rest.split_once("] : ")?;
                let n: usize = at.rsplit_once(':')?.1.parse().ok()?;
                secs.iter().filter(|s| s.lines.contains(&n)).collect()
            }
            None => secs
                .iter()
                .filter(|s| {
                    s.header
                        .split_once(' ')
                        .is_some_and(|(_, name)| msg.contains(&format!("'{name}'")))
                })
                .collect(),
        };
        let why = msg.split_once("] : ").map_or(msg, |(_, w)| w);
        if hit.is_empty() {
            return None;
        }
        for s in hit {
            if !s.header.starts_with("frontend ") && !s.header.starts_with("backend ") {
                return None;
            }
            add(&mut out, s.header, why);
        }
    }
    let backends: Vec<(String, String)> = out
        .iter()
        .filter_map(|(h, why)| Some((h.strip_prefix("backend ")?.to_string(), why.clone())))
        .collect();
    for s in secs.iter().filter(|s| s.header.starts_with("frontend ")) {
        let uses = |b: &str| {
            cfg.lines()
                .skip(s.lines.start() - 1)
                .take(s.lines.clone().count())
                .any(|l| l.split_whitespace().eq(["default_backend", b]))
        };
        if let Some((b, why)) = backends.iter().find(|(b, _)| uses(b)) {
            add(&mut out, s.header, &format!("its backend {b}: {why}"));
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `cfg` without the sections whose headers are listed.
pub fn without(cfg: &str, headers: &[String]) -> String {
    let secs = sections(cfg);
    let gone = |n: usize| {
        secs.iter()
            .any(|s| s.lines.contains(&n) && headers.iter().any(|h| h == s.header))
    };
    let mut out = String::new();
    for (i, line) in cfg.lines().enumerate() {
        if !gone(i + 1) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
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
    fn an_older_build_runs_without_the_sections_it_refused() {
        let c = haproxy(P, up(), Path::new("/b/bundle.pem"), 9900);
        let line = |needle: &str| c.lines().position(|l| l.contains(needle)).unwrap() + 1;
        let (bind, server) = (line(":9005 proto h2"), line("server app2"));
        let log = format!(
            "[NOTICE]   (1) : haproxy version is 2.6\n\
             [ALERT]    (7) : config : parsing [/w/b.cfg:{bind}] : 'bind 127.0.0.1:9005' unknown keyword 'proto'.\n\
             [ALERT]    (7) : config : parsing [/w/b.cfg:{server}] : 'server app2' unknown keyword 'proto'.\n\
             [ALERT]    (7) : config : Error(s) found in configuration file : /w/b.cfg\n\
             [ALERT]    (7) : config : Fatal errors found in configuration.\n"
        );
        let r = refused(&c, &log).unwrap();
        assert_eq!(
            r,
            [
                (
                    "frontend h2c".to_string(),
                    "'bind 127.0.0.1:9005' unknown keyword 'proto'.".to_string()
                ),
                (
                    "backend app_h2".to_string(),
                    "'server app2' unknown keyword 'proto'.".to_string()
                ),
            ]
        );
        let t = without(&c, &r.iter().map(|(h, _)| h.clone()).collect::<Vec<_>>());
        assert!(
            !t.contains("h2c") && !t.contains("app_h2") && !t.contains("proto"),
            "{t}"
        );
        assert!(t.contains("alpn h2,http/1.1"));
        assert!(t.contains("frontend http\n    bind 127.0.0.1:9001\n    default_backend app\n\n"));
        assert!(t.ends_with("backend iperf\n    mode tcp\n    server iperf1 127.0.0.1:8004\n"));
        assert_eq!(without(&c, &[]), c);

        // Only the backend refused: its frontend goes too, saying why.
        let log = format!("[ALERT]    (7) : config : parsing [b.cfg:{server}] : bad 'proto'.\n");
        let r = refused(&c, &log).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[1],
            (
                "frontend h2c".to_string(),
                "its backend app_h2: bad 'proto'.".to_string()
            )
        );
        // A post-parse alert names its proxy.
        let log = "[ALERT]    (7) : config : Proxy 'h2c': MUX protocol 'h2' is not usable.\n";
        assert_eq!(refused(&c, log).unwrap()[0].0, "frontend h2c", "{log}");
        // An alert in global, defaults or about no section: nothing to run without.
        let global = format!(
            "[ALERT]    (7) : config : parsing [b.cfg:{}] : no.\n",
            line("nbthread")
        );
        assert_eq!(refused(&c, &global), None);
        let defaults = format!(
            "[ALERT]    (7) : config : parsing [b.cfg:{}] : no.\n",
            line("timeout client")
        );
        assert_eq!(refused(&c, &defaults), None);
        assert_eq!(
            refused(&c, "[ALERT]    (7) : config : out of memory.\n"),
            None
        );
        // No alert at all (it crashed, or timed out): nothing to drop.
        assert_eq!(refused(&c, "Segmentation fault\n"), None);
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
