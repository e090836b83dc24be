//! The stats page and the Prometheus exporter with the real binary: a stats frontend, a
//! password-protected one, an exporter frontend and a backend with checked servers (one UP,
//! one DOWN, one backup). The page's tables and row classes, `;csv` against `show stat`, the
//! 401 challenge, the exporter parsed by a Prometheus text parser, the `<STATS>`/`<PROMEX>` log
//! lines, and headless Chromium rendering the page.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use backend::{HealthNode, HttpNode, HttpOpts, free_port};
use proxy::{Proc, TempDir, get, request};

fn cli(sock: &Path, cmd: &str) -> String {
    proxy::admin_cli(sock, cmd)
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `pxname/svname` → `status` from a `show stat` CSV.
fn status_of(csv: &str, px: &str, sv: &str) -> Option<String> {
    csv.lines().find_map(|l| {
        let f: Vec<&str> = l.split(',').collect();
        (f.first() == Some(&px) && f.get(1) == Some(&sv)).then(|| f[17].to_string())
    })
}

/// Columns that move with the clock or with the request itself (rates, times, ages), and the
/// legends (addr, cookie, algo) that HAProxy prints on an admin socket but not over HTTP without
/// `stats show-legends` (as seen on HAProxy 2.6.12).
const MOVING: &[usize] = &[23, 24, 33, 35, 38, 46, 47, 55, 73, 74, 76, 77, 78];

fn masked(csv: &str) -> Vec<String> {
    csv.lines()
        .filter(|l| !l.starts_with("stats,") && !l.is_empty())
        .map(|l| {
            l.split(',')
                .enumerate()
                // A check running at either moment reads `* <status>` there (HAProxy's
                // in-progress mark): the status compared is the last one.
                .map(|(i, f)| {
                    if MOVING.contains(&i) {
                        "*"
                    } else {
                        f.trim_start_matches("* ")
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect()
}

struct Setup {
    _dir: TempDir,
    sock: std::path::PathBuf,
    proc_: Proc,
    stats: SocketAddr,
    secure: SocketAddr,
    prom: SocketAddr,
    _nodes: Vec<(HttpNode, HealthNode)>,
}

fn setup() -> Setup {
    let dir = TempDir::new("stats-page");
    let sock = dir.0.join("admin.sock");
    let ip = |i: u8| IpAddr::from([127, 0, 1, 161 + i]);
    let mut nodes = Vec::new();
    for (i, name) in ["up1", "down1"].iter().enumerate() {
        let data = HttpNode::start(SocketAddr::new(ip(i as u8), 0), HttpOpts::named(name))
            .expect("data node");
        let h = HealthNode::start(SocketAddr::new(ip(i as u8), 0)).expect("health node");
        nodes.push((data, h));
    }
    nodes[1].1.set_healthy(false);
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let lo = |p| SocketAddr::from(([127, 0, 0, 1], p));
    let srv = |n: &str, i: usize, extra: &str| {
        format!(
            "    server {n} {} check port {} inter 200ms rise 1 fall 1{extra}\n",
            nodes[i].0.addr(),
            nodes[i].1.addr().port()
        )
    };
    let servers = srv("up1", 0, "") + &srv("down1", 1, "") + &srv("bk1", 0, " backup");
    let cfg = format!(
        "global\n    stats socket \"{sock}\" mode 600 level admin\n\n\
defaults\n    mode http\n    log stdout format raw local0\n    option httplog\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n    timeout check 5s\n\n\
frontend stats\n    bind 127.0.0.1:{p1}\n    stats enable\n    stats uri /\n    stats refresh 10s\n\n\
frontend secure\n    bind 127.0.0.1:{p2}\n    stats uri /admin?stats\n    stats realm Portcullis\\ Test\n    stats auth admin:secret\n    stats hide-version\n    stats admin if {{ src 127.0.0.1 }}\n\n\
frontend prom\n    bind 127.0.0.1:{p3}\n    http-request use-service prometheus-exporter if {{ path /metrics }}\n    default_backend app\n\n\
backend app\n    balance roundrobin\n    option httpchk GET /health_check.html\n{servers}",
        sock = sock.display()
    );
    let proc_ = Proc::portcullis(&cfg, lo(p1));
    wait_for("checks to settle", Duration::from_secs(10), || {
        let csv = cli(&sock, "show stat");
        status_of(&csv, "app", "up1").as_deref() == Some("UP")
            && status_of(&csv, "app", "down1").as_deref() == Some("DOWN")
            && status_of(&csv, "app", "bk1").as_deref() == Some("UP")
    });
    Setup {
        _dir: dir,
        sock,
        proc_,
        stats: lo(p1),
        secure: lo(p2),
        prom: lo(p3),
        _nodes: nodes,
    }
}

#[test]
fn stats_page_csv_auth_metrics_and_browser() {
    let s = setup();

    // The page: HAProxy's head and one title+counters table pair per proxy.
    let r = get(s.stats, "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control").as_deref(), Some("no-cache"));
    assert_eq!(r.header("content-type").as_deref(), Some("text/html"));
    assert_eq!(r.header("refresh").as_deref(), Some("10"));
    assert_eq!(r.header("transfer-encoding").as_deref(), Some("chunked"));
    let page = r.text();
    assert!(page.starts_with("<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 4.01 Transitional//EN\"\n"));
    assert!(page.ends_with("</body></html>\n"));
    for px in ["stats", "secure", "prom", "app"] {
        let title = format!(
            "<th class=\"pxname\" width=\"10%\"><a name=\"{px}\"></a><a class=px href=\"#{px}\">{px}</a></th>"
        );
        assert_eq!(page.matches(&title).count(), 1, "{px}");
    }
    assert_eq!(
        page.matches("<table class=\"tbl\" width=\"100%\">").count(),
        8
    );
    for (sv, class) in [
        ("up1", "active_up"),
        ("down1", "active_down"),
        ("bk1", "backup_up"),
    ] {
        let row = format!("<tr class=\"{class}\"><td class=ac><a name=\"app/{sv}\"></a>");
        assert!(page.contains(&row), "{row}");
    }
    assert!(
        page.contains("<td class=ac>Backend</a>")
            || page.contains("href=\"#app/Backend\">Backend</a>")
    );
    assert!(
        page.contains("HAProxy version "),
        "version shown without hide-version"
    );

    // `;csv` is `show stat` at the same moment, up to the clock and the stats frontend itself.
    let csv = get(s.stats, "/;csv");
    assert_eq!(csv.status, 200);
    assert_eq!(csv.header("content-type").as_deref(), Some("text/plain"));
    let sock_csv = cli(&s.sock, "show stat");
    assert_eq!(masked(&csv.text()), masked(&sock_csv));
    // `scope=` narrows the CSV to the proxies whose name contains it (reg-test
    // webstats-scope-and-post-change): the header line, then `app` rows only.
    let scoped = get(s.stats, "/?;csv;scope=app").text();
    let names: Vec<&str> = scoped
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next())
        .filter(|n| !n.is_empty())
        .collect();
    assert!(scoped.starts_with("# pxname,svname,"), "{scoped}");
    assert!(
        !names.is_empty() && names.iter().all(|n| *n == "app"),
        "{scoped}"
    );
    assert!(
        !get(s.stats, "/;csv;scope=nomatch")
            .text()
            .contains("\napp,")
    );

    // `stats auth`: 401 with the realm, then 200 with the credentials.
    let r = get(s.secure, "/admin?stats");
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate").as_deref(),
        Some("Basic realm=\"Portcullis Test\"")
    );
    assert_eq!(r.header("cache-control").as_deref(), Some("no-cache"));
    assert_eq!(
        r.text(),
        "<html><body><h1>401 Unauthorized</h1>\nYou need a valid user and password to access this content.\n</body></html>\n"
    );
    let with = |cred: &str| {
        request(
            s.secure,
            &format!(
                "GET /admin?stats HTTP/1.1\r\nHost: t\r\nAuthorization: Basic {cred}\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    // admin:wrong, then admin:secret
    assert_eq!(with("YWRtaW46d3Jvbmc=").status, 401);
    let ok = with("YWRtaW46c2VjcmV0");
    assert_eq!(ok.status, 200);
    assert!(ok.header("refresh").is_none());
    assert!(
        ok.text()
            .contains("style=\"text-decoration: none;\">HAProxy</a></h1>")
    );

    // The exporter, through a real Prometheus text parser.
    let m = get(s.prom, "/metrics");
    assert_eq!(m.status, 200);
    assert_eq!(
        m.header("content-type").as_deref(),
        Some("text/plain; version=0.0.4")
    );
    let text = m.text();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("exposition parses");
    let status = |sv: &str, state: &str| -> f64 {
        let smp = scrape
            .samples
            .iter()
            .find(|x| {
                x.metric == "haproxy_server_status"
                    && x.labels.get("proxy") == Some("app")
                    && x.labels.get("server") == Some(sv)
                    && x.labels.get("state") == Some(state)
            })
            .unwrap_or_else(|| panic!("haproxy_server_status for {sv}/{state}"));
        match smp.value {
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
            ref v => panic!("unexpected {v:?}"),
        }
    };
    assert_eq!(status("up1", "UP"), 1.0);
    assert_eq!(status("down1", "DOWN"), 1.0);
    assert_eq!(status("down1", "UP"), 0.0);
    assert_eq!(status("bk1", "UP"), 1.0);
    assert!(scrape.docs.contains_key("haproxy_backend_status"));
    assert!(
        scrape
            .samples
            .iter()
            .any(|x| x.metric == "haproxy_frontend_current_sessions"
                && x.labels.get("proxy") == Some("prom"))
    );

    // Logs as HAProxy 2.6 writes them.
    // Sessions log once their reply is sent: the page's line may come after the CSV's.
    backend::wait_until(Duration::from_secs(5), || {
        s.proc_
            .log_lines()
            .iter()
            .any(|l| l.contains("stats stats/<STATS> ") && l.ends_with("\"GET / HTTP/1.1\""))
    });
    let line = s
        .proc_
        .log_lines()
        .into_iter()
        .find(|l| l.contains("stats stats/<STATS> ") && l.ends_with("\"GET / HTTP/1.1\""))
        .expect("stats log line");
    assert!(
        // Tw/Tc/Tr are 0 for an applet; TR is how long the request took to come (0 unless the
        // machine is busy) and Ta however long the page took.
        applet_timers(&line) && line.contains(" 200 ") && line.contains(" LR-- "),
        "{line}"
    );
    assert!(line.ends_with("\"GET / HTTP/1.1\""), "{line}");
    let line = s
        .proc_
        .wait_log("secure secure/<STATS> 0/0/0/-1/", Duration::from_secs(5))
        .expect("401 log line");
    assert!(line.contains(" 400 ") && line.contains(" LR-- "), "{line}");
    let line = s
        .proc_
        .wait_log("prom prom/<PROMEX> ", Duration::from_secs(5))
        .expect("exporter log line");
    assert!(
        line.contains(" 200 ") && line.ends_with("\"GET /metrics HTTP/1.1\""),
        "{line}"
    );

    browser(&s);
}

/// Headless Chromium renders the page: a real screenshot and a DOM with the tables and states.
fn browser(s: &Setup) {
    let bin = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| std::process::Command::new(b).arg("--version").output().is_ok())
        .unwrap_or_else(|| {
            panic!("chromium is required for the stats page test (`cargo xtask setup` installs the Debian package)")
        });
    let dir = TempDir::new("stats-chromium");
    let png = dir.0.join("stats.png");
    let url = format!("http://{}/", s.stats);
    let base = |extra: &[String]| {
        let mut c = std::process::Command::new(bin);
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.0.join("profile").display()
        ))
        .args(extra)
        .arg(&url);
        c
    };
    let out = base(&[
        format!("--screenshot={}", png.display()),
        "--window-size=1400,900".into(),
    ])
    .output()
    .expect("run chromium");
    let meta = std::fs::metadata(&png).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        meta.len() > 20_000,
        "screenshot too small: {} bytes",
        meta.len()
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    if let Ok(keep) = std::env::var("STATS_SCREENSHOT") {
        let _ = std::fs::copy(&png, keep);
    }
    let dom = base(&["--dump-dom".into()]).output().expect("run chromium");
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert_eq!(dom.matches("class=\"pxname\"").count(), 4, "{dom}");
    assert_eq!(dom.matches("<table class=\"tbl\"").count(), 8);
    for (sv, class, state) in [
        ("up1", "active_up", "UP"),
        ("down1", "active_down", "DOWN"),
        ("bk1", "backup_up", "UP"),
    ] {
        let i = dom
            .find(&format!("<a name=\"app/{sv}\">"))
            .unwrap_or_else(|| panic!("{sv} row in DOM"));
        let row_start = dom[..i].rfind("<tr").unwrap();
        // Server rows end with a newline; the tooltip tables inside them do not.
        let row_end = i + dom[i..].find("</tr>\n").unwrap();
        let row = &dom[row_start..row_end];
        assert!(row.starts_with(&format!("<tr class=\"{class}\">")), "{row}");
        assert!(row.contains(&format!(" {state}</td>")), "{sv}: {row}");
    }
}

/// `stats admin`: the page's form changes servers as HAProxy's does, answering 303 back to the
/// page with the outcome; a page without admin rights answers `;st=DENY` and changes nothing.
#[test]
fn stats_admin_form_changes_servers() {
    let s = setup();
    let auth = "Authorization: Basic YWRtaW46c2VjcmV0\r\n";
    let post = |addr: SocketAddr, path: &str, body: &str, auth: &str| {
        proxy::request(
            addr,
            &format!(
                "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    let page = proxy::request(
        s.secure,
        &format!("GET /admin?stats HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
    );
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(
        html.contains("<input class='app-checkbox' type=\"checkbox\" name=\"s\" value=\"up1\">")
    );
    assert!(html.contains("<option value=\"drain\">Set state to DRAIN</option>"));
    // The plain page has no form.
    let plain = proxy::get(s.stats, "/");
    assert!(!plain.text().contains("checkbox"));

    let r = post(s.secure, "/admin?stats", "s=up1&action=drain&b=app", auth);
    assert_eq!(r.status, 303);
    assert_eq!(
        r.header("location").as_deref(),
        Some("/admin?stats;st=DONE")
    );
    assert_eq!(
        status_of(&cli(&s.sock, "show stat"), "app", "up1").as_deref(),
        Some("DRAIN")
    );
    let done = proxy::request(
        s.secure,
        &format!("GET /admin?stats;st=DONE HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
    );
    assert!(done.text().contains("Action processed successfully."));
    // Unknown server only → ERRP; one known, one unknown → PART; no server → NONE.
    for (body, code) in [
        ("s=nope&action=maint&b=app", "ERRP"),
        ("s=nope&s=bk1&action=maint&b=app", "PART"),
        ("action=maint&b=app", "NONE"),
        ("s=up1&action=bogus&b=app", "ERRP"),
        ("s=up1&action=maint&b=nobe", "ERRP"),
    ] {
        let r = post(s.secure, "/admin?stats;up", body, auth);
        assert_eq!(
            r.header("location").as_deref(),
            Some(format!("/admin?stats;st={code};up").as_str()),
            "{body}"
        );
    }
    assert_eq!(
        status_of(&cli(&s.sock, "show stat"), "app", "bk1").as_deref(),
        Some("MAINT")
    );
    // `b=#<id>` as the page's hidden field sends it, and the old `enable` action.
    let csv = cli(&s.sock, "show stat");
    let iid = csv
        .lines()
        .find(|l| l.starts_with("app,BACKEND,"))
        .and_then(|l| l.split(',').nth(27))
        .expect("iid")
        .to_string();
    let r = post(
        s.secure,
        "/admin?stats",
        &format!("s=bk1&s=up1&action=ready&b=%23{iid}"),
        auth,
    );
    assert_eq!(
        r.header("location").as_deref(),
        Some("/admin?stats;st=DONE")
    );
    let csv = cli(&s.sock, "show stat");
    assert_eq!(status_of(&csv, "app", "up1").as_deref(), Some("UP"));
    assert_eq!(status_of(&csv, "app", "bk1").as_deref(), Some("UP"));
    // No admin rights on the other page: denied, nothing changed.
    let r = post(s.stats, "/", "s=up1&action=maint&b=app", "");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location").as_deref(), Some("/;st=DENY"));
    assert_eq!(
        status_of(&cli(&s.sock, "show stat"), "app", "up1").as_deref(),
        Some("UP")
    );
    // Without credentials the POST is challenged like the page.
    let r = post(s.secure, "/admin?stats", "s=up1&action=maint&b=app", "");
    assert_eq!(r.status, 401);
    assert_eq!(
        status_of(&cli(&s.sock, "show stat"), "app", "up1").as_deref(),
        Some("UP")
    );
}

/// `stats show-legends`, `show-node`, `show-desc`: the same title line and name tooltips as
/// HAProxy 2.6 serves for the same configuration.
#[test]
fn stats_legends_node_and_desc_as_haproxy() {
    let grab = |haproxy: bool| -> Option<Vec<String>> {
        let port = free_port();
        let front = SocketAddr::from(([127, 0, 0, 1], port));
        let cfg = format!(
            "global\n    description the global one\n\ndefaults\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\n\
             frontend f\n    mode http\n    bind 127.0.0.1:{port}\n    stats enable\n    stats uri /\n    stats show-legends\n    stats show-node lb-one\n    stats show-desc\n\n\
             backend b\n    mode tcp\n    balance leastconn\n    server a 127.0.0.1:1\n    server v6 [::1]:80 id 7\n\n\
             listen l\n    mode http\n    bind 127.0.0.1:{}\n    balance source\n    server x 127.0.0.1:2 disabled\n",
            free_port()
        );
        let _p = if haproxy {
            Proc::haproxy(&cfg, front)?
        } else {
            Proc::portcullis(&cfg, front)
        };
        let page = get(front, "/").text();
        let mut got: Vec<String> = Vec::new();
        for line in page.lines().filter(|l| l.starts_with("<h2>")) {
            let masked: String = line
                .split(' ')
                .map(|w| {
                    if w.chars().all(|c| c.is_ascii_digit()) {
                        "N"
                    } else {
                        w
                    }
                })
                .collect::<Vec<_>>()
                .join(" ");
            got.push(masked);
        }
        let mut rest = page.as_str();
        while let Some(i) = rest.find("<u><a ") {
            let tail = &rest[i..];
            let end = tail.find("</u>").map_or(tail.len(), |e| e + 4);
            let cell = &tail[..end];
            if cell.contains("cap: ")
                || cell.contains("balancing: ")
                || cell.contains(", id: ")
                || cell.contains("id: ")
            {
                got.push(cell.to_string());
            }
            rest = &tail[end.min(tail.len())..];
        }
        // Backend rows open <u> before the anchor name.
        let mut rest = page.as_str();
        while let Some(i) = rest.find("<td class=ac><u><a name=") {
            let tail = &rest[i..];
            let end = tail.find("</td>").map_or(tail.len(), |e| e + 5);
            got.push(tail[..end].to_string());
            rest = &tail[end..];
        }
        Some(got)
    };
    let ours = grab(false).expect("portcullis");
    let Some(theirs) = grab(true) else { return };
    assert!(ours.len() >= 8, "{ours:#?}");
    assert_eq!(ours, theirs);
}

/// The log line's timers read `TR/0/0/0/Ta`, as HAProxy logs an applet's transaction.
fn applet_timers(line: &str) -> bool {
    line.split(' ').any(|f| {
        let t: Vec<&str> = f.split('/').collect();
        t.len() == 5
            && t.iter()
                .all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()))
            && t[1..4] == ["0", "0", "0"]
    })
}
