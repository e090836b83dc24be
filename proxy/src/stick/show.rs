//! `show table [<name> [key <k>|data.<type> <op> <v>]*]` and `clear table <name> [filter]*`,
//! answered in HAProxy 2.6's words (see runtime-api/testdata/haproxy-2.6/stick-table-replies.txt).
//! The replies here have no final empty line: the CLI adds it.

use std::fmt::Write as _;

use super::{Entry, FreqCtr, Key, StickData, Table, Tables, Val, key};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Le,
    Ge,
    Lt,
    Gt,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "eq" => Op::Eq,
            "ne" => Op::Ne,
            "le" => Op::Le,
            "ge" => Op::Ge,
            "lt" => Op::Lt,
            "gt" => Op::Gt,
            _ => return None,
        })
    }
    fn holds(self, a: u64, b: i64) -> bool {
        let a = i128::from(a);
        let b = i128::from(b);
        match self {
            Op::Eq => a == b,
            Op::Ne => a != b,
            Op::Le => a <= b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Gt => a > b,
        }
    }
}

/// What the filter words asked for.
#[derive(Debug, Default)]
struct Filter {
    /// `key <k>`: `Err(())` for a key this table cannot hold (nothing matches).
    key: Option<Option<Key>>,
    data: Vec<(StickData, Op, i64)>,
}

const SHOW_USAGE: &str =
    "Optional argument only supports \"data.<store_data_type>\" <operator> <value> and key <key>\n";
const CLEAR_USAGE: &str = "Required arguments: <table> \"data.<store_data_type>\" <operator> <value> or <table> key <key>\n";

/// Parses the words after the table name; Err is the reply.
fn parse_filter(t: &Table, words: &[&str], clear: bool) -> Result<Filter, String> {
    let mut f = Filter::default();
    let mut i = 0;
    while let Some(w) = words.get(i) {
        if *w == "key" {
            let Some(k) = words.get(i + 1).filter(|k| !k.is_empty()) else {
                return Err("Key value expected\n".into());
            };
            if f.key.is_none() {
                let what = if clear {
                    "Removing keys from"
                } else {
                    "Showing keys from"
                };
                f.key = Some(key::parse_cli(t.key, k, what)?);
            }
            i += 2;
        } else if let Some(name) = w.strip_prefix("data.") {
            let n = f.data.len() + 1;
            let Some(d) = StickData::from_name(name) else {
                return Err(format!("Filter entry #{n}: Unknown data type\n"));
            };
            if !t.store.has(d) {
                return Err(format!(
                    "Filter entry #{n}: Data type not stored in this table\n"
                ));
            }
            let Some(op) = words.get(i + 1).and_then(|o| Op::parse(o)) else {
                return Err(format!(
                    "Filter entry #{n}: Require and operator among \"eq\", \"ne\", \"le\", \"ge\", \"lt\", \"gt\"\n"
                ));
            };
            let Some(v) = words.get(i + 2).and_then(|v| v.parse::<i64>().ok()) else {
                return Err(format!(
                    "Filter entry #{n}: Require a valid integer value to compare against\n"
                ));
            };
            f.data.push((d, op, v));
            i += 3;
        } else {
            return Err(if clear { CLEAR_USAGE } else { SHOW_USAGE }.into());
        }
    }
    Ok(f)
}

fn matches(t: &Table, f: &Filter, key: &Key, e: &Entry, now: u64) -> bool {
    f.data
        .iter()
        .all(|(d, op, v)| op.holds(e.value(&t.store, *d, now), *v))
        && f.key.as_ref().is_none_or(|k| k.as_ref() == Some(key))
}

fn header(t: &Table, out: &mut String) {
    let _ = writeln!(
        out,
        "# table: {}, type: {}, size:{}, used:{}",
        t.name,
        t.key.name(),
        t.size,
        t.used()
    );
}

/// One entry line, as HAProxy 2.6 dumps it.
pub fn entry_line(t: &Table, k: &Key, e: &Entry, now: u64, out: &mut String) {
    let exp = match t.expire_ms {
        Some(_) => e.expire_at.saturating_sub(now),
        None => 0,
    };
    let _ = write!(
        out,
        "{:#x}: key={} use={} exp={exp}",
        e.id,
        key::text(t.key, k),
        e.refs
    );
    // HAProxy's data order: server_id first, server_key last.
    if e.server.is_some() || t.store.has_server_id() {
        let id = e.server.as_ref().map_or(0, |(id, _)| *id);
        let _ = write!(out, " server_id={id}");
    }
    for d in t.store.types() {
        for i in 0..t.store.count(d) {
            let v = e.value_at(&t.store, d, i, now);
            // An array's elements are numbered: `gpt0=`, `gpc1=`, `gpc0_rate(<p>)=`.
            let name = match d {
                StickData::Gpt => format!("gpt{i}"),
                StickData::Gpc => format!("gpc{i}"),
                StickData::GpcRate => format!("gpc{i}_rate"),
                _ => d.name().to_string(),
            };
            match t.store.period(d) {
                Some(p) => {
                    let _ = write!(out, " {name}({p})={v}");
                }
                None => {
                    let _ = write!(out, " {name}={v}");
                }
            }
        }
    }
    if let Some((_, name)) = e.server.as_ref().filter(|(_, n)| !n.is_empty()) {
        let _ = write!(out, " server_key={name}");
    }
    out.push('\n');
}

/// `show table …`: `words` are the arguments after `show table`; `dump` is false below level
/// operator (headers only).
pub fn show_table(tables: &Tables, words: &[&str], dump: bool, now: u64) -> String {
    let mut out = String::new();
    let Some(name) = words.first().filter(|n| !n.is_empty()) else {
        for t in tables.iter().rev() {
            // Expired entries leave the count before it is shown.
            t.entries(now);
            header(t, &mut out);
        }
        return out;
    };
    let Some(t) = tables.find(name) else {
        return "No such table\n".into();
    };
    let f = match parse_filter(t, words.get(1..).unwrap_or(&[]), false) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let entries = t.entries(now);
    if !dump {
        header(t, &mut out);
        out.push_str("# contents not dumped due to insufficient privileges\n");
        return out;
    }
    if let Some(k) = &f.key {
        // A key lookup prints the entry with its header, or nothing at all.
        if let Some((key, e)) = entries.iter().find(|(key, _)| k.as_ref() == Some(key))
            && matches(t, &f, key, e, now)
        {
            header(t, &mut out);
            entry_line(t, key, e, now, &mut out);
        }
        return out;
    }
    header(t, &mut out);
    for (key, e) in &entries {
        if matches(t, &f, key, e, now) {
            entry_line(t, key, e, now, &mut out);
        }
    }
    out
}

/// `clear table <name> [filter]*`: removes the matching entries not in use. `allowed` is false
/// below level operator (HAProxy then answers nothing and clears nothing).
pub fn clear_table(tables: &Tables, words: &[&str], allowed: bool, now: u64) -> String {
    let Some(name) = words.first().filter(|n| !n.is_empty()) else {
        return CLEAR_USAGE.into();
    };
    let Some(t) = tables.find(name) else {
        return "No such table\n".into();
    };
    let f = match parse_filter(t, words.get(1..).unwrap_or(&[]), true) {
        Ok(f) => f,
        Err(e) => return e,
    };
    if allowed {
        t.remove_where(now, |k, e| matches(t, &f, k, e, now));
    }
    String::new()
}

const SET_USAGE: &str = "Required arguments: <table> key <key> [data.<store_data_type> <value>]*\n";

/// `set table <name> key <k> [data.<type> <v>]*`: creates or renews the entry and stores each
/// value in turn (an error stops there, what came before stays, as in HAProxy). A rate is set
/// to `v` events in a period starting now. Empty reply on success.
pub fn set_table(tables: &Tables, words: &[&str], allowed: bool, now: u64) -> String {
    let Some(name) = words.first().filter(|n| !n.is_empty()) else {
        return SET_USAGE.into();
    };
    let Some(t) = tables.find(name) else {
        return "No such table\n".into();
    };
    match words.get(1).copied() {
        // HAProxy 2.6 then walks the table as `clear table` does: it empties it.
        None | Some("") => return clear_table(tables, &words[..1], allowed, now),
        Some("key") => {}
        Some(w) if w.starts_with("data.") => {
            return "content-based lookup is only supported with the \"show\" and \"clear\" actions\n"
                .into();
        }
        Some(_) => return SET_USAGE.into(),
    }
    let Some(k) = words.get(2).filter(|k| !k.is_empty()) else {
        return "Key value expected\n".into();
    };
    // HAProxy stores an IPv4 key it cannot parse as 0.0.0.0.
    let key = match key::parse_cli(t.key, k, "Inserting keys into") {
        Ok(Some(k)) => k,
        Ok(None) => Key::Ip(std::net::Ipv4Addr::UNSPECIFIED.into()),
        Err(e) => return e,
    };
    if !allowed {
        return String::new();
    }
    let data = words.get(3..).unwrap_or(&[]);
    t.update(key, now, |e, st| {
        for pair in data.chunks(2) {
            let w = pair[0];
            let Some(name) = w.strip_prefix("data.") else {
                return "\"data.<type>\" followed by a value expected\n".to_string();
            };
            let Some(d) = StickData::from_name(name) else {
                if name == "server_id" && st.has_server_id() {
                    let r = set_server_id(e, pair.get(1).copied().unwrap_or(""));
                    if !r.is_empty() {
                        return r;
                    }
                    continue;
                }
                return if super::is_haproxy_type(name) {
                    "Data type not stored in this table\n".into()
                } else {
                    "Unknown data type\n".into()
                };
            };
            if !st.has(d) {
                return "Data type not stored in this table\n".into();
            }
            let Some(v) = pair.get(1).and_then(|v| v.parse::<i64>().ok()) else {
                return "Require a valid integer value to store\n".into();
            };
            // C casts: a negative value wraps into the type's width.
            let v = if d.is_u64() {
                v as u64
            } else {
                u64::from(v as u32)
            };
            let val = if d.is_rate() {
                Val::Freq(FreqCtr::from_parts(now, v as u32, 0))
            } else {
                Val::Int(v)
            };
            e.set_raw(st, d, val);
        }
        String::new()
    })
    .unwrap_or_else(|| "Unable to allocate a new entry\n".into())
}

fn set_server_id(e: &mut Entry, v: &str) -> String {
    let Ok(v) = v.parse::<i64>() else {
        return "Require a valid integer value to store\n".into();
    };
    let id = v as u32;
    e.server = (id != 0).then(|| (id, std::sync::Arc::from("")));
    String::new()
}
