//! `cargo xtask demo`: the seed config (`seed-loopback.cfg`) on loopback, against fake nodes.
//!
//! Starts the three seed nodes in-process (127.0.1.12–14: data on :30080, health on :30180,
//! TcpEcho on 127.0.1.12:6443 and 127.0.1.13/14:31443), writes a variant of the seed config
//! without the directives portcullis cannot run yet ([`NOT_YET`]), runs
//! `portcullis -f <generated> -db` and waits. Ctrl-C reaches the whole process group, so it
//! stops portcullis and, with this process, the nodes.
//!
//! `--haproxy` runs HAProxy instead, on the seed config with nothing stripped (TLS needs
//! `openssl`), to compare behaviours.

use crate::backend::{HealthNode, HttpNode, HttpOpts, TcpEcho};
use crate::util::{Result, exec, have, root, target_dir};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A directive portcullis cannot run yet, removed from the generated config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A word of `bind` lines and how many arguments follow it.
    BindOpt(&'static str, usize),
}

/// What the demo strips today. Delete a row when portcullis runs that feature.
pub const NOT_YET: &[Rule] = &[];

/// Also stripped when no certificate could be made (no `openssl`).
const NO_TLS: &[Rule] = &[
    Rule::BindOpt("ssl", 0),
    Rule::BindOpt("crt", 1),
    Rule::BindOpt("alpn", 1),
];

/// Embedded copy, used when `../shared/configs/seed-loopback.cfg` is not beside the repo.
const SEED_COPY: &str = include_str!("seed-loopback.cfg");

/// Splits a config line into words, keeping quoted words (quotes included) whole.
fn words(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = None;
    let mut quote = None;
    for (i, ch) in line.char_indices() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => {
                quote = Some(ch);
                start.get_or_insert(i);
            }
            (None, c) if c.is_whitespace() => {
                if let Some(s) = start.take() {
                    out.push(&line[s..i]);
                }
            }
            (None, '#') if start.is_none() => break,
            (None, _) => {
                start.get_or_insert(i);
            }
        }
    }
    if let Some(s) = start {
        out.push(&line[s..]);
    }
    out
}

/// Removes what `rules` name from `cfg`. Returns the new text and, in order of first
/// appearance, each stripped item with its count.
pub fn strip(cfg: &str, rules: &[Rule]) -> (String, Vec<(String, usize)>) {
    let mut out = String::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut note = |label: String| {
        if !counts.contains_key(&label) {
            order.push(label.clone());
        }
        *counts.entry(label).or_insert(0) += 1;
    };
    for line in cfg.lines() {
        let w = words(line);
        let Some(first) = w.first() else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let opts = |r: &Rule| match (*first, r) {
            ("bind", Rule::BindOpt(word, n)) => Some((*word, *n)),
            _ => None,
        };
        if !rules.iter().any(|r| opts(r).is_some()) {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // bind <addr> / server <name> <addr>: options start after the fixed words.
        let fixed = if *first == "bind" { 2 } else { 3 };
        let mut kept: Vec<&str> = w.iter().take(fixed).copied().collect();
        let mut i = fixed;
        while let Some(word) = w.get(i) {
            match rules.iter().filter_map(opts).find(|(o, _)| o == word) {
                Some((o, n)) => {
                    note(format!("{first} {o}"));
                    i += 1 + n;
                }
                None => {
                    kept.push(word);
                    i += 1;
                }
            }
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        out.push_str(indent);
        out.push_str(&kept.join(" "));
        out.push('\n');
    }
    let items = order
        .into_iter()
        .map(|l| {
            let n = counts.get(&l).copied().unwrap_or(0);
            (l, n)
        })
        .collect();
    (out, items)
}

/// `stats ×2, frontend stats, server check ×6` — the one line the demo prints.
pub fn summary(items: &[(String, usize)]) -> String {
    if items.is_empty() {
        return "nothing".into();
    }
    items
        .iter()
        .map(|(l, n)| {
            if *n > 1 {
                format!("{l} ×{n}")
            } else {
                l.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn seed_config() -> (String, String) {
    let path = root().join("../shared/configs/seed-loopback.cfg");
    match std::fs::read_to_string(&path) {
        Ok(text) => (text, path.display().to_string()),
        Err(_) => (
            SEED_COPY.to_string(),
            "embedded copy of seed-loopback.cfg".into(),
        ),
    }
}

/// A self-signed PEM bundle (certificate + key) for 127.0.0.1, made once per run dir.
pub(crate) fn make_cert(dir: &Path) -> Option<PathBuf> {
    let bundle = dir.join("demo.pem");
    if bundle.exists() {
        return Some(bundle);
    }
    if !have("openssl") {
        return None;
    }
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "365",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        return None;
    }
    let pem = std::fs::read_to_string(&cert).ok()? + &std::fs::read_to_string(&key).ok()?;
    std::fs::write(&bundle, pem).ok()?;
    Some(bundle)
}

fn addr(s: &str) -> Result<SocketAddr> {
    s.parse().map_err(|e| format!("{s}: {e}"))
}

pub fn run(args: &[String]) -> Result {
    let haproxy = match args {
        [] => false,
        [a] if a == "--haproxy" => true,
        _ => return Err("usage: cargo xtask demo [--haproxy]".into()),
    };
    let run_dir = target_dir().join("xtask-demo");
    std::fs::create_dir_all(&run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;

    // The nodes live as long as this function, so until Ctrl-C.
    let mut nodes_http = Vec::new();
    let mut nodes_health = Vec::new();
    let mut nodes_tcp = Vec::new();
    for (i, name) in [(12, "master1"), (13, "worker1"), (14, "worker2")] {
        let ip = format!("127.0.1.{i}");
        let http = HttpNode::start(addr(&format!("{ip}:30080"))?, HttpOpts::named(name))
            .map_err(|e| format!("data node {ip}:30080: {e}"))?;
        let health = HealthNode::start(addr(&format!("{ip}:30180"))?)
            .map_err(|e| format!("health node {ip}:30180: {e}"))?;
        nodes_http.push(http);
        nodes_health.push(health);
        let tcp_port = if i == 12 { 6443 } else { 31443 };
        let echo = TcpEcho::start(addr(&format!("{ip}:{tcp_port}"))?)
            .map_err(|e| format!("tcp echo {ip}:{tcp_port}: {e}"))?;
        nodes_tcp.push(echo);
    }
    println!(
        "demo: nodes up: master1/worker1/worker2 on 127.0.1.12-14 (http :30080, health :30180), \
         tcp echo on 127.0.1.12:6443 and 127.0.1.13-14:31443"
    );

    let cert = make_cert(&run_dir);
    let mut rules = if haproxy {
        Vec::new()
    } else {
        NOT_YET.to_vec()
    };
    if cert.is_none() {
        println!("demo: no openssl, TLS left out");
        rules.extend(NO_TLS.iter().filter(|r| !NOT_YET.contains(r)));
    }
    let tls = !rules.contains(&Rule::BindOpt("ssl", 0));
    let (seed, from) = seed_config();
    let (generated, items) = strip(&seed, &rules);
    let cfg_path = run_dir.join(if haproxy {
        "haproxy.cfg"
    } else {
        "portcullis.cfg"
    });
    std::fs::write(&cfg_path, generated).map_err(|e| format!("{}: {e}", cfg_path.display()))?;
    println!("demo: config {} (from {from})", cfg_path.display());
    println!("demo: left out (not supported yet): {}", summary(&items));

    let bin = if haproxy {
        crate::util::which("haproxy").ok_or("no haproxy on PATH")?
    } else {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        exec(
            Command::new(cargo)
                .args(["build", "--release", "-p", "portcullis"])
                .current_dir(root()),
        )?;
        target_dir().join("release/portcullis")
    };
    let mut cmd = Command::new(&bin);
    cmd.arg("-f").arg(&cfg_path).arg("-db");
    cmd.env("RUNDIR", &run_dir);
    cmd.env("CERT", cert.as_deref().unwrap_or(Path::new("")));
    println!("$ {}", crate::util::show(&cmd));
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;

    let https = if tls {
        "curl -k https://127.0.0.1:10443/      (TLS, round robin over the 3 nodes)"
    } else {
        "curl http://127.0.0.1:10443/          (plain http for now; round robin)"
    };
    println!("\ntry:");
    println!("  curl -v http://127.0.0.1:10080/x      (301 redirect to https)");
    println!("  {https}");
    println!("  socat - TCP:127.0.0.1:16443           (kube-apiserver: echoes what you type)");
    println!("  socat - TCP:127.0.0.1:18443           (istio grpc passthrough: echoes)");
    let sock = run_dir.join("admin.sock");
    println!("  echo 'show stat' | socat stdio {}", sock.display());
    println!("  curl http://127.0.0.1:19000/          (stats page; ;csv for CSV)");
    println!("Ctrl-C stops it and the nodes.\n");
    let status = child.wait().map_err(|e| e.to_string())?;
    let served: usize = nodes_http.iter().map(|n| n.request_count()).sum();
    Err(format!(
        "{} exited ({status}); the nodes served {served} request(s)",
        bin.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_quotes_and_drop_comments() {
        assert_eq!(
            words(r#"    bind 127.0.0.1:10443 ssl crt "${CERT}" alpn h2 # c"#),
            vec![
                "bind",
                "127.0.0.1:10443",
                "ssl",
                "crt",
                "\"${CERT}\"",
                "alpn",
                "h2"
            ]
        );
        assert_eq!(words("   "), Vec::<&str>::new());
        assert_eq!(words("a \"b c\" d"), vec!["a", "\"b c\"", "d"]);
    }

    #[test]
    fn strips_the_seed() {
        let (out, items) = strip(SEED_COPY, NO_TLS);
        let code: String = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(code.contains("stats enable"), "{out}");
        assert!(code.contains("stats socket"), "{out}");
        assert!(
            code.contains("option httpchk GET /health_check.html"),
            "{out}"
        );
        assert!(!code.contains("ssl crt"), "{out}");
        assert!(out.contains("    bind 127.0.0.1:10443\n"), "{out}");
        assert!(
            out.contains("    server master1 127.0.1.12:30080 check port 30180 inter 2s rise 2 fall 2 on-marked-down shutdown-sessions\n"),
            "{out}"
        );
        assert!(
            out.contains("    ssl-default-bind-options ssl-min-ver TLSv1.2"),
            "{out}"
        );
        assert!(out.contains("frontend istio-grpc-passthrough\n"), "{out}");
        assert_eq!(summary(&items), "bind ssl, bind crt, bind alpn");
    }

    #[test]
    fn nothing_to_strip_keeps_the_text() {
        let (out, items) = strip(SEED_COPY, &[]);
        assert_eq!(out, SEED_COPY);
        assert!(items.is_empty());
        assert_eq!(summary(&items), "nothing");
    }
}
