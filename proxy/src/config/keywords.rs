//! Every keyword of the parser's tables, with the status the table records: the list
//! `docs/compatibility.md`'s keyword index must match (the test below fails when either side
//! has a keyword the other lacks), and what `portcullis -dK` prints.

use super::{kw_global, kw_peers, kw_proxy, kw_rules, kw_server, parser};

/// One keyword: the table it is in, its name, and its status when the table records one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Keyword {
    pub table: &'static str,
    pub name: &'static str,
    pub status: Option<Status>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Supported,
    /// `-c` accepts it; the start is refused, naming the line.
    Parsed,
    /// `-c` refuses it (a section kind portcullis does not have).
    Refused,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Supported => "supported",
            Status::Parsed => "parsed",
            Status::Refused => "refused",
        }
    }

    fn pending(p: bool) -> Option<Status> {
        Some(if p { Status::Parsed } else { Status::Supported })
    }
}

fn kw(table: &'static str, name: &'static str, status: Option<Status>) -> Keyword {
    Keyword {
        table,
        name,
        status,
    }
}

/// The tables, in the order the index lists them.
pub fn all() -> Vec<Keyword> {
    let mut v = Vec::new();
    for s in [
        "global",
        "defaults",
        "frontend",
        "backend",
        "listen",
        "http-errors",
        "userlist",
        "program",
        "resolvers",
    ] {
        v.push(kw("section", s, Some(Status::Supported)));
    }
    v.push(kw("section", "peers", Some(Status::Supported)));
    for s in parser::UNSUPPORTED_SECTIONS {
        v.push(kw("section", s, Some(Status::Refused)));
    }
    v.extend(kw_peers::PEERS_KWS.iter().map(|n| kw("peers", n, None)));
    v.extend(
        kw_global::GLOBAL_KWS
            .iter()
            .map(|k| kw("global", k.kw, Status::pending(k.pending))),
    );
    v.extend(kw_proxy::PROXY_KWS.iter().map(|k| kw("proxy", k.kw, None)));
    v.extend(
        kw_proxy::OPTIONS
            .iter()
            .map(|(n, _, p)| kw("option", n, Status::pending(*p))),
    );
    v.extend(
        kw_proxy::TIMEOUTS
            .iter()
            .map(|(n, _)| kw("timeout", n, None)),
    );
    v.extend(kw_proxy::BIND_OPTS.iter().map(|n| kw("bind", n, None)));
    v.extend(kw_server::SRV_KWS.iter().map(|k| kw("server", k.kw, None)));
    v.extend(
        kw_rules::HTTP_ACTIONS
            .iter()
            .map(|n| kw("http-request", n, None)),
    );
    v.extend(
        kw_rules::HTTP_RESPONSE_ACTIONS
            .iter()
            .map(|n| kw("http-response", n, None)),
    );
    v.extend(
        kw_rules::HTTP_AFTER_RESPONSE_ACTIONS
            .iter()
            .map(|n| kw("http-after-response", n, None)),
    );
    v
}

/// `-dK<class>[,<class>…]`, in `haproxy -dK`'s layout. portcullis has the `cfg` class (and
/// `all`, the same here); HAProxy's other classes (acl, cli, cnv, flt, smp, svc) have no table
/// here and are refused rather than printed empty.
pub fn dump(classes: &str) -> Result<String, String> {
    let mut out = String::new();
    for class in classes.split(',') {
        match class {
            "help" | "" => out.push_str(
                "# List of supported keyword classes:\n\
                 all: list all keywords\n\
                 cfg: configuration keywords\n",
            ),
            "cfg" | "all" => dump_cfg(&mut out),
            other => {
                return Err(format!(
                    "[ALERT]    (1) : -dK: keyword class '{other}' is not listed by portcullis (use 'help' for the list)."
                ));
            }
        }
    }
    Ok(out)
}

fn dump_cfg(out: &mut String) {
    out.push_str("# List of registered configuration keywords:\n");
    out.push_str("global\n");
    for k in kw_global::GLOBAL_KWS {
        out.push_str(&format!("\t{}\n", k.kw));
    }
    out.push_str("listen\n");
    for k in kw_proxy::PROXY_KWS {
        out.push_str(&format!("\t{}\n", k.kw));
    }
    for o in kw_proxy::BIND_OPTS {
        out.push_str(&format!("\tbind <addr> {o}\n"));
    }
    for k in kw_server::SRV_KWS {
        let args = if k.args > 0 {
            format!(" +{}", k.args)
        } else {
            String::new()
        };
        out.push_str(&format!("\tserver <name> <addr> {}{args}\n", k.kw));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/compatibility.md");

    /// The index rows `| <table> | `<keyword>` | <status> |` after the "## Keyword index" heading.
    fn index_rows(doc: &str) -> Vec<(String, String, String)> {
        let Some(start) = doc.find("\n## Keyword index") else {
            return Vec::new();
        };
        doc[start + 1..]
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("## "))
            .filter_map(|l| {
                let cells: Vec<&str> = l
                    .trim()
                    .strip_prefix('|')?
                    .strip_suffix('|')?
                    .split('|')
                    .collect();
                let [t, k, s] = cells.as_slice() else {
                    return None;
                };
                let k = k.trim().strip_prefix('`')?.strip_suffix('`')?;
                Some((t.trim().to_string(), k.to_string(), s.trim().to_string()))
            })
            .collect()
    }

    #[test]
    fn compat_doc_lists_every_keyword_of_the_tables() {
        let doc = std::fs::read_to_string(DOC).unwrap_or_default();
        assert!(
            doc.contains("\n## Keyword index"),
            "{DOC} has no '## Keyword index'"
        );
        let rows = index_rows(&doc);
        let documented: BTreeSet<(String, String)> = rows
            .iter()
            .map(|(t, k, _)| (t.clone(), k.clone()))
            .collect();
        let tables = all();
        let known: BTreeSet<(String, String)> = tables
            .iter()
            .map(|k| (k.table.to_string(), k.name.to_string()))
            .collect();
        let line = |t: &str, k: &str| {
            let st = tables
                .iter()
                .find(|x| x.table == t && x.name == k)
                .and_then(|x| x.status)
                .map_or("supported", Status::as_str);
            format!("| {t} | `{k}` | {st} |")
        };
        let missing: Vec<String> = known
            .difference(&documented)
            .map(|(t, k)| line(t, k))
            .collect();
        let stale: Vec<String> = documented
            .difference(&known)
            .map(|(t, k)| format!("| {t} | `{k}` |"))
            .collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "docs/compatibility.md's keyword index and the parser's tables differ.\n\
             In the tables, not in the doc (add these rows, and a line in the directive table):\n{}\n\
             In the doc, not in the tables (remove them):\n{}",
            missing.join("\n"),
            stale.join("\n")
        );
        // Where a table records the status, the doc must say the same.
        for k in &tables {
            let Some(want) = k.status.map(Status::as_str) else {
                continue;
            };
            let got = rows
                .iter()
                .find(|(t, n, _)| t == k.table && n == k.name)
                .map(|(_, _, s)| s.as_str());
            assert_eq!(got, Some(want), "status of {} `{}`", k.table, k.name);
        }
    }

    #[test]
    fn dump_keywords() {
        let d = dump("cfg").unwrap();
        assert!(d.starts_with("# List of registered configuration keywords:\nglobal\n\tdaemon\n"));
        assert!(d.contains("\nlisten\n\tacl\n"));
        assert!(d.contains("\tbind <addr> crt\n"));
        assert!(d.contains("\tserver <name> <addr> inter +1\n"));
        assert!(d.contains("\tserver <name> <addr> backup\n"));
        assert!(
            dump("help")
                .unwrap()
                .contains("cfg: configuration keywords")
        );
        assert!(dump("cfg,smp").unwrap_err().contains("'smp'"));
    }

    #[test]
    fn index_rows_parse() {
        let doc = "x\n## Keyword index\n\n| table | keyword | status |\n| --- | --- | --- |\n\
                   | global | `daemon` | supported |\n| option | `abortonclose` | parsed |\n\n## Next\n| a | `b` | c |\n";
        assert_eq!(
            index_rows(doc),
            vec![
                ("global".into(), "daemon".into(), "supported".into()),
                ("option".into(), "abortonclose".into(), "parsed".into()),
            ]
        );
    }
}
