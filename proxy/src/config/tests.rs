//! Parser tests: sections, inheritance, ids, typed values, and the diagnostics of broken lines.

use super::model::*;
use super::*;

// `http::h1`'s corpus test loads this file too; it is a few std-only lines.
#[allow(clippy::duplicate_mod)]
#[path = "../../../tests/support/shared.rs"]
mod shared;
use std::time::Duration;

fn no_env(_: &str) -> Option<String> {
    None
}

fn stat_fake(p: &str) -> Result<(), String> {
    if p.starts_with("/certs/") {
        Ok(())
    } else {
        Err("No such file or directory".into())
    }
}

fn resolve_fake(h: &str) -> Option<std::net::IpAddr> {
    (h == "localhost").then(|| "127.0.0.1".parse().unwrap())
}

fn ids_fake(kind: Id, name: &str) -> Option<u32> {
    match (kind, name) {
        (Id::User, "haproxy") => Some(99),
        (Id::Group, "haproxy") => Some(98),
        _ => None,
    }
}

fn read_fake(p: &str) -> Result<Vec<u8>, String> {
    match p {
        "/errors/503.http" => Ok(b"HTTP/1.0 503 Service Unavailable\r\nCache-Control: no-cache\r\nConnection: close\r\nContent-Type: text/html\r\n\r\n<html><body><h1>503</h1></body></html>\n".to_vec()),
        "/errors/bad.http" => Ok(b"HTTP/1.0 503 Oops\r\nContent-Length: 3\r\n\r\nabcd".to_vec()),
        _ => Err("No such file or directory".into()),
    }
}

fn parse_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, Vec<Diag>> {
    let sys = Sys {
        env,
        stat: &stat_fake,
        resolve: &resolve_fake,
        ids: &ids_fake,
        read: &read_fake,
        localpeer: "lb1",
        localpeer_cmdline: false,
    };
    parse_sources(&[("t.cfg".to_string(), text.to_string())], &sys)
}

fn ok(text: &str) -> Config {
    match parse_env(text, &no_env) {
        Ok(l) => l.config,
        Err(d) => panic!("unexpected errors: {d:#?}"),
    }
}

/// The alert messages as `line: msg`.
fn alerts(text: &str) -> Vec<String> {
    match parse_env(text, &no_env) {
        Ok(_) => panic!("expected errors for:\n{text}"),
        Err(d) => d
            .iter()
            .filter(|d| d.is_alert())
            .map(|d| format!("{}: {}", d.line, d.msg))
            .collect(),
    }
}

const T: &str = "defaults\n timeout client 1s\n timeout server 1s\n timeout connect 1s\n";

fn seed(name: &str) -> String {
    std::fs::read_to_string(shared::shared_path(&format!("configs/{name}"))).unwrap()
}

#[test]
fn seed_loopback_parses() {
    let env = |k: &str| match k {
        "CERT" => Some("/certs/lb.pem".to_string()),
        "RUNDIR" => Some("/tmp".to_string()),
        _ => None,
    };
    let l = parse_env(&seed("seed-loopback.cfg"), &env).unwrap();
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    let c = l.config;
    assert_eq!(c.global.maxconn, Some(4000));
    let s = &c.global.stats_sockets[0];
    assert_eq!(s.addr, BindAddr::Unix("/tmp/admin.sock".into()));
    assert_eq!(
        (s.mode, s.level, s.expose_fd_listeners),
        (Some(0o600), CliLevel::Admin, true)
    );
    assert_eq!(c.global.stats_timeout, Some(Duration::from_secs(30)));
    assert_eq!(
        c.global.ssl_default_bind_options,
        SslOptions {
            min_ver: Some(TlsVersion::Tls12),
            max_ver: None,
            no_tls_tickets: true,
            ..Default::default()
        }
    );
    let names: Vec<_> = c.proxies.iter().map(|p| (p.name.as_str(), p.id)).collect();
    assert_eq!(
        names,
        [
            ("http-redirect", 2),
            ("istio-https-l7", 3),
            ("istio-http-backend", 4),
            ("kube-apiserver", 5),
            ("kube-apiserver", 6),
            ("istio-grpc-passthrough", 7),
            ("istio-grpc-backend", 8),
            ("stats", 9)
        ]
    );
    let redirect = &c.proxies[0];
    assert_eq!(redirect.mode, Mode::Http);
    assert_eq!(
        redirect.binds[0].addr,
        BindAddr::Inet("127.0.0.1:10080".parse().unwrap())
    );
    assert_eq!(
        redirect.http_request[0].action,
        HttpRequestAction::Redirect {
            kind: RedirectKind::Scheme,
            value: "https".into(),
            code: 301,
            drop_query: false,
            append_slash: false
        }
    );
    // defaults inherited
    assert_eq!(redirect.timeouts.client, Some(Duration::from_secs(3600)));
    assert_eq!(
        redirect.timeouts.http_request,
        Some(Duration::from_secs(10))
    );
    assert_eq!(redirect.timeouts.queue, Some(Duration::from_secs(60)));
    assert_eq!(redirect.retries, 3);
    assert!(redirect.options.dontlognull);
    assert_eq!(
        redirect.logs,
        [LogTarget::Stdout {
            stderr: false,
            format: LogFormatKind::Raw,
            facility: Facility(16),
            level: None,
            sample: None,
        }]
    );

    let l7 = &c.proxies[1];
    let ssl = l7.binds[0].ssl.as_ref().unwrap();
    assert_eq!(ssl.crts, ["/certs/lb.pem"]);
    assert_eq!(ssl.alpn, ["h2", "http/1.1"]);
    assert_eq!(ssl.ciphers.as_deref(), Some("ECDHE+AESGCM:ECDHE+CHACHA20"));
    assert_eq!(ssl.options.min_ver, Some(TlsVersion::Tls12));
    assert!(ssl.options.no_tls_tickets);
    assert!(l7.options.httplog);
    assert_eq!(
        l7.options.forwardfor.as_ref().unwrap().header,
        "X-Forwarded-For"
    );
    assert_eq!(l7.http_request.len(), 3);
    assert_eq!(
        l7.http_request[2].action,
        HttpRequestAction::SetHeader {
            name: "X-Forwarded-Host".into(),
            value: "%[req.hdr(Host)]".into()
        }
    );
    assert_eq!(l7.default_backend.as_ref().unwrap().0, "istio-http-backend");

    let be = &c.proxies[2];
    assert_eq!(be.balance, Balance::Roundrobin);
    let chk = be.options.httpchk.as_ref().unwrap();
    assert_eq!(
        (
            chk.send.method.as_str(),
            chk.send.uri.as_str(),
            chk.send.version.as_str()
        ),
        ("GET", "/health_check.html", "HTTP/1.0")
    );
    assert_eq!(
        chk.expects().next().cloned(),
        Some(HttpCheckExpect {
            negate: false,
            matcher: ExpectMatch::Status(vec![(200, 200)])
        })
    );
    assert_eq!(be.http_check, *chk);
    let ids: Vec<_> = be.servers.iter().map(|s| (s.name.as_str(), s.id)).collect();
    assert_eq!(ids, [("master1", 1), ("worker1", 2), ("worker2", 3)]);
    let s = &be.servers[1];
    assert_eq!(s.addr, "127.0.1.13:30080".parse().unwrap());
    assert!(s.opts.check && s.opts.on_marked_down_shutdown_sessions);
    assert_eq!(s.opts.check_port, Some(30180));
    assert_eq!(s.opts.inter, Duration::from_secs(2));
    assert_eq!((s.opts.rise, s.opts.fall, s.opts.weight), (2, 2, 1));
    // Checks run now: nothing of this backend is left pending.
    assert!(be.pending.is_empty(), "{:?}", be.pending);

    let api = &c.proxies[4];
    assert!(api.cap.backend && !api.cap.frontend && api.options.tcp_check);
    assert_eq!(api.servers[0].opts.inter, Duration::from_secs(3));
    assert_eq!(api.servers[0].opts.fall, 3);

    let stats = c.proxies[7].stats.as_ref().unwrap();
    assert!(stats.enable && stats.hide_version);
    assert_eq!(stats.uri.as_deref(), Some("/"));
    assert_eq!(stats.refresh, Some(Duration::from_secs(10)));
    // The admin socket and the stats page run now: nothing is pending.
    assert!(c.global.pending.is_empty(), "{:?}", c.global.pending);
    assert!(
        c.proxies[7].pending.is_empty(),
        "{:?}",
        c.proxies[7].pending
    );
}

#[test]
fn seed_homelab_fails_only_on_the_certificate() {
    let text = seed("seed-homelab.cfg");
    let d = parse_env(&text, &no_env).unwrap_err();
    let a: Vec<_> = d.iter().filter(|d| d.is_alert()).collect();
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0].line, 31);
    assert!(
        a[0].msg.contains(
            "unable to stat SSL certificate from file '/etc/haproxy/certs/homelab-lb-bundle.pem' : No such file or directory"
        ),
        "{}",
        a[0].msg
    );
    let fixed = text.replace("/etc/haproxy/certs/homelab-lb-bundle.pem", "/certs/b.pem");
    let c = parse_env(&fixed, &no_env).unwrap().config;
    assert_eq!(c.proxies.len(), 8);
    assert_eq!(
        c.proxies[0].binds[0].addr,
        BindAddr::Inet("0.0.0.0:80".parse().unwrap())
    );
    assert_eq!(
        c.global.logs,
        [LogTarget::Unix {
            path: "/dev/log".into(),
            format: LogFormatKind::Local,
            facility: Facility(16),
            level: None,
            sample: None,
        }]
    );
    assert_eq!(
        c.proxies[2].servers[0].addr,
        "203.0.113.212:30080".parse().unwrap()
    );
}

#[test]
fn defaults_inheritance() {
    let c = ok(
        "defaults base\n mode http\n timeout client 7s\n timeout server 1s\n timeout connect 1s\n\
         defaults tcpd\n timeout client 2s\n timeout server 1s\n timeout connect 1s\n\
         defaults child from base\n retries 9\n\
         frontend a from base\n bind :1\n\
         frontend b\n bind :2\n\
         backend c from child\n",
    );
    assert_eq!(c.proxies[0].mode, Mode::Http);
    assert_eq!(c.proxies[0].timeouts.client, Some(Duration::from_secs(7)));
    // the last defaults section (named or not) applies without `from`
    assert_eq!(c.proxies[1].mode, Mode::Http, "child inherits base");
    assert_eq!(c.proxies[1].retries, 9);
    assert_eq!(c.proxies[2].mode, Mode::Http);
    assert_eq!(c.proxies[2].retries, 9);
    let c = ok(
        "defaults\n mode http\n timeout client 1s\ndefaults\n timeout client 2s\nfrontend f\n bind :1\n",
    );
    assert_eq!(
        c.proxies[0].mode,
        Mode::Tcp,
        "a new defaults section resets"
    );
    assert_eq!(c.proxies[0].timeouts.client, Some(Duration::from_secs(2)));
    assert_eq!(
        alerts("defaults a\nfrontend f from nope\n bind :1\n"),
        ["2: defaults section 'nope' not found for frontend 'f'."]
    );
}

#[test]
fn proxy_and_server_ids() {
    let c = ok(&format!(
        "{T}frontend a\n bind :1\nbackend b\n id 3\n server x 1.1.1.1:80\n server y 1.1.1.2:80 id 1\n server z 1.1.1.3:80\nbackend c\n"
    ));
    let ids: Vec<_> = c.proxies.iter().map(|p| p.id).collect();
    assert_eq!(ids, [1, 3, 2]);
    let sids: Vec<_> = c.proxies[1].servers.iter().map(|s| s.id).collect();
    assert_eq!(sids, [2, 1, 3]);
    let c = ok(&format!(
        "global\n stats socket /tmp/x.sock\n{T}frontend a\n bind :1\n"
    ));
    assert_eq!(c.proxies[0].id, 2, "GLOBAL consumes the first id");
}

#[test]
fn default_server_and_options() {
    let c = ok(&format!(
        "{T}backend b\n default-server inter 5s fall 5 weight 10\n server s 1.1.1.1:80 weight 20 backup maxconn 10 maxqueue 5 fastinter 1s downinter 1m addr 10.0.0.9 ssl verify none sni req.hdr(host) ca-file /x check-ssl disabled on-marked-up shutdown-backup-sessions\n server t localhost\n"
    ));
    let s = &c.proxies[0].servers;
    assert_eq!(s[0].opts.weight, 20);
    assert_eq!(s[0].opts.fall, 5);
    assert_eq!(s[0].opts.inter, Duration::from_secs(5));
    assert_eq!(s[0].opts.fastinter, Some(Duration::from_secs(1)));
    assert_eq!(s[0].opts.downinter, Some(Duration::from_secs(60)));
    assert_eq!(s[0].opts.check_addr, Some("10.0.0.9".parse().unwrap()));
    assert!(s[0].opts.backup && s[0].opts.ssl && s[0].opts.verify_none && s[0].opts.disabled);
    assert!(s[0].opts.check_ssl && s[0].opts.on_marked_up_shutdown_backup_sessions);
    assert_eq!((s[0].opts.maxconn, s[0].opts.maxqueue), (Some(10), Some(5)));
    assert_eq!(s[1].opts.weight, 10);
    assert_eq!(s[1].addr, "127.0.0.1:0".parse().unwrap());
}

#[test]
fn options_and_rules() {
    let c = ok(&format!(
        "{T}frontend f\n mode http\n bind :80 name web maxconn 100\n option forwardfor except 10.0.0.0/8 header X-Real-IP if-none\n option httplog clf\n no option dontlognull\n option http-server-close\n option socket-stats\n option idle-close-on-response\n\
         acl is_api path_beg /api\n use_backend b if is_api\n default_backend b\n\
         http-request deny deny_status 429 if {{ src 1.2.3.4 }}\n http-request return status 404 content-type text/plain string nope unless is_api\n http-request del-header X-Foo\n http-request add-header X-A b\n http-request allow\n http-request redirect location /x code 308 drop-query append-slash\n\
         tcp-request inspect-delay 5s\n tcp-request content accept if is_api\n tcp-request connection reject\n\
         log 127.0.0.1:1514 format rfc5424 local3 info debug\n log-format \"%ci %b\"\n\
         backend b\n mode http\n option redispatch 2\n option allbackups\n option httpchk\n http-check send meth HEAD uri /h ver HTTP/1.1 hdr Host x body hi\n http-check expect ! rstatus ^5\n http-check disable-on-404\n http-reuse always\n balance leastconn\n timeout check 3s\n\
         server s 1.1.1.1:80\n"
    ));
    let f = &c.proxies[0];
    assert_eq!(f.binds[0].name.as_deref(), Some("web"));
    assert_eq!(f.binds[0].maxconn, Some(100));
    assert_eq!(
        f.options.forwardfor,
        Some(ForwardFor {
            except: Some(("10.0.0.0".parse().unwrap(), 8)),
            header: "X-Real-IP".into(),
            if_none: true
        })
    );
    assert!(f.options.httplog_clf && !f.options.dontlognull && f.options.http_server_close);
    assert!(f.options.idle_close_on_response);
    assert_eq!(f.acls[0].tokens, ["path_beg", "/api"]);
    assert_eq!(f.use_backends[0].cond.as_ref().unwrap().tokens, ["is_api"]);
    assert_eq!(
        f.http_request[0].action,
        HttpRequestAction::Deny { status: 429 }
    );
    assert_eq!(
        f.http_request[0].cond.as_ref().unwrap().tokens,
        ["{", "src", "1.2.3.4", "}"]
    );
    assert_eq!(
        f.http_request[1].action,
        HttpRequestAction::Return {
            status: 404,
            content_type: Some("text/plain".into()),
            body: Some("nope".into()),
            body_lf: false,
            headers: Vec::new(),
        }
    );
    assert!(f.http_request[1].cond.as_ref().unwrap().unless);
    assert_eq!(f.http_request.len(), 6);
    assert_eq!(f.tcp_inspect_delay, Some(Duration::from_secs(5)));
    assert_eq!(f.tcp_request.len(), 2);
    assert_eq!(f.tcp_request[1].at, super::model::TcpAt::Connection);
    assert_eq!(
        f.logs[0],
        LogTarget::Udp {
            addr: "127.0.0.1:1514".parse().unwrap(),
            format: LogFormatKind::Rfc5424,
            facility: Facility(19),
            level: Some(Level(6)),
            sample: None,
        }
    );
    assert_eq!(f.log_format.as_ref().unwrap().0, "%ci %b");
    let b = &c.proxies[1];
    assert_eq!(b.options.redispatch, Some(Redispatch { interval: 2 }));
    let hc = b.options.httpchk.as_ref().unwrap();
    assert_eq!(hc.send.method, "HEAD");
    assert_eq!(hc.send.headers, [("Host".to_string(), "x".to_string())]);
    assert_eq!(hc.send.body.as_deref(), Some("hi"));
    assert!(hc.disable_on_404 && hc.expects().next().unwrap().negate);
    assert_eq!(b.http_reuse, HttpReuse::Always);
    assert_eq!(b.balance, Balance::Leastconn);
    assert_eq!(b.timeouts.check, Some(Duration::from_secs(3)));
}

#[test]
fn tcp_checks_and_global() {
    let c = ok(&format!(
        "global\n nbthread 4\n daemon\n pidfile /run/p.pid\n hard-stop-after 30s\n maxconn 500\n ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256\n log stderr local7 err\n\
         {T}backend b\n option tcp-check\n tcp-check connect port 8080\n tcp-check send PING\\r\\n\n tcp-check expect string +PONG\n server s 1.1.1.1:80\n\
         listen l\n bind ipv4@127.0.0.1:9000,fd@4 ssl crt /certs/a crt /certs/b alpn h2 ssl-max-ver TLSv1.3 ciphers X curves P-256\n log global\n"
    ));
    let g = &c.global;
    assert_eq!(
        (g.nbthread, g.daemon, g.maxconn),
        (Some(4), true, Some(500))
    );
    assert_eq!(g.pidfile.as_deref(), Some("/run/p.pid"));
    assert_eq!(g.hard_stop_after, Some(Duration::from_secs(30)));
    let b = &c.proxies[0];
    assert_eq!(
        b.tcp_checks,
        [
            TcpCheckRule::Connect { port: Some(8080) },
            TcpCheckRule::Send(b"PING\r\n".to_vec()),
            TcpCheckRule::Expect {
                negate: false,
                matcher: ExpectMatch::String("+PONG".into()),
                min_recv: None,
            }
        ]
    );
    let l = &c.proxies[1];
    assert_eq!(l.binds.len(), 2);
    assert_eq!(l.binds[1].addr, BindAddr::Fd(4));
    let ssl = l.binds[0].ssl.as_ref().unwrap();
    assert_eq!(ssl.crts, ["/certs/a", "/certs/b"]);
    assert_eq!(ssl.ciphers.as_deref(), Some("X"));
    assert_eq!(ssl.ciphersuites.as_deref(), Some("TLS_AES_128_GCM_SHA256"));
    assert_eq!(ssl.options.max_ver, Some(TlsVersion::Tls13));
    assert_eq!(l.logs, g.logs);
    assert!(l.pending.is_empty(), "{:?}", l.pending);
}

#[test]
fn lexer_errors_are_reported_with_context() {
    assert_eq!(
        alerts("global\n  \"unterminated\n"),
        ["2: unmatched quote at position 3:\n  \"unterminated\n  ^"]
    );
}

#[test]
fn keyword_errors() {
    let a = alerts(&format!(
        "foo bar\nglobal\n frob\n nbthread x\n{T} mode htt\nfrontend f\n bindd :80\n bind :99999\n server s 1.1.1.1:80\n timeout client 5x\nbackend b\n bind :81\n default_backend x\n server s 1.1.1.1:80 rise 0\n server s 1.1.1.1:80\n server t 1.1.1.1:80 weight 300\n frobnicate\n"
    ));
    assert_eq!(
        a,
        [
            "1: unknown keyword 'foo' out of section.",
            "3: unknown keyword 'frob' in 'global' section",
            "4: 'nbthread' passed a missing or unparsable integer value in 'x'",
            "9: unknown proxy mode 'htt'.",
            "11: unknown keyword 'bindd' in 'frontend' section; did you mean 'bind' maybe ?",
            "12: 'bind' : invalid port '99999'",
            "13: [t.cfg:13] : parsing [t.cfg:13] : 'server' not allowed because frontend 'f' has no backend capability.",
            "14: unexpected character 'x' in 'timeout client'",
            "18: 'server b/s' : 'rise' has to be > 0.",
            "20: 'server b/t' : weight of server t is not within 0 and 256 (300).",
            "21: unknown keyword 'frobnicate' in 'backend' section",
            // Kept (with a warning) and checked, as HAProxy does once the parse succeeds.
            "17: Proxy 'b': unable to find required default_backend: 'x'.",
        ]
    );
}

#[test]
fn whole_config_errors() {
    let a = alerts(&format!(
        "{T}frontend f\n mode http\n bind 127.0.0.1:80\n default_backend nope\n use_backend t if TRUE\nfrontend f\n bind *:80\nbackend t\n mode tcp\nbackend b\n server s 1.1.1.1:80\n server s 1.1.1.2:80\n"
    ));
    assert_eq!(
        a,
        [
            "10: frontend 'f' has the same name as frontend 'f' declared at t.cfg:5.",
            "16: backend 'b', another server named 's' was already defined at line 15, please use distinct names.",
            "8: Proxy 'f': unable to find required default_backend: 'nope'.",
            "9: http frontend 'f' (t.cfg:5) tries to use incompatible tcp backend 't' (t.cfg:12) as its backend (see 'mode').",
        ]
    );
}

#[test]
fn sections_without_names_and_misplaced_defaults() {
    assert_eq!(
        alerts("frontend\n bind :80\nlisten l x\n"),
        [
            "1: 'frontend' expects an <id> argument",
            "3: please use the 'bind' keyword for listening addresses."
        ]
    );
    assert_eq!(
        alerts("defaults\n server s 1.1.1.1:80\n bind :80\n use_backend x\n acl a b\n"),
        [
            "2: 'server' not allowed in 'defaults' section.",
            "3: 'bind' not allowed in 'defaults' section.",
            "4: 'use_backend' not allowed in 'defaults' section.",
            "5: 'acl' not allowed in anonymous 'defaults' section."
        ]
    );
}

#[test]
fn warnings_do_not_fail() {
    let l = parse_env(
        "frontend f\n bind :80\n timeout server 1s\nbackend b\n option idle-close-on-response\n",
        &no_env,
    )
    .unwrap();
    let w: Vec<_> = l
        .warnings
        .iter()
        .map(|d| d.msg.lines().next().unwrap().to_string())
        .collect();
    assert_eq!(
        w,
        [
            "'timeout server' will be ignored because frontend 'f' has no backend capability",
            // HAProxy 2.6 names the option without the keyword.
            "'idle-close-on-response' ignored because backend 'b' has no frontend capability.",
            "missing timeouts for frontend 'f'.",
            "missing timeouts for backend 'b'."
        ]
    );
}

#[test]
fn truncated_lines_never_panic() {
    let env = |k: &str| (k == "CERT").then(|| "/certs/x".to_string());
    let text = seed("seed-loopback.cfg")
        + "listen x\n bind :1 ssl crt /certs/a alpn h2 name n\n option forwardfor except 1.2.3.0/24 header X if-none\n http-request return status 200 content-type t string s if a\n tcp-check expect ! rstring x\n";
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        for (cut, _) in line.char_indices() {
            let mut v = lines.clone();
            v[i] = &line[..cut];
            let _ = parse_env(&v.join("\n"), &env);
            v[i] = &line[cut..];
            let _ = parse_env(&v.join("\n"), &env);
        }
    }
}

#[test]
fn stats_socket_forms_and_no_option() {
    let c = ok(&format!(
        "global\n stats socket ipv4@127.0.0.1:9999 level operator\n stats socket unix@/tmp/s.sock mode 0660 level user user haproxy\n{T}frontend f\n bind :1\n option tcplog\n no option tcplog\n option httpclose\n option http-keep-alive\n"
    ));
    let s = &c.global.stats_sockets;
    assert_eq!(s[0].addr, BindAddr::Inet("127.0.0.1:9999".parse().unwrap()));
    assert_eq!(s[0].level, CliLevel::Operator);
    assert_eq!((s[1].mode, s[1].level), (Some(0o660), CliLevel::User));
    let o = &c.proxies[0].options;
    assert!(!o.tcplog && !o.httpclose && o.http_keep_alive);
    assert_eq!(
        alerts("frontend f\n no bind :1\n no option frob\n option httplog x\n"),
        [
            "2: negation/default currently supported only for options and log.",
            "3: negation/default is not supported for option 'frob'.",
            "4: keyword 'httplog' only supports option 'clf'."
        ]
    );
}

#[test]
fn use_service_prometheus_and_stats_admin() {
    let text = "defaults\n mode http\nfrontend f\n bind :1\n http-request use-service prometheus-exporter if { path /metrics }\n stats admin if TRUE\n";
    let c = parse_env(text, &no_env).unwrap().config;
    let f = &c.proxies[0];
    assert_eq!(f.http_request[0].action, HttpRequestAction::UsePrometheus);
    assert!(f.http_request[0].cond.is_some());
    // The page's POST actions are served: nothing left pending.
    assert!(f.pending.is_empty(), "{:?}", f.pending);
    assert!(f.stats.as_ref().is_some_and(|s| s.admin.is_some()));
    for (rule, msg) in [
        ("use-service foo", "'foo' unknown service name.."),
        ("use-service", "'use-service' expects a service name.."),
        (
            "use-service prometheus-exporter bar",
            "'http-request use-service' expects either 'if' or 'unless' followed by a condition but found 'bar'.",
        ),
    ] {
        let text = format!("defaults\n mode http\nfrontend f\n bind :1\n http-request {rule}\n");
        let d = parse_env(&text, &no_env).unwrap_err();
        assert!(d.iter().any(|d| d.msg.ends_with(msg)), "{rule}: {d:?}");
    }
}

#[test]
fn portcullis_relay_extension() {
    let cfg = ok(&format!(
        "{T} portcullis-relay userspace\nfrontend f\n bind :80\n default_backend b\nbackend b\n portcullis-relay kernel max-unacked 1m bulk-rate 0\n server s 127.0.0.1:80\nlisten l\n bind :81\n server s 127.0.0.1:80\nlisten m\n bind :82\n portcullis-relay auto\n server s 127.0.0.1:80\n"
    ));
    let relay = |name: &str| {
        cfg.proxies
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.relay)
            .unwrap()
    };
    assert_eq!(
        relay("f"),
        crate::config::model::Relay {
            engine: Some(crate::config::model::RelayEngine::Userspace),
            max_unacked: None,
            bulk_rate: None,
        }
    );
    assert_eq!(
        relay("b"),
        crate::config::model::Relay {
            engine: Some(crate::config::model::RelayEngine::Kernel),
            max_unacked: Some(1 << 20),
            bulk_rate: Some(0),
        }
    );
    assert_eq!(
        relay("l").engine,
        Some(crate::config::model::RelayEngine::Userspace),
        "inherited from defaults"
    );
    assert_eq!(
        relay("m").engine,
        Some(crate::config::model::RelayEngine::Auto)
    );
    let a = alerts(&format!(
        "{T}frontend f\n bind :80\n portcullis-relay kern\n portcullis-relay kernel max-unacked 1k\n portcullis-relay kernel max-unacked x\n portcullis-relay kernel foo\n portcullis-relay kernel bulk-rate fast\n"
    ));
    assert_eq!(
        a,
        [
            "7: 'portcullis-relay' expects 'auto', 'kernel' or 'userspace' (got 'kern').",
            "8: 'portcullis-relay' : 'max-unacked' must be at least 256k (got '1k').",
            "9: 'portcullis-relay' : 'max-unacked' expects a size (got 'x').",
            "10: 'portcullis-relay' : unknown argument 'foo' (expects 'max-unacked <size>' or 'bulk-rate <size>').",
            "11: 'portcullis-relay' : 'bulk-rate' expects a size per second, or 0 (got 'fast').",
        ]
    );
}

/// `stick-table` and `track-sc` errors, as HAProxy 2.6's `-c` words them.
#[test]
fn stick_table_errors() {
    let fe = |lines: &str| alerts(&format!("{T}frontend f\n mode http\n bind :80\n{lines}"));
    assert_eq!(
        fe(" stick-table type foo size 100k\n"),
        ["8: stick-table: unknown type 'foo'."]
    );
    assert_eq!(
        fe(" stick-table type ip\n"),
        ["8: stick-table: missing size."]
    );
    assert_eq!(
        fe(" stick-table size 10\n"),
        ["8: stick-table: missing type."]
    );
    assert_eq!(
        fe(" stick-table type ip size x\n"),
        ["8: stick-table: unexpected character 'x' in argument of 'size'."]
    );
    assert_eq!(
        fe(" stick-table type ip size 10 expire x\n"),
        ["8: stick-table: unexpected character 'x' in argument of 'expire'."]
    );
    assert_eq!(
        fe(" stick-table type ip size 10 store foo\n"),
        ["8: stick-table: unknown store option 'foo'."]
    );
    assert_eq!(
        fe(" stick-table type ip size 10 store conn_rate\n"),
        ["8: stick-table: missing argument to store option 'conn_rate'."]
    );
    assert_eq!(
        fe(" stick-table type ip size 10 store conn_rate(x)\n"),
        ["8: stick-table: error when processing store option 'conn_rate'."]
    );
    assert_eq!(
        fe(" stick-table type ip size 10 store conn_cur(1s)\n"),
        ["8: stick-table: unexpected argument to store option 'conn_cur'."]
    );
    assert_eq!(
        fe(" stick-table type ip size 10 bogus\n"),
        ["8: stick-table: unknown argument 'bogus'."]
    );
    assert_eq!(
        fe(" stick-table type ip size 10\n stick-table type ip size 20\n"),
        ["9: stick-table name 'f' conflicts with table declared in frontend 'f' at t.cfg:8."]
    );
    assert_eq!(
        fe(" http-request track-sc3 src\n"),
        [
            "8: error detected in frontend 'f' while parsing 'http-request track-sc3' rule : 3 track-sc number exceeding 2 (MAX_SESS_STKCTR-1) value."
        ]
    );
    assert_eq!(
        fe(" http-request track-sc0\n"),
        [
            "8: error detected in frontend 'f' while parsing 'http-request track-sc0' rule : missing fetch method."
        ]
    );
    assert_eq!(
        fe(" tcp-request connection track-sc0 hdr(host)\n"),
        [
            "8: 'tcp-request connection track-sc0' : fetch method 'hdr(host)' extracts information from 'HTTP request headers,HTTP response headers', none of which is available here"
        ]
    );
    assert_eq!(
        fe(" tcp-request connection track-sc0 src tablex f\n"),
        [
            "8: 'tcp-request connection track-sc0' only accepts 'if' or 'unless', in frontend 'f' (got 'tablex')"
        ]
    );
    assert_eq!(
        alerts(&format!("{T} stick-table type ip size 10\n")),
        ["5: 'stick-table' is not supported in 'defaults' section."]
    );
    let c = ok(&format!(
        "{T}frontend f\n mode http\n bind :80\n stick-table type ipv6 size 1m expire 30s store http_req_rate(10s),conn_cur,conn_rate(10s)\n http-request track-sc0 src table f if {{ path /x }}\n tcp-request connection track-sc1 src\n"
    ));
    let f = &c.proxies[0];
    let t = f.stick_table.as_ref().unwrap();
    assert_eq!((t.key, t.size), (StickKey::Ipv6, 1 << 20));
    assert_eq!(t.expire, Some(std::time::Duration::from_secs(30)));
    let s10 = std::time::Duration::from_secs(10);
    assert_eq!(
        t.store,
        [
            StickStore::ConnRate(s10),
            StickStore::ConnCur,
            StickStore::HttpReqRate(s10)
        ]
    );
    assert_eq!(
        f.http_request[0].action,
        HttpRequestAction::TrackSc(TrackSc {
            sc: 0,
            key: "src".into(),
            table: Some("f".into())
        })
    );
    assert!(f.http_request[0].cond.is_some());
    assert_eq!(
        f.tcp_request[0].action,
        TcpRequestAction::TrackSc(TrackSc {
            sc: 1,
            key: "src".into(),
            table: None
        })
    );
    assert!(
        f.pending.iter().all(|(k, _)| k == "tcp-request connection"),
        "{:?}",
        f.pending
    );
}

#[test]
fn splice_keywords() {
    let cfg = ok(&format!(
        "global\n nosplice\n{T}frontend f\n bind :80\n option splice-auto\n no option splice-response\n option splice-request\n default_backend b\nbackend b\n no option splice-auto\n server s 127.0.0.1:80\nlisten l\n bind :81\n no option splice-request\n option splice-auto\n server s 127.0.0.1:80\n"
    ));
    assert!(cfg.global.nosplice);
    let opts = |name: &str| {
        let o = &cfg.proxies.iter().find(|p| p.name == name).unwrap().options;
        (o.no_splice_request, o.no_splice_response)
    };
    assert_eq!(opts("f"), (false, true));
    assert_eq!(opts("b"), (true, true));
    assert_eq!(opts("l"), (false, false), "the last line wins");
    assert!(!ok(T).global.nosplice);
    // HAProxy 2.6's words.
    assert_eq!(
        alerts(&format!(
            "global\n nosplice x\n{T}frontend f\n bind :80\n option splice-auto x\n"
        )),
        [
            "2: 'nosplice' cannot handle unexpected argument 'x'.",
            "9: 'option splice-auto' cannot handle unexpected argument 'x'."
        ]
    );
}

// --- `.if` / `.elif` / `.else` / `.endif` and the message directives ---

fn parse_home(text: &str) -> Result<Loaded, Vec<Diag>> {
    parse_env(text, &|k: &str| (k == "HOME").then(|| "/root".to_string()))
}

#[test]
fn conditional_blocks_keep_only_the_taken_branch() {
    let text = format!(
        "{T}.if defined(HOME)\nfrontend a\n bind :1\n.elif 1\nfrontend b\n bind :2\n.else\nfrontend c\n bind :3\n.endif\n\
         .if defined(NOPE)\nfrontend d\n bind :4\n.elif streq(x,x)\n.if 0\nfrontend e\n bind :5\n.else\nfrontend f\n bind :6\n.endif\n.else\nfrontend g\n bind :7\n.endif\n"
    );
    let l = parse_home(&text).expect("parses");
    let names: Vec<&str> = l.config.proxies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a", "f"]);
}

#[test]
fn masked_blocks_are_not_evaluated_nor_parsed() {
    // A bad keyword and a bad condition inside a false block are never looked at.
    let text = format!(
        "{T}.if 0\n nonsense here\n.if bad(\n.endif\n.alert \"never\"\n.foo\n.endif\nfrontend a\n bind :1\n"
    );
    assert!(parse_home(&text).is_ok());
}

#[test]
fn directives_report_like_haproxy() {
    let l = parse_home(&format!(
        "{T}.notice \"hello\"\n.warning w\n.diag d\nfrontend a\n bind :1\n"
    ))
    .expect("parses");
    let shown: Vec<String> = l.warnings.iter().map(|d| d.render(1)).collect();
    assert_eq!(
        shown,
        [
            "[NOTICE]   (1) : config : parsing [t.cfg:5]: 'hello'.",
            "[WARNING]  (1) : config : parsing [t.cfg:6]: 'w'."
        ]
    );
    let e = parse_home(&format!("{T}.alert \"stop here\"\nfrontend a\n bind zz\n")).unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        e[0].render(1),
        "[ALERT]    (1) : config : parsing [t.cfg:5]: 'stop here'."
    );
    assert!(e[0].abort);
    let e = parse_home(".warning two words\n").unwrap_err();
    assert_eq!(
        e[0].msg,
        "Unexpected argument 'words' for '.warning'. Use quotes if the message should contain spaces."
    );
}

#[test]
fn condition_errors_point_at_the_bad_character() {
    let e = parse_home("global\n.if defined(HOME) && bad(1)\n.endif\n").unwrap_err();
    assert_eq!(
        e[0].render(7),
        "[ALERT]    (7) : config : parsing [t.cfg:2]: unparsable conditional expression 'bad(1)' in '.if' at position 18:\n  .if defined(HOME) && bad(1)\n                       ^"
    );
    let e = parse_home(".if 0\n.elif streq(a)\n.endif\n").unwrap_err();
    assert_eq!(
        e[0].render(7),
        "[ALERT]    (7) : config : parsing [t.cfg:2]: missing arguments (got 1/2), type 'string' expected in argument 1 of predicate 'streq' used in conditional expression in '.elif' at position 8:\n  .elif streq(a)\n               ^"
    );
}

#[test]
fn block_structure_errors() {
    let cases: &[(&str, &str)] = &[
        (".else\n", "1: lone '.else' with no matching '.if'."),
        (".elif 1\n", "1: lone '.elif' with no matching '.if'."),
        (".endif\n", "1: lone '.endif' with no matching '.if'."),
        (
            ".if 1\n.else\n.else\n.endif\n",
            "3: '.else' after '.else' is not permitted.",
        ),
        (
            ".if 1\n.else\n.elif 1\n.endif\n",
            "3: '.elif' after '.else' is not permitted.",
        ),
        (
            ".if 1\n.endif x\n",
            "2: Unexpected argument 'x' for '.endif'.",
        ),
        (".if 1\nglobal\n", "2: non-terminated '.if' block."),
        (".foo\n", "1: unknown directive '.foo'."),
    ];
    for (text, want) in cases {
        assert_eq!(
            alerts(text).first().map(String::as_str),
            Some(*want),
            "{text}"
        );
    }
    let deep = ".if 1\n".repeat(120);
    assert_eq!(alerts(&deep)[0], "100: too many nested '.if', max is 100.");
}

/// As HAProxy's reg-test checks/http-check-send: a proxy's own `option httpchk` or `http-check`
/// line drops the check rules inherited from `defaults`; `http-check send hdr` replaces the
/// headers smuggled in `option httpchk`'s version.
#[test]
fn own_check_rules_drop_the_inherited_ones() {
    let c = ok(
        "defaults\n mode http\n option httpchk GET /status HTTP/1.1\\r\\nHdr:\\ must-be-removed\n http-check send hdr Host my-www-host hdr X-test true body test\n\
         backend be3\n option httpchk\n server s 127.0.0.1:1 check\n\
         backend be4\n server s 127.0.0.1:1 check\n\
         backend be5\n http-check send hdr Host other-www-host body other\n server s 127.0.0.1:1 check\n",
    );
    let send = |name: &str| {
        let p = c.proxies.iter().find(|p| p.name == name).unwrap();
        p.options.httpchk.as_ref().unwrap().send.clone()
    };
    let be3 = send("be3");
    assert_eq!(
        (be3.method.as_str(), be3.uri.as_str(), be3.version.as_str()),
        ("OPTIONS", "/", "HTTP/1.0")
    );
    assert!(be3.headers.is_empty() && be3.body.is_none());
    let be4 = send("be4");
    assert_eq!(
        (be4.method.as_str(), be4.uri.as_str(), be4.version.as_str()),
        ("GET", "/status", "HTTP/1.1")
    );
    assert_eq!(
        be4.headers,
        [
            ("Host".to_string(), "my-www-host".to_string()),
            ("X-test".to_string(), "true".to_string())
        ]
    );
    assert_eq!(be4.body.as_deref(), Some("test"));
    let be5 = send("be5");
    assert_eq!(
        (be5.method.as_str(), be5.uri.as_str(), be5.version.as_str()),
        ("OPTIONS", "/", "HTTP/1.0")
    );
    assert_eq!(
        be5.headers,
        [("Host".to_string(), "other-www-host".to_string())]
    );
    assert_eq!(be5.body.as_deref(), Some("other"));
}

#[test]
fn shared_inet_binds_are_accepted_like_haproxy() {
    // SO_REUSEPORT: the same address twice, and a wildcard beside a specific address.
    let c = ok(&format!(
        "{T}frontend a\n bind 127.0.0.1:80\nfrontend b\n bind 127.0.0.1:80\n bind *:80\n"
    ));
    assert_eq!(c.proxies[1].binds.len(), 2);
    let a = alerts(&format!(
        "{T}frontend a\n bind /tmp/x.sock\nfrontend b\n bind /tmp/x.sock\n"
    ));
    assert_eq!(
        a,
        ["8: 'bind /tmp/x.sock' : address already used by frontend 'a' at t.cfg:6."]
    );
}

/// `log … sample 1,3:5` (reg-test log/load_balancing): messages 1 and 3 of every 5.
#[test]
fn log_sample_ranges() {
    let c =
        ok("defaults\n mode http\nfrontend f\n bind :80\n log 127.0.0.1:514 sample 1,3:5 local0\n");
    let Some(LogTarget::Udp {
        sample: Some(smp), ..
    }) = c.proxies[0].logs.first()
    else {
        panic!("{:?}", c.proxies[0].logs)
    };
    let sent: Vec<bool> = (0..10).map(|_| smp.take()).collect();
    assert_eq!(
        sent,
        [
            true, false, true, false, false, true, false, true, false, false
        ]
    );
    assert_eq!(
        alerts("frontend f\n bind :80\n log 127.0.0.1:514 sample 1,7:5 local0\n"),
        ["3: log : sample range '7' is beyond the sample size (5)"]
    );
    assert_eq!(
        alerts("frontend f\n bind :80\n log 127.0.0.1:514 sample 2-4 local0\n"),
        ["3: log : invalid sample '2-4' (expects <ranges>:<sample size>)"]
    );
}

/// reg-test checks/tcp-check_min-recv: `!rstring`, `min-recv`, and `comment` on either side.
#[test]
fn tcp_check_expect_options() {
    let c = ok(
        "backend b\n option tcp-check\n tcp-check expect !rstring \"^error\" comment \"negative check\"\n tcp-check expect min-recv 5 !rstring ^error comment x\n tcp-check expect comment y string valid\n server s 127.0.0.1:1 check\n",
    );
    assert_eq!(
        c.proxies[0].tcp_checks,
        [
            TcpCheckRule::Expect {
                negate: true,
                matcher: ExpectMatch::Rstring("^error".into()),
                min_recv: None,
            },
            TcpCheckRule::Expect {
                negate: true,
                matcher: ExpectMatch::Rstring("^error".into()),
                min_recv: Some(5),
            },
            TcpCheckRule::Expect {
                negate: false,
                matcher: ExpectMatch::String("valid".into()),
                min_recv: None,
            },
        ]
    );
    assert_eq!(
        alerts("backend b\n tcp-check expect min-recv x string a\n"),
        ["2: 'tcp-check expect' : 'min-recv' expects a integer as argument (got 'x')."]
    );
    assert_eq!(
        alerts("backend b\n tcp-check expect string a extra\n"),
        ["2: 'tcp-check expect' : cannot handle unexpected argument 'extra'."]
    );
}

#[test]
fn process_keywords_are_recorded() {
    let l = parse_env(
        &format!(
            "global\n user haproxy\n group haproxy\n chroot /var/lib/haproxy\n ulimit-n 4096\n set-dumpable\n\
             log-tag lb\n node n1\n description my lb\n ca-base /ca\n crt-base /certs\n cpu-map 1 0\n\
             unix-bind mode 600\n{T}frontend f\n bind :1\n bind /tmp/u.sock\n"
        ),
        &no_env,
    )
    .expect("parses");
    let p = &l.config.global.process;
    assert_eq!((p.uid, p.gid), (Some(99), Some(98)));
    assert_eq!(p.chroot.as_deref(), Some("/var/lib/haproxy"));
    assert_eq!(p.ulimit_n, Some(4096));
    assert!(p.set_dumpable);
    assert_eq!(p.log_tag.as_deref(), Some("lb"));
    assert_eq!(p.node.as_deref(), Some("n1"));
    assert_eq!(p.description.as_deref(), Some("my lb"));
    assert_eq!(p.ca_base.as_deref(), Some("/ca"));
    // cpu-map has no effect, and says so; unix-bind with a UNIX bind is pending.
    assert!(l.warnings.iter().any(|w| w.msg.contains("'cpu-map'")));
    assert_eq!(
        l.config
            .global
            .pending
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>(),
        ["unix-bind (with a UNIX bind)"]
    );
}

#[test]
fn errorfiles_resolve_from_http_errors_sections() {
    let l = parse_env(
        &format!(
            "{T}errorfile 503 /errors/503.http\nhttp-errors site\n errorfile 503 /errors/503.http\nfrontend f\n bind :1\n errorfiles site\n errorloc303 502 /oops\nbackend b\n errorfiles site 404\nbackend c\n errorfiles nope\n"
        ),
        &no_env,
    );
    let e = l.unwrap_err();
    assert!(
        e.iter()
            .any(|d| d.msg == "proxy 'c': unknown http-errors section 'nope' (at t.cfg:15)."),
        "{e:#?}"
    );
    let l = parse_env(
        &format!(
            "{T}errorfile 503 /errors/503.http\nhttp-errors site\n errorfile 503 /errors/503.http\nfrontend f\n bind :1\n errorfiles site\n errorloc303 502 /oops\nbackend b\n errorfiles site 404\n"
        ),
        &no_env,
    )
    .expect("parses");
    let f = &l.config.proxies[0].extra;
    assert!(
        f.error_page(503)
            .is_some_and(|p| p.starts_with(b"HTTP/1.0 503"))
    );
    assert_eq!(
        f.error_page(502),
        Some(&b"HTTP/1.1 303 See Other\r\nCache-Control: no-cache\r\nContent-length: 0\r\nLocation: /oops\r\n\r\n"[..])
    );
    // A status the section lacks is a warning, as in HAProxy.
    assert!(
        l.warnings
            .iter()
            .any(|w| w.msg.contains("status '404' not declared"))
    );
    let e = alerts(&format!(
        "{T}frontend f\n bind :1\n errorfile 503 /errors/bad.http\n errorfile 418 /errors/503.http\n errorfile 503 /none\n"
    ));
    assert_eq!(
        e,
        [
            "7: errorfile : '/errors/bad.http': payload size does not match the announced content-length (4 != 3)",
            "8: errorfile : status code '418' not handled.",
            "9: errorfile : error opening file '/none'."
        ]
    );
}

/// As HAProxy (reg-test checks/tls_health_checks): server `addr` takes `<ip>:<port>`; that port
/// is the check's unless `port` names one, before or after it.
#[test]
fn server_addr_with_port() {
    let c = ok(
        "backend b\n server a 127.0.0.1:80 check addr 127.0.0.2:8080\n \
         server b 127.0.0.1:80 check addr 127.0.0.2:80 port 9000\n \
         server c 127.0.0.1:80 check port 9000 addr [::1]:80\n",
    );
    let s = &c.proxies[0].servers;
    let got: Vec<_> = s
        .iter()
        .map(|s| (s.opts.check_addr.map(|a| a.to_string()), s.opts.check_port))
        .collect();
    assert_eq!(
        got,
        [
            (Some("127.0.0.2".into()), Some(8080)),
            (Some("127.0.0.2".into()), Some(9000)),
            (Some("::1".into()), Some(9000)),
        ]
    );
    assert_eq!(
        alerts("backend b\n server a 127.0.0.1:80 addr 127.0.0.1:x\n"),
        ["2: 'server b/a' : 'addr' : invalid address: '127.0.0.1:x' in '127.0.0.1:x'."]
    );
}

/// `http-check` rules in HAProxy 2.6's order and words (captured with `haproxy -c`).
#[test]
fn http_check_rule_errors() {
    assert_eq!(
        alerts(
            "backend b\n mode http\n option httpchk\n http-check send meth GET\n http-check send meth GET\n \
             http-check expect hdr name\n http-check expect hdr foo x\n \
             http-check set-var(check.x) nosuchfetch\n \
             http-check connect port 80 ssl sni x alpn h2 linger proto h1 comment c\n \
             http-check connect bogus\n http-check bogus\n server s 127.0.0.1:1 check\n\
             backend c\n option httpchk\n http-check send meth GET\n http-check connect\n server s 127.0.0.1:1 check\n\
             backend d\n option httpchk\n http-check connect\n http-check send meth GET\n http-check connect\n server s 127.0.0.1:1 check\n"
        ),
        [
            "5: 'http-check send' : unable to add http-check send rule at step 2 (missing connect rule)..",
            "6: 'http-check expect' : 'hdr' expects at the name keyword as first argument followed by a pattern.",
            "7: 'http-check expect' : 'hdr' expects at the name keyword as first argument followed by a pattern.",
            "8: 'http-check set-var(check.x)' : 'set-var' : unknown fetch method 'nosuchfetch'.",
            "10: 'http-check connect' : expects 'comment', 'port', 'addr', 'send-proxy', 'ssl', 'sni', 'alpn' or 'via-socks4', 'linger', 'default' but got 'bogus' as argument..",
            "11: 'http-check' only supports 'disable-on-404', 'send-state', 'comment', 'connect', 'send', 'expect', 'set-var-fmt(*)', 'set-var(*)', 'unset-var(*)'. but got 'bogus'",
            "16: 'http-check connect' : first step MUST also be a 'connect', optionally preceded by a 'set-var', an 'unset-var' or a 'comment', when there is a 'connect' step in the tcp-check ruleset.",
            "22: 'http-check connect' : unable to add http-check connect rule at step 2 (missing expect rule)..",
        ]
    );
    let c = ok(
        "backend b\n option httpchk GET /a\n http-check connect\n http-check send hdr x y\n \
         http-check expect status 200\n http-check connect port 81\n http-check send uri /b\n server s 127.0.0.1:1 check\n",
    );
    let hc = c.proxies[0].options.httpchk.as_ref().unwrap();
    // The first send merges into `option httpchk`'s request.
    assert_eq!(
        (hc.send.method.as_str(), hc.send.uri.as_str()),
        ("GET", "/a")
    );
    assert_eq!(hc.send.headers, [("x".to_string(), "y".to_string())]);
    assert_eq!(hc.rules.len(), 5);
}

/// `slowstart` keeps whole seconds, rounded up (HAProxy's `(ms + 999) / 1000`); `maxqueue` is
/// refused only where streams would queue on a server (`balance source`).
#[test]
fn slowstart_and_maxqueue() {
    let c = ok(
        "backend b\n server a 127.0.0.1:1 slowstart 1500ms maxqueue 5\n server z 127.0.0.1:2 slowstart 0\n",
    );
    let b = &c.proxies[0];
    assert_eq!(b.servers[0].opts.slowstart, Some(Duration::from_secs(2)));
    assert_eq!(b.servers[1].opts.slowstart, None);
    assert!(b.pending.is_empty(), "{:?}", b.pending);
    let c = ok("backend b\n balance source\n server a 127.0.0.1:1 maxqueue 5\n");
    let pending: Vec<_> = c.proxies[0]
        .pending
        .iter()
        .map(|(k, l)| (k.as_str(), l.line))
        .collect();
    assert_eq!(pending, [("server maxqueue (with balance source)", 3)]);
}

#[test]
fn http_response_rules_and_haproxy_errors() {
    let text = "defaults\n mode http\nfrontend f\n bind :1\n http-response set-status 418 reason Teapot if TRUE\n http-response deny\n http-response set-header X-A b\n";
    let c = parse_env(text, &no_env).unwrap().config;
    let f = &c.proxies[0];
    assert_eq!(
        f.http_response[0].action,
        HttpRequestAction::SetStatus {
            status: 418,
            reason: Some("Teapot".into())
        }
    );
    // A response is denied with a 502 unless told otherwise.
    assert_eq!(
        f.http_response[1].action,
        HttpRequestAction::Deny { status: 502 }
    );
    assert_eq!(f.http_response.len(), 3);
    assert!(f.http_request.is_empty());
    // HAProxy 2.6's words (haproxy -c).
    for (rule, msg) in [
        (
            "set-status abc",
            "while parsing 'http-response set-status' rule : expects an integer status code between 100 and 999.",
        ),
        (
            "set-status 200 reason",
            "'http-response set-status' expects either 'if' or 'unless' followed by a condition but found 'reason'.",
        ),
        (
            "deny deny_status 600",
            "while parsing 'http-response deny' rule : Unexpected status code '600'.",
        ),
        ("set-path /x", "but got 'set-path'."),
    ] {
        let text = format!("defaults\n mode http\nfrontend f\n bind :1\n http-response {rule}\n");
        let d = parse_env(&text, &no_env).unwrap_err();
        assert!(d.iter().any(|d| d.msg.ends_with(msg)), "{rule}: {d:?}");
    }
}

#[test]
fn variables_and_haproxy_errors() {
    use crate::ana::vars::{Scope, SetCond, VarName};
    let text = "defaults\n mode http\nfrontend f\n bind :1\n http-request set-var(txn.a,ifnotset,ifgt) req.hdr(x),lower if TRUE\n http-request set-var-fmt(sess.b) %[src]:x\n http-request unset-var(req.c)\n http-response set-var(res.d) status\n";
    let c = parse_env(text, &no_env).unwrap().config;
    let f = &c.proxies[0];
    let v = |scope, name: &str| VarName {
        scope,
        name: name.into(),
    };
    assert_eq!(
        f.http_request[0].action,
        HttpRequestAction::SetVar {
            var: v(Scope::Txn, "a"),
            conds: vec![SetCond::IfNotSet, SetCond::IfGt],
            expr: "req.hdr(x),lower".into(),
            fmt: false,
        }
    );
    assert!(f.http_request[0].cond.is_some());
    assert_eq!(
        f.http_request[1].action,
        HttpRequestAction::SetVar {
            var: v(Scope::Sess, "b"),
            conds: vec![],
            expr: "%[src]:x".into(),
            fmt: true,
        }
    );
    assert_eq!(
        f.http_request[2].action,
        HttpRequestAction::UnsetVar {
            var: v(Scope::Req, "c")
        }
    );
    assert_eq!(f.http_response.len(), 1);
    // HAProxy 2.6's words (haproxy -c).
    for (rule, msg) in [
        (
            "set-var(foo.a) str(x)",
            "error detected in frontend 'f' while parsing 'http-request set-var(foo.a)' rule : invalid variable name 'foo.a'. A variable name must be start by its scope. The scope can be 'proc', 'sess', 'txn', 'req', 'res' or 'check'.",
        ),
        (
            "set-var(txn.a)",
            "while parsing 'http-request set-var(txn.a)' rule : missing fetch method.",
        ),
        (
            "set-var(txn.a str(x)",
            "while parsing 'http-request set-var(txn.a' rule : incomplete argument after action 'set-var(txn.a'. Expects 'set-var(<var-name>)', 'set-var-fmt(<var-name>)' or 'unset-var(<var-name>)'.",
        ),
        (
            "set-var(txn.a) foo",
            "while parsing 'http-request set-var(txn.a)' rule : unknown fetch method 'foo'.",
        ),
        (
            "set-var(txn.a,bogus) str(x)",
            "while parsing 'http-request set-var(txn.a,bogus)' rule : unknown condition \"bogus\".",
        ),
        (
            "unset-var(txn.a) str(x)",
            "'http-request unset-var(txn.a)' expects either 'if' or 'unless' followed by a condition but found 'str(x)'.",
        ),
        (
            "unset-var(txn.a,ifexists)",
            "rule : unset-var does not expect parameters after the variable name. Only \"set-var\" and \"set-var-fmt\" manage conditions.",
        ),
        (
            "set-var(txn.a-b) str(x)",
            "while parsing 'http-request set-var(txn.a-b)' rule : invalid syntax at char '-b)'.",
        ),
        (
            "set-var(txn.) str(x)",
            "rule : invalid variable name 'txn.'. A variable name must be start by its scope. The scope can be 'proc', 'sess', 'txn', 'req', 'res' or 'check'.",
        ),
    ] {
        let text = format!("defaults\n mode http\nfrontend f\n bind :1\n http-request {rule}\n");
        let d = parse_env(&text, &no_env).unwrap_err();
        assert!(d.iter().any(|d| d.msg.ends_with(msg)), "{rule}: {d:?}");
    }
    // An empty `set-var-fmt` is accepted, as HAProxy does.
    let text = "defaults\n mode http\nfrontend f\n bind :1\n http-request set-var-fmt(txn.a)\n";
    assert!(parse_env(text, &no_env).is_ok());
}

#[test]
fn userlists_auth_and_haproxy_errors() {
    let text = "userlist L\n group G users a\n user a password $6$pcsalt$O4DNtRiikDeMQqlJ3SzHRaz8l3m0uqLj7U.awNJ1hRPwa9YgjNXIQq1Tuq.0glp02e0L.HEJTauv1UbmoPeN90\n user b insecure-password p groups G\ndefaults\n mode http\nfrontend f\n bind :1\n http-request auth realm R if !{ http_auth(L) }\n http-request auth\n";
    let c = parse_env(text, &no_env).unwrap().config;
    assert_eq!(c.userlists.len(), 1);
    assert_eq!(c.userlists[0].users.len(), 2);
    assert!(c.userlists[0].users[1].insecure);
    assert_eq!(c.userlists[0].users[1].groups, vec!["G".to_string()]);
    assert_eq!(
        c.proxies[0].http_request[0].action,
        HttpRequestAction::Auth {
            realm: Some("R".into())
        }
    );
    assert_eq!(
        c.proxies[0].http_request[1].action,
        HttpRequestAction::Auth { realm: None }
    );
    // HAProxy 2.6's words (haproxy -c).
    for (cfg, msg) in [
        ("userlist\n", "'userlist' expects <name> as arguments."),
        (
            "userlist L\n bogus\n",
            "unknown keyword 'bogus' in 'users' section",
        ),
        (
            "userlist L\n user a bogus\n",
            "'user' only supports 'password', 'insecure-password' and 'groups' options.",
        ),
        (
            "userlist L\n group G bogus\n",
            "'group' only supports 'users' option.",
        ),
        (
            "userlist L\n group G users a,zz\n user a insecure-password p\n",
            "userlist 'L': no such user 'zz' specified in group 'G'",
        ),
        (
            "userlist L\n user a insecure-password p groups X\n",
            "userlist 'L': no such group 'X' specified in user 'a'",
        ),
        (
            "userlist L\n user a password $9$x$\n",
            "the encrypted password used for user 'a' is not supported by crypt(3).",
        ),
        (
            "defaults\n mode http\nfrontend f\n bind :1\n http-request auth realm\n",
            "while parsing 'http-request auth' rule : missing realm value.",
        ),
        (
            "defaults\n mode http\nfrontend f\n bind :1\n http-request auth bogus\n",
            "'http-request auth' expects either 'if' or 'unless' followed by a condition but found 'bogus'.",
        ),
        (
            "defaults\n mode http\nfrontend f\n bind :1\n http-request deny if !{ http_auth(NOPE) }\n",
            "parsing [t.cfg:5]: unable to find userlist 'NOPE' referenced in arg 1 of ACL keyword 'http_auth' in proxy 'f'.",
        ),
        (
            "defaults\n mode http\nfrontend f\n bind :1\n acl x http_auth\n http-request deny if x\n",
            "missing userlist name in arg 1 of ACL keyword 'http_auth' in proxy 'f'.",
        ),
        (
            "userlist L\n user a insecure-password p\ndefaults\n mode http\nfrontend f\n bind :1\n acl ok http_auth_group(L) G\n http-request auth unless ok\n",
            "proxy f: acl ok http_auth_group(): invalid group 'G'.",
        ),
    ] {
        let res = parse_env(cfg, &no_env);
        let diags = match &res {
            Ok(p) => p.warnings.clone(),
            Err(d) => d.clone(),
        };
        let found = diags.iter().any(|d| d.msg.ends_with(msg));
        let rules_err = res
            .ok()
            .map(|p| {
                crate::ana::rules::compile(&p.config)
                    .err()
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        let found = found || rules_err.iter().any(|d| d.msg.ends_with(msg));
        assert!(found, "{cfg}: {diags:?} {rules_err:?}");
    }
}

#[test]
fn program_sections_and_haproxy_errors() {
    let text = "program api\n command sleep 10\n no option start-on-reload\nprogram b\n command sh -c 'exit 0'\n user nobody\n";
    let c = parse_env(text, &no_env).unwrap().config;
    assert_eq!(c.programs.len(), 2);
    assert_eq!(c.programs[0].command, vec!["sleep", "10"]);
    assert!(!c.programs[0].start_on_reload);
    assert_eq!(c.programs[1].command, vec!["sh", "-c", "exit 0"]);
    assert!(c.programs[1].start_on_reload);
    assert_eq!(c.programs[1].user.as_deref(), Some("nobody"));
    // Programs need a master; a program needs a command (post-parse, in HAProxy's words).
    let errs = super::kw_program::check(&c.programs, false);
    assert_eq!(
        errs[0].msg,
        "Can't use a 'program' section without master worker mode."
    );
    assert!(super::kw_program::check(&c.programs, true).is_empty());
    let c = parse_env("program x\n", &no_env).unwrap().config;
    assert_eq!(
        super::kw_program::check(&c.programs, true)[0].msg,
        "The program section 'x' lacks a command to launch."
    );
    // HAProxy 2.6's words (haproxy -W -c).
    for (cfg, msg) in [
        ("program\n", "1] : 'program' expects an <id> argument"),
        (
            "program a b\n",
            "1] : 'program' cannot handle unexpected argument 'b'.",
        ),
        (
            "program a\n command\n",
            "2]: 'command' expects a command with optional arguments separated in words.",
        ),
        (
            "program a\n option\n",
            "2]: 'option' expects an option name.",
        ),
        ("program a\n option foo\n", "2] : unknown option 'foo'."),
        (
            "program a\n option start-on-reload x\n",
            "2] : 'option start-on-reload' cannot handle unexpected argument 'x'.",
        ),
        ("program a\n user\n", "2]: 'user' expects a user name."),
        (
            "program a\n user nosuchuser\n",
            "2] : cannot find user id for 'nosuchuser' (0:Success)",
        ),
        (
            "program a\n user nobody\n user root\n",
            "3] : user/uid already specified. Continuing.",
        ),
        (
            "program a\n bogus\n",
            "2] : unknown keyword 'bogus' in 'program' section",
        ),
        (
            "program a\n command x\nprogram a\n",
            "3]: 'a' program section already exists in the configuration.",
        ),
    ] {
        let d = parse_env(cfg, &no_env).unwrap_err();
        let shown: Vec<String> = d.iter().map(|d| d.render(1)).collect();
        assert!(shown.iter().any(|m| m.ends_with(msg)), "{cfg}: {shown:?}");
    }
}

#[test]
fn resolvers_server_templates_init_addr_and_haproxy_errors() {
    let text = "resolvers r\n nameserver a 127.0.0.1:53\n hold valid 30s\n accepted_payload_size 8192\n timeout resolve 2s\n resolve_retries 5\ndefaults\n mode http\nbackend b\n server-template s 3 foo.invalid:80 resolvers r init-addr none resolve-prefer ipv4 resolve-opts allow-dup-ip\n server x 10.0.0.1:81\n server y foo.invalid:82 init-addr 10.0.0.9\n";
    let c = parse_env(text, &no_env).unwrap().config;
    let r = &c.resolvers[0];
    assert_eq!(
        r.nameservers,
        vec![("a".to_string(), "127.0.0.1:53".parse().unwrap())]
    );
    assert_eq!(r.hold_valid, Duration::from_secs(30));
    assert_eq!(r.accepted_payload_size, 8192);
    assert_eq!(r.timeout_resolve, Duration::from_secs(2));
    assert_eq!(r.resolve_retries, 5);
    let b = &c.proxies[0];
    let names: Vec<&str> = b.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s1", "s2", "s3", "x", "y"]);
    assert!(b.servers[0].unresolved);
    assert_eq!(b.servers[0].fqdn.as_deref(), Some("foo.invalid"));
    assert_eq!(b.servers[0].addr.port(), 80);
    assert!(b.servers[0].opts.resolve.prefer_ipv4 && b.servers[0].opts.resolve.allow_dup_ip);
    assert!(!b.servers[3].unresolved && b.servers[3].fqdn.is_none());
    assert_eq!(b.servers[4].addr, "10.0.0.9:82".parse().unwrap());
    // HAProxy 2.6's words (haproxy -c).
    let d = "defaults\n mode http\n";
    for (cfg, msg) in [
        (
            format!(
                "resolvers r\n nameserver a 127.0.0.1:53\n{d}backend b\n server s foo.invalid:80 resolvers nope\n"
            ),
            "config : backend 'b', server 's': unable to find required resolvers 'nope'",
        ),
        (
            format!("{d}backend b\n server s foo.invalid:80\n"),
            "config : [t.cfg:4] : 'server b/s' : could not resolve address 'foo.invalid'.",
        ),
        (
            format!("{d}backend b\n server s foo.invalid:80\n"),
            "config : Failed to initialize server(s) addr.",
        ),
        (
            format!("{d}backend b\n server s foo.invalid:80 init-addr bogus\n"),
            "config : [t.cfg:4] : 'server b/s' : 'init-addr' : unknown init-addr method 'bogus', supported methods are 'libc', 'last', 'none'..",
        ),
        (
            format!("{d}backend b\n server s 1.2.3.4:80 resolve-prefer ipv5\n"),
            "[t.cfg:4] : 'server b/s' : 'resolve-prefer' expects either ipv4 or ipv6 as argument..",
        ),
        (
            format!("{d}backend b\n server s 1.2.3.4:80 resolve-net 1.2.3.0/33\n"),
            "[t.cfg:4] : 'server b/s' : 'resolve-net' invalid network '1.2.3.0/33'..",
        ),
        (
            format!("{d}backend b\n server s 1.2.3.4:80 resolve-opts bogus\n"),
            "'resolve-opts' : unknown resolve-opts option 'bogus', supported methods are 'allow-dup-ip', 'ignore-weight', and 'prevent-dup-ip'..",
        ),
        (
            format!("{d}backend b\n server-template s 0 foo.invalid:80\n"),
            "config : [t.cfg:4] : Wrong server-template number or range arg '0'.",
        ),
        (
            format!("{d}backend b\n server-template s 2-1 foo.invalid:80\n"),
            "[t.cfg:4] : Wrong server-template number or range arg '2-1'.",
        ),
        (
            format!("{d}backend b\n server-template s 3\n"),
            "[t.cfg:4] : 'server-template' expects <prefix> <nb | range> <addr>[:<port>] as arguments.",
        ),
        (
            "resolvers\n".to_string(),
            "parsing [t.cfg:1] : missing name for resolvers section.",
        ),
        (
            "resolvers r\n nameserver a\n".to_string(),
            "parsing [t.cfg:2] : 'nameserver' expects <name> and <addr>[:<port>] as arguments.",
        ),
        (
            "resolvers r\n nameserver a nope.invalid:53\n".to_string(),
            "parsing [t.cfg:2] : 'nameserver a' : invalid address: 'nope.invalid' in 'nope.invalid:53'",
        ),
        (
            "resolvers r\n nameserver a 127.0.0.1\n".to_string(),
            "parsing [t.cfg:2] : 'nameserver a' : missing port specification in '127.0.0.1'",
        ),
        (
            "resolvers r\n hold bogus 1s\n".to_string(),
            "parsing [t.cfg:2] : 'hold' unknown <event>: 'bogus', expects either 'nx', 'timeout', 'valid', 'obsolete' or 'other'.",
        ),
        (
            "resolvers r\n timeout bogus 1s\n".to_string(),
            "parsing [t.cfg:2] : 'timeout' expects 'retry' or 'resolve' and <time> as arguments got 'bogus'.",
        ),
        (
            "resolvers r\n accepted_payload_size 1\n".to_string(),
            "parsing [t.cfg:2] : 'accepted_payload_size' must be between 12 and 65535 inclusive (was 1).",
        ),
        (
            "resolvers r\n bogus\n".to_string(),
            "parsing [t.cfg:2] : unknown keyword 'bogus' in 'resolvers' section",
        ),
    ] {
        let res = parse_env(&cfg, &no_env);
        let diags = match &res {
            Ok(p) => p.warnings.clone(),
            Err(d) => d.clone(),
        };
        let shown: Vec<String> = diags.iter().map(|d| d.render(1)).collect();
        assert!(shown.iter().any(|m| m.ends_with(msg)), "{cfg}: {shown:?}");
    }
    // A name that does not resolve under `resolvers`: a warning, and the server waits.
    let text = format!(
        "resolvers r\n nameserver a 127.0.0.1:53\n{d}backend b\n server s foo.invalid:80 resolvers r\n"
    );
    let l = parse_env(&text, &no_env).unwrap();
    assert!(l.config.proxies[0].servers[0].unresolved);
    let w: Vec<String> = l.warnings.iter().map(|d| d.render(1)).collect();
    assert!(
        w.iter().any(|m| m.ends_with("config : [t.cfg:6] : 'server b/s' : could not resolve address 'foo.invalid', disabling server.")),
        "{w:?}"
    );
}

/// The PROXY protocol keywords: `accept-proxy`, the server options and `expect-proxy layer4`,
/// with HAProxy 2.6's errors (captured with `haproxy -c`).
#[test]
fn proxy_protocol_keywords() {
    use super::model::SendProxy;
    let c = ok(
        "frontend f\n bind 127.0.0.1:1 accept-proxy\n bind 127.0.0.1:2\n \
         tcp-request connection expect-proxy layer4 if { src 10.0.0.0/8 }\n default_backend b\n\
         backend b\n default-server send-proxy\n server a 127.0.0.1:80\n \
         server b 127.0.0.1:80 no-send-proxy send-proxy-v2-ssl-cn proxy-v2-options crc32c,cert-key\n \
         server c 127.0.0.1:80 no-send-proxy proxy-v2-options authority check-send-proxy\n",
    );
    let f = &c.proxies[0];
    assert_eq!(
        f.binds.iter().map(|b| b.accept_proxy).collect::<Vec<_>>(),
        [true, false]
    );
    assert_eq!(
        f.tcp_request[0].action,
        super::model::TcpRequestAction::ExpectProxy
    );
    let s = &c.proxies[1].servers;
    assert_eq!(
        s[0].opts.send_proxy,
        SendProxy {
            v1: true,
            ..SendProxy::default()
        }
    );
    assert_eq!(
        s[1].opts.send_proxy,
        SendProxy {
            v2: true,
            ssl: true,
            cert_cn: true,
            cert_key: true,
            crc32c: true,
            ..SendProxy::default()
        }
    );
    assert!(s[2].opts.send_proxy.enabled() && !s[2].opts.send_proxy.v2);
    assert!(s[2].opts.check_send_proxy);
    assert_eq!(
        alerts(
            "frontend f\n bind 127.0.0.1:1\n tcp-request connection expect-proxy\n \
             tcp-request connection expect-proxy layer5\n tcp-request content expect-proxy layer4\n \
             tcp-request connection expect-proxy layer4 foo\n default_backend b\n\
             backend b\n server r 127.0.0.1:1 proxy-v2-options crc32c,foo\n"
        ),
        [
            "3: 'tcp-request connection expect-proxy' only supports 'layer4' in frontend 'f' (got '')",
            "4: 'tcp-request connection expect-proxy' only supports 'layer4' in frontend 'f' (got 'layer5')",
            "5: 'expect-proxy layer4' is not allowed in 'tcp-request content' rules in frontend 'f'",
            "6: 'tcp-request connection expect-proxy' only accepts 'if' or 'unless', in frontend 'f' (got 'foo')",
            "9: 'server b/r' : 'foo' : proxy v2 option not implemented.",
        ]
    );
}

/// `lua-prepend-path`: HAProxy 2.6's checks (captured from `haproxy -c`), no effect otherwise.
#[test]
fn lua_prepend_path_checks_as_haproxy() {
    assert_eq!(
        alerts("global\n lua-prepend-path\n"),
        ["2: 'lua-prepend-path' expects to receive a <path> as argument"]
    );
    assert_eq!(
        alerts("global\n lua-prepend-path /a/?.lua foo\n"),
        ["2: 'lua-prepend-path' expects <type> to either be 'path' or 'cpath'"]
    );
    assert_eq!(
        alerts("global\n lua-prepend-path /a/?.lua cpath x\n"),
        ["2: 'lua-prepend-path' cannot handle unexpected argument 'x'."]
    );
    ok("global\n lua-prepend-path /a/?.lua cpath\n lua-prepend-path /b/?.lua\n");
}

/// `bind … proto`: HAProxy 2.6's multiplexer names and its checks (captured from `haproxy -c`).
#[test]
fn bind_proto_as_haproxy() {
    let c = ok(&format!(
        "{T}frontend f\n mode http\n bind :1 proto h2\n bind :2 proto h1\n bind :3\n"
    ));
    let f = c.proxies.iter().find(|p| p.name == "f").unwrap();
    let protos: Vec<Option<&str>> = f.binds.iter().map(|b| b.proto.as_deref()).collect();
    assert_eq!(protos, [Some("h2"), Some("h1"), None]);
    ok(&format!("{T}frontend t\n mode tcp\n bind :1 proto none\n"));
    assert_eq!(
        alerts(&format!("{T}frontend f\n bind :1 proto foo\n")),
        ["6: 'bind :1' in section 'frontend' : 'proto' :  unknown MUX protocol 'foo'"]
    );
    assert_eq!(
        alerts(&format!("{T}frontend f\n bind :1 proto\n")),
        ["6: 'bind :1' in section 'frontend' : 'proto' : missing value"]
    );
    let post = |cfg: &str| -> Vec<String> {
        match parse_env(cfg, &no_env) {
            Ok(_) => panic!("expected errors"),
            Err(d) => d
                .iter()
                .filter(|d| d.is_alert())
                .map(|d| d.msg.clone())
                .collect(),
        }
    };
    assert_eq!(
        post(&format!(
            "{T}frontend f\n mode tcp\n bind 127.0.0.1:9 proto h2\n"
        )),
        ["frontend 'f' : MUX protocol 'h2' is not usable for 'bind 127.0.0.1:9' at [t.cfg:7]."]
    );
    assert_eq!(
        post(&format!("{T}listen l\n mode http\n bind :9 proto none\n")),
        ["proxy 'l' : MUX protocol 'none' is not usable for 'bind :9' at [t.cfg:7]."]
    );
    assert_eq!(
        post(&format!("{T}frontend f\n mode http\n bind :9 proto fcgi\n")),
        ["frontend 'f' : MUX protocol 'fcgi' is not usable for 'bind :9' at [t.cfg:7]."]
    );
}

/// `balance` and `hash-type` as HAProxy 2.6 parses them (its words, checked with `haproxy -c`).
#[test]
fn balance_and_hash_type() {
    use super::model::{HashFn, HashType};
    let be = |lines: &str| {
        let c = ok(&format!(
            "{T}backend b\n mode http\n{lines}\n server s 127.0.0.1:1\n"
        ));
        let b = c.proxies.iter().find(|p| p.name == "b").unwrap().clone();
        (b.balance, b.hash_type)
    };
    assert_eq!(be(" balance roundrobin foo").0, Balance::Roundrobin);
    assert_eq!(be(" balance random").0, Balance::Random { draws: 2 });
    assert_eq!(be(" balance random(5)").0, Balance::Random { draws: 5 });
    assert_eq!(
        be(" balance uri len 12 depth 3 whole").0,
        Balance::Uri {
            len: 12,
            depth: 3,
            whole: true,
            path_only: false
        }
    );
    assert_eq!(
        be(" balance url_param sid check_post").0,
        Balance::UrlParam {
            name: "sid".into(),
            check_post: true
        }
    );
    assert_eq!(
        be(" balance hdr(Host) use_domain_only").0,
        Balance::Hdr {
            name: "host".into(),
            domain_only: true
        }
    );
    let ht = |consistent, func, avalanche| HashType {
        consistent,
        func,
        avalanche,
    };
    assert_eq!(be(" balance uri").1, ht(false, HashFn::Sdbm, false));
    assert_eq!(be(" hash-type consistent").1, ht(true, HashFn::Sdbm, true));
    assert_eq!(
        be(" hash-type consistent djb2").1,
        ht(true, HashFn::Djb2, false)
    );
    assert_eq!(
        be(" hash-type map-based crc32 avalanche").1,
        ht(false, HashFn::Crc32, true)
    );
    let a = alerts(&format!(
        "{T}backend b\n balance random(0)\n balance random(3\n balance random(x)\n balance uri len 0\n balance uri foo\n balance url_param\n balance url_param a x\n balance hdr()\n balance hdr(Host) x\n balance hash\n balance foo\n hash-type\n hash-type avalanche\n hash-type consistent md5\n hash-type map-based sdbm foo\n"
    ));
    assert_eq!(
        a,
        [
            "6: balance random : number of draws must be at least 1.",
            "7: balance random : missing closing parenthesis.",
            "8: balance random : unexpected character 'x' after argument.",
            "9: balance uri : 'len' expects a positive integer (got '0').",
            "10: balance uri only accepts parameters 'len', 'depth', 'path-only', and 'whole' (got 'foo').",
            "11: balance url_param requires an URL parameter name.",
            "12: balance url_param only accepts 'check_post' modifier (got 'x').",
            "13: balance hdr requires an http header field name.",
            "14: balance hdr(Host) only accepts 'use_domain_only' modifier (got 'x').",
            "15: balance hash requires a sample expression.",
            "16: balance only supports 'roundrobin', 'static-rr', 'leastconn', 'source', 'uri', 'url_param', 'hdr(name)' and 'rdp-cookie(name)' options.",
            "17: 'hash-type' only supports 'consistent' and 'map-based'.",
            "18: experimental feature 'hash-type avalanche' is not supported anymore, please use 'hash-type map-based sdbm avalanche' instead.",
            "19: 'hash-type' only supports 'sdbm', 'djb2', 'crc32', or 'wt6' hash functions.",
            "20: 'hash-type' only supports 'avalanche' as a modifier for hash functions.",
        ]
    );
    assert_eq!(
        be(" balance hash req.hdr(x),lower").0,
        Balance::Hash("req.hdr(x),lower".into())
    );
    let a = alerts(&format!(
        "{T}backend b\n balance hash foo(\n server s 127.0.0.1:1\n"
    ));
    assert_eq!(
        a,
        [
            "0: backend 'b' [t.cfg:5]: failed to parse 'balance hash' expression 'foo(' in : unknown fetch method 'foo'."
        ]
    );
    // A layer-7 hash in a TCP backend: roundrobin, with HAProxy's warning.
    let l = parse_env(
        &format!("{T}backend t\n balance hdr(x)\n server s 127.0.0.1:1\n"),
        &no_env,
    )
    .unwrap();
    let t = l.config.proxies.iter().find(|p| p.name == "t").unwrap();
    assert_eq!(t.balance, Balance::Roundrobin);
    assert!(l.warnings.iter().any(|w| w.msg
        == "Layer 7 hash not possible for backend 't' (needs 'mode http'). Falling back to round robin."));
}

#[test]
fn unique_id_keywords() {
    let c = ok(&format!(
        "{T}frontend f\n bind :80\n unique-id-format %ci:%cp\n unique-id-header X-ID\n"
    ));
    let f = c.proxies.iter().find(|p| p.name == "f").unwrap();
    assert_eq!(
        f.unique_id_format.as_ref().map(|(s, _)| s.as_str()),
        Some("%ci:%cp")
    );
    assert_eq!(f.unique_id_header.as_deref(), Some("X-ID"));
    let a = alerts(&format!(
        "{T}frontend f\n unique-id-format\n unique-id-format a b\n unique-id-header\n"
    ));
    assert_eq!(
        a,
        [
            "6: unique-id-format expects an argument.",
            "7: unique-id-format expects only one argument, don't forget to escape spaces!",
            "8: unique-id-header expects an argument.",
        ]
    );
}

#[test]
fn hash_balance_factor_keyword() {
    let c = ok(&format!(
        "{T}backend b\n hash-balance-factor 150\n server s 127.0.0.1:1\n"
    ));
    let b = c.proxies.iter().find(|p| p.name == "b").unwrap();
    assert_eq!(b.hash_balance_factor, 150);
    let a = alerts(&format!(
        "{T}backend b\n hash-balance-factor\n hash-balance-factor 50\n"
    ));
    assert_eq!(
        a,
        [
            "6: 'hash-balance-factor' expects an integer argument.",
            "7: 'hash-balance-factor' must be 0 or greater than 100.",
        ]
    );
}

/// `peers` sections: the local peer (here `lb1`), both line forms, tables and the post-parse
/// links and removals.
#[test]
fn peers_sections() {
    let c = ok(&format!(
        "{T}peers p\n peer lb1 127.0.0.1:10000\n peer lb2 127.0.0.2:10000\n table t type ip size 1k store http_req_rate(10s)\n\
         peers q\n bind 127.0.0.1:10001\n server lb1\n server lb2 127.0.0.2:10001\n\
         peers gone\n peer other 127.0.0.3:10000\n\
         peers off\n peer lb1 127.0.0.1:10002\n disabled\n\
         backend b\n stick-table type ip size 1k peers p\n http-request track-sc0 src table p/t\n\
         backend c\n stick-table type ip size 1k peers gone\n\
         backend d\n stick-table type ip size 1k peers off\n"
    ));
    let names: Vec<(&str, bool)> = c
        .peers
        .iter()
        .map(|s| (s.name.as_str(), s.active))
        .collect();
    assert_eq!(
        names,
        [("p", true), ("q", true), ("gone", false), ("off", false)]
    );
    let p = &c.peers[0];
    assert_eq!(p.bind, Some("127.0.0.1:10000".parse().unwrap()));
    assert_eq!(
        p.peers
            .iter()
            .map(|x| (x.name.as_str(), x.local))
            .collect::<Vec<_>>(),
        [("lb1", true), ("lb2", false)]
    );
    assert_eq!(p.tables[0].0, "t");
    let q = &c.peers[1];
    assert_eq!(q.bind, Some("127.0.0.1:10001".parse().unwrap()));
    assert_eq!(q.peers[0].name, "lb1");
    assert!(q.peers[0].local);
    assert_eq!(q.peers[1].addr, Some("127.0.0.2:10001".parse().unwrap()));
    let link = |n: &str| {
        c.proxy(n)
            .and_then(|p| p.stick_table.as_ref()?.peers.clone())
    };
    assert_eq!(link("b").as_deref(), Some("p"));
    assert_eq!(link("c"), None);
    assert_eq!(link("d"), None);
    assert!(c.global.pending.is_empty());
    assert_eq!(
        alerts(&format!(
            "{T}peers p\n peer lb1 127.0.0.1:10000\n shards 2\n"
        )),
        ["7: unknown keyword 'shards' in 'peers' section"]
    );
    assert_eq!(
        alerts(&format!(
            "{T}backend b\n stick-table type ip size 1k peers nope\n"
        )),
        ["0: Proxy 'b': unable to find sync peers 'nope'."]
    );
}

/// `stick` lines: HAProxy 2.6's words (captured from `haproxy -c`).
#[test]
fn stick_rules_as_haproxy() {
    use super::model::StickKind;
    let c = ok(&format!(
        "{T}backend b\n stick-table type ip size 1k\n stick on src\n stick match src table b\n stick store-request src\n"
    ));
    let b = c.proxies.iter().find(|p| p.name == "b").unwrap();
    let kinds: Vec<StickKind> = b.stick_rules.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [StickKind::On, StickKind::Match, StickKind::StoreRequest]
    );
    let a = |lines: &str| {
        alerts(&format!(
            "{T}backend b\n stick-table type ip size 1k\n{lines}"
        ))
    };
    assert_eq!(a(" stick on\n"), ["7: 'stick' expects a fetch method."]);
    assert_eq!(
        a(" stick foo src\n"),
        ["7: 'stick' expects 'on', 'match', or 'store'."]
    );
    assert_eq!(
        a(" stick on src foo\n"),
        ["7: 'stick': unknown keyword 'foo'."]
    );
    assert_eq!(
        alerts(&format!(
            "{T}backend b\n stick on src\n server s 127.0.0.1:1\n"
        )),
        ["0: Proxy 'b': unable to find stick-table 'b'."]
    );
    assert_eq!(
        alerts("defaults\n stick on src\n"),
        ["2: 'stick' not allowed in 'defaults' section."]
    );
    let c = ok(&format!(
        "{T}backend b\n stick-table type ip size 1k\n stick on hdr(x) if {{ hdr(x) -m found }}\n"
    ));
    let r = &c.proxies[0].stick_rules[0];
    assert_eq!((r.pattern.as_str(), r.cond.is_some()), ("hdr(x)", true));
    assert_eq!(
        a(" stick on nope\n stick match res.cook(x)\n stick store-response req.cook(x)\n"),
        [
            "7: 'stick': unknown fetch method 'nope'",
            "8: 'stick': fetch method 'res.cook' extracts information from 'HTTP response headers', none of which is available during request.",
            "9: 'stick': fetch method 'req.cook' extracts information from 'HTTP request headers', none of which is available for 'store-response'.",
        ]
    );
}

/// `tcp-response`: HAProxy 2.6's words for misplaced and malformed rules (from `haproxy -c`).
#[test]
fn tcp_response_rules_as_haproxy() {
    let c = ok(&format!(
        "{T}backend b\n tcp-response inspect-delay 2s\n tcp-response content accept if {{ res.len gt 3 }}\n \
         tcp-response content reject unless WAIT_END\n tcp-response content close\n \
         tcp-response content set-var(txn.l) res.len\n tcp-response content sc-inc-gpc0(1)\n \
         server s 127.0.0.1:1\n"
    ));
    let b = &c.proxies[0];
    assert_eq!(b.tcp_res_inspect_delay, Some(Duration::from_secs(2)));
    assert_eq!(b.tcp_response.len(), 5);
    assert_eq!(b.tcp_response[2].action, TcpRequestAction::Close);
    assert_eq!(b.tcp_response[0].loc.line, 7);
    assert!(b.pending.is_empty(), "{:?}", b.pending);
    assert_eq!(
        alerts(
            "frontend f\n bind 127.0.0.1:1\n tcp-response content accept\n \
             tcp-response inspect-delay 1s\n default_backend b\nbackend b\n tcp-response content foo\n \
             tcp-response content accept foo\n tcp-response inspect-delay\n tcp-response bar\n \
             tcp-response content set-var(txn.x)\n server s 127.0.0.1:1\n"
        ),
        [
            "3: tcp-response content is only allowed in 'backend' sections or 'defaults' section with a name",
            "4: tcp-response inspect-delay is only allowed in 'backend' sections or 'defaults' section with a name",
            "7: 'tcp-response content' expects 'accept', 'close', 'reject', 'ot-group', 'set-log-level', 'set-nice', 'sc-inc-gpc(*)', 'sc-inc-gpc0(*)', 'sc-inc-gpc1(*)', 'sc-set-gpt(*)', 'sc-set-gpt0(*)', 'send-spoe-group', 'set-var-fmt(*)', 'set-var(*)', 'unset-var(*)', 'set-mark', 'set-tos', 'silent-drop' in backend 'b' (got 'foo').",
            "8: 'tcp-response content accept' only accepts 'if' or 'unless', in backend 'b' (got 'foo')",
            "9: 'tcp-response inspect-delay' expects a positive delay in milliseconds, in backend 'b'",
            "10: 'tcp-response' expects 'inspect-delay' or 'content' in backend 'b' (got 'bar')",
            "11: missing fetch method",
        ]
    );
}

/// `normalize-uri` (experimental in 2.6) and `disable-l7-retry`: HAProxy's words.
#[test]
fn normalize_uri_parse_as_haproxy() {
    assert_eq!(
        alerts("frontend f\n bind :80\n http-request normalize-uri path-merge-slashes\n"),
        [
            "3: 'normalize-uri' action is experimental, must be allowed via a global 'expose-experimental-directives'"
        ]
    );
    let head = "error detected in frontend 'f' while parsing 'http-request normalize-uri' rule :";
    assert_eq!(
        alerts(
            "global\n expose-experimental-directives\nfrontend f\n bind :80\n http-request normalize-uri\n \
             http-request normalize-uri foo\n http-request normalize-uri path-strip-dotdot bar\n \
             http-request normalize-uri percent-to-uppercase bar\n"
        ),
        [
            format!("5: {head} missing argument <normalizer>."),
            format!("6: {head} unknown normalizer 'foo'."),
            format!("7: {head} unknown argument 'bar' for 'path-strip-dotdot' normalizer."),
            format!("8: {head} unknown argument 'bar' for 'percent-to-uppercase' normalizer."),
        ]
    );
    let c = ok(
        "global\n expose-experimental-directives\nfrontend f\n bind :80\n \
         http-request normalize-uri path-strip-dotdot full if TRUE\n http-request disable-l7-retry\n",
    );
    assert_eq!(
        c.proxies[0].http_request[0].action,
        HttpRequestAction::NormalizeUri(UriNorm::PathStripDotdot { full: true })
    );
    assert_eq!(
        c.proxies[0].http_request[1].action,
        HttpRequestAction::DisableL7Retry
    );
}

/// `set-log-level`, `tarpit`, `timeout tarpit`: HAProxy's words and defaults.
#[test]
fn set_log_level_and_tarpit_parse() {
    let c = ok(&format!(
        "{T}frontend f\n bind :80\n timeout tarpit 2s\n http-request set-log-level err\n \
         http-request set-log-level silent if TRUE\n http-request tarpit\n \
         http-request tarpit deny_status 429 if TRUE\n default_backend b\n\
         backend b\n http-response set-log-level notice\n server s 127.0.0.1:1\n"
    ));
    let f = &c.proxies[0];
    assert_eq!(f.timeouts.tarpit, Some(Duration::from_secs(2)));
    let acts: Vec<_> = f.http_request.iter().map(|r| r.action.clone()).collect();
    assert_eq!(
        acts,
        [
            HttpRequestAction::SetLogLevel(Some(3)),
            HttpRequestAction::SetLogLevel(None),
            HttpRequestAction::Tarpit { status: 500 },
            HttpRequestAction::Tarpit { status: 429 },
        ]
    );
    assert_eq!(
        c.proxies[1].http_response[0].action,
        HttpRequestAction::SetLogLevel(Some(5))
    );
    let head = "error detected in frontend 'f' while parsing 'http-request set-log-level' rule :";
    assert_eq!(
        alerts(
            "frontend f\n bind :80\n http-request set-log-level\n http-request set-log-level foo\n"
        ),
        [
            format!("3: {head} expects exactly 1 argument (log level name or 'silent')."),
            format!("4: {head} expects exactly 1 argument (log level name or 'silent')."),
        ]
    );
}

/// `set-src|set-dst[-port] <expr>`: HAProxy's words for a missing or unknown fetch.
#[test]
fn set_src_dst_parse() {
    let c = ok("frontend f\n bind :80\n http-request set-dst-port int(8080) if TRUE\n");
    assert_eq!(
        c.proxies[0].http_request[0].action,
        HttpRequestAction::SetAddr {
            dst: true,
            port: true,
            expr: "int(8080)".into()
        }
    );
    let head =
        |a: &str| format!("error detected in frontend 'f' while parsing 'http-request {a}' rule :");
    assert_eq!(
        alerts("frontend f\n bind :80\n http-request set-src\n http-request set-src foo(\n"),
        [
            format!("3: {} missing fetch method.", head("set-src")),
            format!("4: {} unknown fetch method 'foo'.", head("set-src")),
        ]
    );
}

/// `early-hint <name> <fmt>`: two arguments, as `set-header`.
#[test]
fn early_hint_parse() {
    let c = ok("frontend f\n bind :80\n http-request early-hint link \"</a.css>\" if TRUE\n");
    assert_eq!(
        c.proxies[0].http_request[0].action,
        HttpRequestAction::EarlyHint {
            name: "link".into(),
            value: "</a.css>".into()
        }
    );
    assert_eq!(
        alerts("frontend f\n bind :80\n http-request early-hint link\n"),
        [
            "3: error detected in frontend 'f' while parsing 'http-request early-hint' rule : expects exactly 2 arguments."
        ]
    );
}

/// `tcp-request content` / `tcp-response content set-log-level`: HAProxy prints the bare
/// message for a missing level.
#[test]
fn tcp_set_log_level_parse() {
    let c = ok(&format!(
        "{T}frontend f\n bind :80\n tcp-request content set-log-level silent if TRUE\n default_backend b\n\
         backend b\n tcp-response content set-log-level err\n server s 127.0.0.1:1\n"
    ));
    assert_eq!(
        c.proxies[0].tcp_request[0].action,
        TcpRequestAction::SetLogLevel(None)
    );
    assert_eq!(
        c.proxies[1].tcp_response[0].action,
        TcpRequestAction::SetLogLevel(Some(3))
    );
    assert_eq!(
        alerts(
            "frontend f\n bind :80\n tcp-request content set-log-level\n default_backend b\n\
             backend b\n tcp-response content set-log-level foo\n server s 127.0.0.1:1\n"
        ),
        [
            "3: expects exactly 1 argument (log level name or 'silent')",
            "6: expects exactly 1 argument (log level name or 'silent')",
        ]
    );
}

/// A named `defaults` section's `tcp-response` rules and delay reach the backends that use it.
#[test]
fn tcp_response_from_named_defaults() {
    let c = ok(
        "defaults d\n mode tcp\n timeout client 1s\n timeout server 1s\n timeout connect 1s\n \
         tcp-response inspect-delay 1s\n tcp-response content reject if { res.len gt 9 }\n\
         backend b from d\n server s 127.0.0.1:1\n",
    );
    let b = c.proxies.iter().find(|p| p.name == "b").unwrap();
    assert_eq!(b.tcp_response.len(), 1);
    assert_eq!(b.tcp_res_inspect_delay, Some(Duration::from_secs(1)));
}

/// One format string per proxy, the last setting wins (HAProxy): `option httplog|tcplog`
/// replaces a `log-format` inherited from `defaults` or set before it, and a `log-format`
/// after them is the one used.
#[test]
fn option_httplog_replaces_an_inherited_log_format() {
    let c = ok("defaults\n    mode http\n    log-format \"%ci %b\"\n\
         frontend a\n    bind :8001\n    option httplog\n\
         frontend b\n    bind :8002\n\
         frontend c\n    bind :8003\n    option httplog\n    log-format \"%ST\"\n\
         listen d\n    mode tcp\n    bind :8004\n    option tcplog\n");
    let by = |n: &str| c.proxies.iter().find(|p| p.name == n).expect(n);
    assert!(by("a").log_format.is_none() && by("a").options.httplog);
    assert_eq!(by("b").log_format.as_ref().unwrap().0, "%ci %b");
    assert_eq!(by("c").log_format.as_ref().unwrap().0, "%ST");
    assert!(by("d").log_format.is_none() && by("d").options.tcplog);
}

#[test]
fn compression_settings_and_inheritance() {
    let c = ok(&format!(
        "{T} mode http\n compression algo gzip\n compression type text/html\n\
         frontend f\n bind :80\n compression algo deflate raw-deflate\n compression offload\n default_backend b\n\
         backend b\n compression type text/plain application/json\n server s 127.0.0.1:1\n\
         backend plain\n server s 127.0.0.1:1\n"
    ));
    let comp = |n: &str| c.proxy(n).unwrap().extra.compression.clone().unwrap();
    use CompAlgo::*;
    // Each word goes in front of what was there (defaults' included), as HAProxy's list.
    assert_eq!(comp("f").algos, [RawDeflate, Deflate, Gzip]);
    assert!(comp("f").offload);
    assert_eq!(comp("f").types, ["text/html"]);
    assert_eq!(
        comp("b").types,
        ["application/json", "text/plain", "text/html"]
    );
    assert_eq!(comp("plain").algos, [Gzip]);
    assert!(!comp("plain").offload);
}

#[test]
fn compression_errors_have_haproxy_words() {
    let fe = |line: &str| format!("{T}frontend f\n bind :80\n {line}\n");
    assert_eq!(
        alerts(&fe("compression")),
        ["7: 'compression' expects 'algo', 'type' or 'offload'"]
    );
    assert_eq!(
        alerts(&fe("compression gzip")),
        ["7: 'compression' expects 'algo', 'type' or 'offload'"]
    );
    assert_eq!(
        alerts(&fe("compression algo")),
        ["7: parsing [t.cfg:7] : 'compression' expects <algorithm>."]
    );
    assert_eq!(
        alerts(&fe("compression algo gzip GZIP")),
        ["7: 'compression' : 'GZIP' is not a supported algorithm."]
    );
    assert_eq!(
        alerts(&fe("compression type")),
        ["7: 'compression' expects <type>."]
    );
    // `offload` in defaults: a warning, and nothing inherited.
    let l = parse_env(
        &format!("{T} compression offload\nfrontend f\n bind :80\n compression algo gzip\n"),
        &no_env,
    )
    .unwrap();
    assert!(
        l.warnings
            .iter()
            .any(|d| d.msg == "'compression' : 'offload' ignored in 'defaults' section."),
        "{:?}",
        l.warnings
    );
    let f = l.config.proxy("f").unwrap();
    assert!(!f.extra.compression.as_ref().unwrap().offload);
}

#[test]
fn compression_globals() {
    let c = ok("global\n maxcomprate 10\n tune.comp.maxlevel 6\n");
    assert_eq!(c.global.maxcomprate, Some(10 * 1024));
    assert_eq!(c.global.tune.comp_maxlevel, Some(6));
    assert_eq!(
        alerts("global\n tune.comp.maxlevel 10\n maxcomprate\n"),
        [
            "2: 'tune.comp.maxlevel' expects a numeric value between 1 and 9",
            "3: 'maxcomprate' expects an integer argument in kb/s."
        ]
    );
}
