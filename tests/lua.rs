//! Lua, differential: the same configuration and the same Lua script under HAProxy 2.6 (built
//! with Lua 5.3) and portcullis, each with its own fresh backend; the responses (status, the
//! headers the script touches, body) and what reached the backend are compared. The script is
//! this test's own: a CORS-like action pair (an OPTIONS preflight answered with
//! `txn:done(reply)`, response headers from what the request action kept with `set_priv`), a
//! fetch and a converter used in `set-header`, a `set_var`/`get_var` round trip through the
//! fetch objects, a reply that denies, and an action failing at run time (logged, the next rule
//! runs). `-c` messages for Lua mistakes are compared too.
//!
//! Skipped, with a notice, when /usr/sbin/haproxy is not installed.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::{Proc, Response, TempDir};

const HAPROXY: &str = "/usr/sbin/haproxy";

const SCRIPT: &str = r#"
-- lua-load arguments arrive as `...`.
local args = table.pack(...)
local LOAD_ARG = args[1] or "none"

local function split(s)
  local out = {}
  for _, v in ipairs(core.tokenize(s, ",", true)) do out[v] = true end
  return out
end

core.register_action("cors", { "http-req" }, function(txn, methods, origins, headers)
  local h = txn.http:req_get_headers()
  local origin = h["origin"] and h["origin"][0]
  if origin == nil then return end
  local allowed = split(origins)[origin:match("//([^/]+)") or ""]
  if allowed then txn:set_priv(origin) end
  if txn.sf:method() == "OPTIONS" then
    local r = txn:reply()
    r:set_status(204)
    if allowed then r:add_header("Access-Control-Allow-Origin", origin) end
    r:add_header("Access-Control-Allow-Methods", methods)
    r:add_header("Access-Control-Allow-Headers", headers)
    r:add_header("Access-Control-Max-Age", 600)
    txn:done(r)
  end
end, 3)

core.register_action("cors", { "http-res" }, function(txn)
  txn.http:res_add_header("Vary", "Origin")
  local origin = txn:get_priv()
  if origin ~= nil then
    txn.http:res_set_header("Access-Control-Allow-Origin", origin)
  end
end)

core.register_action("stamp", { "http-req" }, function(txn)
  txn:set_var("txn.seen", txn.sf:req_hdr("x-in"))
  txn.http:req_set_header("X-Seen", txn:get_var("txn.seen"))
  txn.http:req_set_header("X-Src", txn.f:src())
  txn.http:req_set_header("X-Up", txn.sc:upper(txn.sf:req_hdr("x-in")))
  txn.http:req_set_header("X-Load-Arg", LOAD_ARG)
  txn.http:req_del_header("X-Drop")
  txn.http:req_rep_header("X-Rep", "^v(.*)$", "w\\1")
end)

core.register_action("deny", { "http-req" }, function(txn)
  txn:done(txn:reply({ status = 403, headers = { ["content-type"] = { "text/plain" } },
                       body = "denied by lua\n" }))
end)

core.register_action("boom", { "http-req" }, function(txn)
  txn.http:req_set_header("X-Before-Boom", "1")
  local t = nil
  t.x = 1
end)

core.register_action("rewrite", { "http-req" }, function(txn)
  txn.http:req_set_path("/rewritten")
  txn.http:req_set_query("a=1")
end)

core.register_action("status", { "http-res" }, function(txn)
  txn.http:res_set_status(299, "Lua Said So")
end)

core.register_fetches("greeting", function(txn, who) return "hello-" .. who end)
core.register_converters("tag", function(v, t) return t .. ":" .. v end)
"#;

fn config(dir: &Path, port: u16, backend: u16) -> String {
    format!(
        "global\n    lua-load {lua} from-config\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n\
         \x20   http-request lua.cors \"GET,PUT,POST\" \"a.test,b.test\" \"X-Custom-Header\"\n\
         \x20   http-request lua.deny if {{ path /deny }}\n\
         \x20   http-request lua.boom if {{ path /boom }}\n\
         \x20   http-request lua.rewrite if {{ path /rw }}\n\
         \x20   http-request lua.stamp\n\
         \x20   http-request set-header X-Greet %[lua.greeting(bob)]\n\
         \x20   http-request set-header X-Tag %[req.hdr(x-in),lua.tag(t)]\n\
         \x20   http-response lua.cors\n\
         \x20   http-response lua.status if {{ var(txn.seen) -m str st }}\n\
         \x20   http-response set-header X-Var %[var(txn.seen)]\n\
         \x20   default_backend be\n\n\
         backend be\n    server s1 127.0.0.1:{backend}\n",
        lua = dir.join("t.lua").display()
    )
}

/// Chosen headers by name, `None` when absent.
type Fields = Vec<(String, Option<String>)>;

/// What one request showed: the response's status, chosen headers and body, and the chosen
/// headers of what reached the backend (None when nothing did).
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: u16,
    reason: String,
    headers: Fields,
    body: String,
    backend: Option<(String, Fields)>,
}

const RES_HEADERS: &[&str] = &[
    "access-control-allow-origin",
    "access-control-allow-methods",
    "access-control-allow-headers",
    "access-control-max-age",
    "vary",
    "x-var",
    "content-type",
    "content-length",
];

const BACKEND_HEADERS: &[&str] = &[
    "x-seen",
    "x-src",
    "x-up",
    "x-greet",
    "x-tag",
    "x-drop",
    "x-rep",
    "x-before-boom",
];

fn observe(node: &HttpNode, addr: std::net::SocketAddr, raw: &str) -> Seen {
    node.clear_requests();
    let r: Response = proxy::request(addr, raw);
    let reached = node.requests().first().map(|rec| {
        (
            format!("{} {}", rec.method, rec.target),
            BACKEND_HEADERS
                .iter()
                .map(|h| (h.to_string(), rec.header(h)))
                .collect(),
        )
    });
    Seen {
        status: r.status,
        reason: r
            .head
            .lines()
            .next()
            .and_then(|l| l.splitn(3, ' ').nth(2))
            .unwrap_or("")
            .to_string(),
        headers: RES_HEADERS
            .iter()
            .map(|h| (h.to_string(), r.header(h)))
            .collect(),
        body: if node.requests().is_empty() {
            r.text()
        } else {
            String::new()
        },
        backend: reached,
    }
}

const REQUESTS: &[(&str, &str)] = &[
    (
        "preflight from an allowed origin",
        "OPTIONS /api HTTP/1.1\r\nHost: x\r\nOrigin: http://a.test\r\nConnection: close\r\n\r\n",
    ),
    (
        "preflight from another origin",
        "OPTIONS /api HTTP/1.1\r\nHost: x\r\nOrigin: http://evil.test\r\nConnection: close\r\n\r\n",
    ),
    (
        "GET with an allowed origin",
        "GET /api HTTP/1.1\r\nHost: x\r\nOrigin: http://b.test\r\nX-In: foo\r\nX-Drop: 1\r\nX-Rep: vx\r\nConnection: close\r\n\r\n",
    ),
    (
        "GET without origin",
        "GET / HTTP/1.1\r\nHost: x\r\nX-In: st\r\nConnection: close\r\n\r\n",
    ),
    (
        "deny by reply",
        "GET /deny HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ),
    (
        "runtime error, next rules run",
        "GET /boom HTTP/1.1\r\nHost: x\r\nX-In: b\r\nConnection: close\r\n\r\n",
    ),
    (
        "path and query rewritten",
        "GET /rw?old=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ),
];

struct Side {
    proc: Proc,
    node: HttpNode,
    port: u16,
    _dir: TempDir,
}

fn start(haproxy: bool) -> Side {
    let dir = TempDir::new("lua");
    std::fs::write(dir.0.join("t.lua"), SCRIPT).expect("write the script");
    let node = HttpNode::start(lo(0), HttpOpts::named("node")).expect("backend");
    let port = free_port();
    let cfg = config(&dir.0, port, node.addr().port());
    let proc = if haproxy {
        Proc::haproxy(&cfg, lo(port)).expect("haproxy")
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    Side {
        proc,
        node,
        port,
        _dir: dir,
    }
}

#[test]
fn lua_actions_fetches_and_converters_as_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} is not installed: Lua differential test skipped");
        return;
    }
    let h = start(true);
    let p = start(false);
    for (what, raw) in REQUESTS {
        let theirs = observe(&h.node, lo(h.port), raw);
        let ours = observe(&p.node, lo(p.port), raw);
        assert_eq!(ours, theirs, "{what}");
        eprintln!("{what}: {} as HAProxy", ours.status);
    }
    // The requests really went through the script (not two equally empty answers).
    let pre = observe(&p.node, lo(p.port), REQUESTS[0].1);
    assert_eq!(pre.status, 204);
    assert!(pre.backend.is_none());
    assert_eq!(
        pre.headers[0].1.as_deref(),
        Some("http://a.test"),
        "{pre:?}"
    );
    let get = observe(&p.node, lo(p.port), REQUESTS[2].1);
    let (_, hs) = get.backend.expect("reached the backend");
    let hv = |n: &str| hs.iter().find(|(k, _)| k == n).and_then(|(_, v)| v.clone());
    assert_eq!(hv("x-greet").as_deref(), Some("hello-bob"));
    assert_eq!(hv("x-tag").as_deref(), Some("t:foo"));
    // An expected divergence (docs/compatibility.md): HAProxy 2.6.12 accepts `lua-load`
    // arguments but does not pass them to the file (`...` is empty); portcullis passes them,
    // as later HAProxy versions do.
    let load_arg = |n: &HttpNode| {
        n.requests()
            .last()
            .and_then(|r| r.header("x-load-arg"))
            .unwrap_or_default()
    };
    assert_eq!(load_arg(&p.node), "from-config");
    observe(&h.node, lo(h.port), REQUESTS[2].1);
    assert_eq!(load_arg(&h.node), "none");
    // The failing action is logged as HAProxy logs it, and the worker lives on.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let needle = "Lua function 'boom': [state-id ";
    let logged = |p: &Proc| p.stderr.lock().unwrap().iter().any(|l| l.contains(needle));
    while !(logged(&p.proc) && logged(&h.proc)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let line = |p: &Proc| {
        p.stderr
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.contains(needle))
            .cloned()
            .unwrap_or_default()
    };
    // Each side has its own directory; the state number differs (HAProxy's one shared state
    // is 0, portcullis numbers its per-thread states from 1, as `lua-load-per-thread`).
    let ours = line(&p.proc).replace(&p._dir.0.display().to_string(), "<dir>");
    let theirs = line(&h.proc).replace(&h._dir.0.display().to_string(), "<dir>");
    let tail = "runtime error: ";
    let msg = |l: &str| l.split_once(tail).map(|(_, m)| m.to_string());
    assert!(ours.starts_with("[ALERT]"), "{ours}");
    assert_eq!(msg(&ours), msg(&theirs), "{ours}\n{theirs}");
    assert!(ours.contains(" from <dir>/t.lua:"), "{ours}");
    assert!(msg(&ours).is_some_and(|m| m.contains("attempt to index a nil value")));
    assert_eq!(observe(&p.node, lo(p.port), REQUESTS[3].1).status, 299);
}

/// `-c` on configurations with Lua mistakes: the same `[ALERT]` text (pid masked).
#[test]
fn lua_mistakes_are_reported_as_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} is not installed: Lua -c comparison skipped");
        return;
    }
    let dir = TempDir::new("lua-c");
    let d = &dir.0;
    std::fs::write(
        d.join("ok.lua"),
        "core.register_action(\"a2\", {\"http-req\"}, function(txn, x, y) end, 2)\n\
         core.register_action(\"r\", {\"http-res\"}, function(txn) end)\n\
         core.register_fetches(\"f\", function(txn) return \"x\" end)\n\
         core.register_converters(\"c\", function(v) return v end)\n",
    )
    .unwrap();
    std::fs::write(d.join("syn.lua"), "x = = 1\n").unwrap();
    std::fs::write(d.join("rt.lua"), "local a = 1\nerror(\"boom\")\n").unwrap();
    std::fs::write(d.join("nil.lua"), "local b = nil\nb.x = 1\n").unwrap();
    let head = |lua: &str| {
        format!(
            "global\n lua-load {}\ndefaults\n mode http\n timeout client 1s\n timeout server 1s\n timeout connect 1s\nfrontend f\n bind 127.0.0.1:{}\n",
            d.join(lua).display(),
            free_port()
        )
    };
    let cases = [
        "global\n lua-load /nonexistent/x.lua\n".to_string(),
        "global\n lua-load\n".to_string(),
        "global\n lua-load-per-thread\n".to_string(),
        head("syn.lua"),
        head("rt.lua"),
        head("nil.lua"),
        format!(
            "global\n lua-load {0}\n lua-load {0}\n",
            d.join("ok.lua").display()
        ),
        format!("{} http-request lua.a2\n", head("ok.lua")),
        format!("{} http-request lua.a2 x\n", head("ok.lua")),
        format!("{} http-request lua.a2 x y z\n", head("ok.lua")),
        format!("{} http-response lua.r x\n", head("ok.lua")),
        format!("{} http-request set-var(txn.x) lua.nope\n", head("ok.lua")),
        format!("{} http-request use-service lua.nope\n", head("ok.lua")),
        format!("{} http-request set-var(txn.x) str(a),lua.nope\n", head("ok.lua")),
        format!("{} http-request set-var(txn.x) lua.f,lua.c\n", head("ok.lua")),
        format!("{} http-request lua.a2 x y\n http-response lua.r\n", head("ok.lua")),
        "global\n tune.lua.session-timeout x\n".to_string(),
        "global\n tune.lua.forced-yield\n".to_string(),
        "global\n tune.lua.forced-yield 12x\n".to_string(),
        "global\n tune.lua.maxmem\n".to_string(),
        "global\n tune.lua.maxmem 12x\n".to_string(),
        "global\n lua-prepend-path /x/?.lua cpath\n tune.lua.maxmem 64\n tune.lua.task-timeout 1s\n".to_string(),
    ];
    for (i, text) in cases.iter().enumerate() {
        let cfg = d.join(format!("c{i}.cfg"));
        std::fs::write(&cfg, text).unwrap();
        let run = |bin: &str| {
            let out = Command::new(bin)
                .arg("-c")
                .arg("-f")
                .arg(&cfg)
                .current_dir(d)
                .output()
                .expect("run -c");
            let text = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            let lines: Vec<String> = text
                .lines()
                .filter(|l| l.starts_with("[ALERT]") || l.starts_with("[WARNING]"))
                .filter(|l| !l.contains("Fatal errors found") && !l.contains("Error(s) found"))
                .map(|l| {
                    // "[ALERT]    (1234) : config : msg" -> "[ALERT] msg"
                    let (tag, rest) = l.split_once(' ').unwrap_or((l, ""));
                    let rest = rest.split_once(") : ").map_or(rest, |(_, r)| r);
                    format!("{tag} {}", rest.trim_start_matches("config : "))
                })
                .collect();
            (out.status.code(), lines)
        };
        let theirs = run(HAPROXY);
        let ours = run(env!("CARGO_BIN_EXE_portcullis"));
        assert_eq!(ours, theirs, "case {i}:\n{text}");
    }
}

const TCP_SCRIPT: &str = r#"
core.register_action("note", { "tcp-req" }, function(txn, what)
  -- Fetches work in a tcp-request content action too.
  if txn.f:src() == "127.0.0.3" then txn:done() end
end, 1)
"#;

/// `tcp-request content lua.<name>` in `mode tcp`: an action that ends the session closes it
/// before anything reaches the server; the others let the connection through.
#[test]
fn tcp_request_content_actions_as_haproxy() {
    use std::io::{Read, Write};
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} is not installed: Lua tcp-request test skipped");
        return;
    }
    let run = |haproxy: bool| -> Vec<Vec<u8>> {
        let dir = TempDir::new("lua-tcp");
        std::fs::write(dir.0.join("t.lua"), TCP_SCRIPT).unwrap();
        let echo = backend::TcpEcho::start(lo(0)).expect("echo");
        let port = free_port();
        let cfg = format!(
            "global\n    lua-load {}\n\
             defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
             frontend fe\n    bind 127.0.0.1:{port}\n\
             \x20   tcp-request content lua.note x\n\
             \x20   default_backend be\n\n\
             backend be\n    server s1 {}\n",
            dir.0.join("t.lua").display(),
            echo.addr()
        );
        let _p = if haproxy {
            Proc::haproxy(&cfg, lo(port)).expect("haproxy")
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        ["127.0.0.1", "127.0.0.3"]
            .iter()
            .map(|ip| {
                let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .unwrap();
                let from: std::net::SocketAddr = format!("{ip}:0").parse().unwrap();
                sock.bind(&from.into()).unwrap();
                sock.connect(&lo(port).into()).unwrap();
                let mut s: std::net::TcpStream = sock.into();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = s.write_all(b"ping\n");
                let mut got = vec![0u8; 5];
                let n = s.read(&mut got).unwrap_or(0);
                got.truncate(n);
                got
            })
            .collect()
    };
    let theirs = run(true);
    let ours = run(false);
    assert_eq!(ours, theirs);
    assert_eq!(ours, vec![b"ping\n".to_vec(), Vec::new()]);
}

const SERVICE_SCRIPT: &str = r#"
core.register_service("hello", "http", function(applet)
  local host = applet.headers["host"] and applet.headers["host"][0] or "-"
  applet:set_status(201, "Made")
  applet:add_header("X-Svc", applet.method)
  applet:add_header("content-type", "text/plain")
  applet:start_response()
  applet:send("hello " .. applet.path .. " " .. applet.qs .. " " .. host .. "\n")
  applet:send("from " .. applet.sf:src() .. "\n")
end)
core.register_service("sized", "http", function(applet)
  applet:add_header("content-length", "3")
  applet:start_response()
  applet:send("abc")
end)
"#;

/// The access-log line without what differs between two runs: the client port, the date, the
/// timers' values and the connection counters (whether the previous connection's close was
/// seen before the next accept is a race in both proxies).
fn normalize(line: &str) -> String {
    line.split(' ')
        .enumerate()
        .map(|(i, f)| match i {
            0 => f.rsplit_once(':').map_or(f, |(ip, _)| ip).to_string(),
            1 => "[date]".to_string(),
            4 => f
                .split('/')
                .map(|t| if t.starts_with('-') { t } else { "N" })
                .collect::<Vec<_>>()
                .join("/"),
            10 => "C".to_string(),
            _ => f.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `http-request use-service lua.<name>`: the applet's response bytes (chunked to HTTP/1.1
/// clients without a `content-length`, ended by the close for HTTP/1.0) and its log line.
#[test]
fn lua_services_answer_as_haproxy() {
    use std::io::{Read, Write};
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} is not installed: Lua service test skipped");
        return;
    }
    let requests = [
        "GET /a?b=1 HTTP/1.1\r\nHost: h.test\r\nConnection: close\r\n\r\n",
        "GET /sized HTTP/1.1\r\nHost: h.test\r\nConnection: close\r\n\r\n",
        "GET /a HTTP/1.0\r\n\r\n",
    ];
    let run = |haproxy: bool| -> (Vec<String>, Vec<String>) {
        let dir = TempDir::new("lua-svc");
        std::fs::write(dir.0.join("t.lua"), SERVICE_SCRIPT).unwrap();
        let port = free_port();
        let cfg = format!(
            "global\n    lua-load {}\n\
             defaults\n    mode http\n    log stdout format raw local0\n    option httplog\n\
             \x20   timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
             frontend fe\n    bind 127.0.0.1:{port}\n\
             \x20   http-request use-service lua.sized if {{ path /sized }}\n\
             \x20   http-request use-service lua.hello\n",
            dir.0.join("t.lua").display()
        );
        let p = if haproxy {
            Proc::haproxy(&cfg, lo(port)).expect("haproxy")
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        let mut answers = Vec::new();
        for raw in requests {
            let mut s = proxy::connect(lo(port));
            s.write_all(raw.as_bytes()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            // Until the close, or what arrived when the keep-alive connection goes quiet.
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                if got.ends_with(b"0\r\n\r\n") {
                    break;
                }
            }
            // HAProxy writes the applet's headers in its Lua table's order, which varies from
            // run to run: compare them sorted.
            let text = String::from_utf8_lossy(&got).into_owned();
            let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
            let mut lines: Vec<&str> = head.split("\r\n").collect();
            if lines.len() > 1 {
                lines[1..].sort_unstable();
            }
            answers.push(format!("{}\r\n\r\n{body}", lines.join("\r\n")));
        }
        // Generous: on a loaded machine a line can take a while to come through the pipe.
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let gets = |p: &Proc| {
            p.log_lines()
                .iter()
                .filter(|l| l.contains("\"GET "))
                .count()
        };
        while gets(&p) < requests.len() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut logs: Vec<String> = p
            .log_lines()
            .iter()
            .filter(|l| l.contains("\"GET "))
            .map(|l| normalize(l))
            .collect();
        // A line is written when its connection ends, in either order.
        logs.sort();
        (answers, logs)
    };
    let theirs = run(true);
    let ours = run(false);
    assert_eq!(ours.0, theirs.0, "responses");
    assert_eq!(ours.1, theirs.1, "log lines");
    assert!(
        ours.0[0].contains("transfer-encoding: chunked"),
        "{:?}",
        ours.0
    );
    assert!(
        ours.1.iter().any(|l| l.contains("fe/<lua.hello>")),
        "{:?}",
        ours.1
    );
}
