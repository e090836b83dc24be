//! `show|get|add|set|del|clear|prepare|commit map` with HAProxy 2.6's replies (captured on 2.6.12;
//! `0x…` references are this process' entry ids, HAProxy prints addresses). Pure: the commands
//! act on the [`Registry`] given.

use std::fmt::Write as _;

use portcullis_runtime_api::reply::Reply;

use super::{Map, Registry};

const UNKNOWN: &str = "Unknown map identifier. Please use #<id> or <file>.\n";

/// `@<ver>` before the map name, as HAProxy reads it (a bad number reads as 0).
fn version(args: &[String]) -> (Option<u32>, &[String]) {
    match args.first().and_then(|a| a.strip_prefix('@')) {
        Some(v) => (Some(v.parse().unwrap_or(0)), args.get(1..).unwrap_or(&[])),
        None => (None, args),
    }
}

/// `#<ref>` (the `0x…` of `show map`, or a decimal id) or a key.
fn entry_ref(w: &str) -> Option<u64> {
    let r = w.strip_prefix('#')?;
    match r.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => r.parse().ok(),
    }
}

/// Runs `<verb> map <args…>`; `payload` is the `<<` text of `add map`.
pub fn run(reg: &Registry, verb: &str, args: &[String], payload: Option<&str>, out: &mut Reply) {
    match verb {
        "show" => show(reg, args, out),
        "get" => {
            let (Some(ident), Some(sample)) = (args.first(), args.get(1)) else {
                out.err("Missing map identifier and/or key.\n");
                return;
            };
            let Some(m) = reg.find(ident) else {
                out.err(UNKNOWN);
                return;
            };
            let _ = write!(out, "type={}, case=sensitive, found=", m.kind.name());
            match m.lookup(sample) {
                Some((k, v)) => {
                    let idx = if m.kind.indexed() { "tree" } else { "list" };
                    let _ = writeln!(
                        out,
                        "yes, idx={idx}, key=\"{k}\", value=\"{v}\", type=\"str\""
                    );
                }
                None => out.push_str("no\n"),
            }
        }
        "add" => {
            let (ver, rest) = version(args);
            let (ident, pairs): (Option<&String>, Vec<(String, String)>) =
                match (rest.first(), rest.get(1), rest.get(2), payload) {
                    (Some(i), Some(k), Some(v), _) => (Some(i), vec![(k.clone(), v.clone())]),
                    (Some(i), None, None, Some(p)) => (Some(i), super::parse_file(p)),
                    _ => (None, Vec::new()),
                };
            let Some(ident) = ident else {
                out.err("'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload\n");
                return;
            };
            let Some(m) = reg.find(ident) else {
                out.err(UNKNOWN);
                return;
            };
            let ver = ver.unwrap_or_else(|| m.read().curr_gen);
            for (k, v) in pairs {
                m.add(ver, &k, &v);
            }
        }
        "set" => {
            let (Some(ident), Some(key), Some(value)) = (args.first(), args.get(1), args.get(2))
            else {
                out.err("'set map' expects three parameters: map identifier, key and value.\n");
                return;
            };
            let Some(m) = reg.find(ident) else {
                out.err(UNKNOWN);
                return;
            };
            if let Err(e) = update(&m, key, |e| e.value = value.clone()) {
                out.err(e);
            }
        }
        "del" => {
            let (Some(ident), Some(key)) = (args.first(), args.get(1)) else {
                out.err("This command expects two parameters: map identifier and key.\n");
                return;
            };
            let Some(m) = reg.find(ident) else {
                out.err(UNKNOWN);
                return;
            };
            let mut d = m.write();
            let cur = d.curr_gen;
            let before = d.entries.len();
            match entry_ref(key) {
                Some(id) => d.entries.retain(|e| e.id != id),
                None => d.entries.retain(|e| !(e.ver == cur && e.key == *key)),
            }
            if d.entries.len() == before {
                out.err("Key not found.\n");
            }
        }
        "clear" => {
            let (ver, rest) = version(args);
            let Some(ident) = rest.first() else {
                out.err("Missing map identifier.\n");
                return;
            };
            let Some(m) = reg.find(ident) else {
                out.err(UNKNOWN);
                return;
            };
            let mut d = m.write();
            let ver = ver.unwrap_or(d.curr_gen);
            d.entries.retain(|e| e.ver != ver);
        }
        "prepare" => {
            let Some(m) = args.first().and_then(|i| reg.find(i)) else {
                out.err(UNKNOWN);
                return;
            };
            let mut d = m.write();
            d.next_gen += 1;
            let ver = d.next_gen;
            d.entries.retain(|e| e.ver != ver);
            out.info(&format!("New version created: {ver}\n"));
        }
        "commit" => {
            let (ver, rest) = version(args);
            let Some(ver) = ver else {
                out.err("Missing version number.\n");
                return;
            };
            let Some(m) = rest.first().and_then(|i| reg.find(i)) else {
                out.err(UNKNOWN);
                return;
            };
            let mut d = m.write();
            if ver < d.curr_gen || ver > d.next_gen {
                out.err("Version number out of range.\n");
                return;
            }
            // The committed version replaces every older one; later ones stay prepared.
            d.curr_gen = ver;
            d.entries.retain(|e| e.ver >= ver);
        }
        _ => out.err(UNKNOWN),
    }
}

/// Applies `f` to the current version's entries with that key (or the one `#<ref>` names).
fn update(m: &Map, key: &str, f: impl Fn(&mut super::Entry)) -> Result<(), &'static str> {
    let mut d = m.write();
    let cur = d.curr_gen;
    let by_ref = entry_ref(key);
    let mut found = false;
    for e in d.entries.iter_mut() {
        let hit = match by_ref {
            Some(id) => e.id == id,
            None => e.ver == cur && e.key == key,
        };
        if hit {
            f(e);
            found = true;
        }
    }
    match (found, by_ref) {
        (true, _) => Ok(()),
        (false, Some(_)) => Err("key or pattern not found.\n"),
        (false, None) => Err("entry not found.\n"),
    }
}

fn show(reg: &Registry, args: &[String], out: &mut Reply) {
    let (ver, rest) = version(args);
    let Some(ident) = rest.first() else {
        out.push_str("# id (file) description\n");
        for m in reg.all() {
            let d = m.read();
            let _ = writeln!(
                out,
                "{} ({}) pattern loaded from file '{}' used by map at file '{}' line {}. curr_ver={} next_ver={} entry_cnt={}",
                m.uid,
                m.path,
                m.path,
                m.origin.0,
                m.origin.1,
                d.curr_gen,
                d.next_gen,
                d.entries.len()
            );
        }
        return;
    };
    let Some(m) = reg.find(ident).filter(|_| rest.len() == 1) else {
        out.err(UNKNOWN);
        return;
    };
    let d = m.read();
    let ver = ver.unwrap_or(d.curr_gen);
    for e in d.entries.iter().filter(|e| e.ver == ver) {
        let _ = writeln!(out, "{:#x} {} {}", e.id, e.key, e.value);
    }
}

#[cfg(test)]
mod tests {
    use super::super::MatchKind;
    use super::*;

    fn run_s(reg: &Registry, line: &str) -> String {
        let words: Vec<String> = line.split(' ').map(str::to_string).collect();
        let mut r = Reply::default();
        run(reg, &words[0], &words[2..], None, &mut r);
        r.text
    }

    /// The sequence captured from HAProxy 2.6 (README of this module's tests: `0x…` masked).
    #[test]
    fn versions_and_errors_like_haproxy() {
        let reg = Registry::default();
        let m = reg
            .load("/m/hosts.map", MatchKind::Str, || {
                Ok("www.example.com be_a\n# c\n\napi.example.com   be_b\n".into())
            })
            .unwrap();
        let p = "/m/hosts.map";
        assert_eq!(
            run_s(&reg, &format!("get map {p} www.example.com")),
            "type=str, case=sensitive, found=yes, idx=tree, key=\"www.example.com\", value=\"be_a\", type=\"str\"\n"
        );
        assert_eq!(
            run_s(&reg, &format!("get map {p} nope")),
            "type=str, case=sensitive, found=no\n"
        );
        assert_eq!(
            run_s(&reg, &format!("add map {p} new.example.com be_b")),
            ""
        );
        assert_eq!(
            run_s(&reg, &format!("set map {p} new.example.com be_c")),
            ""
        );
        assert_eq!(
            run_s(&reg, &format!("set map {p} nope be_a")),
            "entry not found.\n"
        );
        assert_eq!(
            run_s(&reg, &format!("set map {p} #0x999999 x")),
            "key or pattern not found.\n"
        );
        assert_eq!(run_s(&reg, &format!("del map {p} new.example.com")), "");
        assert_eq!(
            run_s(&reg, &format!("del map {p} new.example.com")),
            "Key not found.\n"
        );
        assert_eq!(
            run_s(&reg, &format!("del map {p}")),
            "This command expects two parameters: map identifier and key.\n"
        );
        assert_eq!(run_s(&reg, "add map /nope k v"), UNKNOWN);
        assert_eq!(
            run_s(&reg, &format!("prepare map {p}")),
            "New version created: 1\n"
        );
        assert_eq!(
            run_s(&reg, &format!("prepare map {p}")),
            "New version created: 2\n"
        );
        assert_eq!(run_s(&reg, &format!("add map @1 {p} v1 be_a")), "");
        assert_eq!(run_s(&reg, &format!("add map @2 {p} v2 be_b")), "");
        assert_eq!(m.lookup("v2"), None);
        assert_eq!(
            run_s(&reg, &format!("commit map @9 {p}")),
            "Version number out of range.\n"
        );
        assert_eq!(
            run_s(&reg, &format!("commit map {p}")),
            "Missing version number.\n"
        );
        assert_eq!(run_s(&reg, &format!("commit map @2 {p}")), "");
        assert_eq!(m.lookup("v2").unwrap().1, "be_b");
        assert_eq!(m.lookup("www.example.com"), None);
        let shown = run_s(&reg, &format!("show map {p}"));
        assert!(
            shown.ends_with(" v2 be_b\n") && shown.lines().count() == 1,
            "{shown}"
        );
        assert_eq!(
            run_s(&reg, "show map"),
            "# id (file) description\n0 (/m/hosts.map) pattern loaded from file '/m/hosts.map' used by map at file '' line 0. curr_ver=2 next_ver=2 entry_cnt=1\n"
        );
        assert_eq!(run_s(&reg, &format!("clear map {p}")), "");
        assert_eq!(run_s(&reg, &format!("show map {p}")), "");
    }
}
