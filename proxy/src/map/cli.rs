//! `show|get|add|set|del|clear|prepare|commit map` with HAProxy 2.6's replies (captured on 2.6.12;
//! `0x…` references are this process' entry ids, HAProxy prints addresses). Pure: the commands
//! act on the [`Registry`] given.

use std::fmt::Write as _;

use portcullis_runtime_api::reply::Reply;

use super::{Map, Registry};

/// `map` or `acl`: the same commands on the references of either kind, with their own words.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum What {
    Map,
    Acl,
}

impl What {
    pub fn from_word(w: &str) -> What {
        if w == "acl" { What::Acl } else { What::Map }
    }
    fn unknown(self) -> &'static str {
        match self {
            What::Map => "Unknown map identifier. Please use #<id> or <file>.\n",
            What::Acl => "Unknown ACL identifier. Please use #<id> or <file>.\n",
        }
    }
    fn missing(self) -> &'static str {
        match self {
            What::Map => "Missing map identifier.\n",
            What::Acl => "Missing ACL identifier.\n",
        }
    }
    /// Whether the reference is listed under this kind (`show`, `prepare`, `clear`…).
    fn has(self, m: &Map) -> bool {
        match self {
            What::Map => m.is_map(),
            What::Acl => m.is_acl(),
        }
    }
}

const MALFORMED: &str = "Malformed identifier. Please use #<id> or <file>.\n";

/// `@<ver>` before the map name, as HAProxy reads it (a bad number reads as 0).
fn version(args: &[String]) -> (Option<u32>, &[String]) {
    match args.first().and_then(|a| a.strip_prefix('@')) {
        Some(v) => (Some(str2uic(v)), args.get(1..).unwrap_or(&[])),
        None => (None, args),
    }
}

/// HAProxy's `str2uic`: the leading decimal digits, wrapping (`@x` is version 0).
fn str2uic(s: &str) -> u32 {
    s.bytes().take_while(u8::is_ascii_digit).fold(0u32, |a, c| {
        a.wrapping_mul(10).wrapping_add(u32::from(c - b'0'))
    })
}

/// `#0x<hex>` (the reference `show map|acl` prints) names an entry; anything else is a key.
/// `Err` when the hex number is malformed.
fn entry_ref(w: &str) -> Result<Option<u64>, ()> {
    match w.strip_prefix("#0x") {
        Some(h) => u64::from_str_radix(h, 16).map(Some).map_err(|_| ()),
        None => Ok(None),
    }
}

/// Runs `<verb> map|acl <args…>`; `payload` is the `<<` text of `add map`.
pub fn run(
    reg: &Registry,
    verb: &str,
    what: What,
    args: &[String],
    payload: Option<&str>,
    out: &mut Reply,
) {
    let arg = |i: usize| args.get(i).filter(|a| !a.is_empty());
    match verb {
        "show" => show(reg, what, args, out),
        "get" => {
            let (Some(ident), Some(sample)) = (arg(0), arg(1)) else {
                out.err(match what {
                    What::Map => "Missing map identifier and/or key.\n",
                    What::Acl => "Missing ACL identifier and/or key.\n",
                });
                return;
            };
            let Some(m) = reg.find(ident) else {
                out.err(what.unknown());
                return;
            };
            get(&m, what, sample, out);
        }
        "add" => add(reg, what, args, payload, out),
        "set" => {
            let (Some(ident), Some(key), Some(value)) = (arg(0), arg(1), arg(2)) else {
                out.err("'set map' expects three parameters: map identifier, key and value.\n");
                return;
            };
            let Some(m) = reg.find(ident) else {
                out.err(what.unknown());
                return;
            };
            if let Err(e) = update(&m, key, |e| e.value = value.clone()) {
                out.err(e);
            }
        }
        "del" => {
            let (Some(ident), Some(key)) = (arg(0), arg(1)) else {
                out.err(match what {
                    What::Map => "This command expects two parameters: map identifier and key.\n",
                    What::Acl => "This command expects two parameters: ACL identifier and key.\n",
                });
                return;
            };
            // HAProxy answers with the map's words for both kinds here.
            let Some(m) = reg.find(ident).filter(|m| what.has(m)) else {
                out.err(What::Map.unknown());
                return;
            };
            let Ok(by_ref) = entry_ref(key) else {
                out.err(MALFORMED);
                return;
            };
            let mut d = m.write();
            let before = d.entries.len();
            match by_ref {
                Some(id) => d.entries.retain(|e| e.id != id),
                None => d.entries.retain(|e| e.key != *key),
            }
            if d.entries.len() == before {
                out.err("Key not found.\n");
            }
        }
        "clear" => {
            let (ver, rest) = version(args);
            let Some(ident) = rest.first().filter(|a| !a.is_empty()) else {
                out.err(what.missing());
                return;
            };
            let Some(m) = reg.find(ident).filter(|m| what.has(m)) else {
                out.err(what.unknown());
                return;
            };
            let mut d = m.write();
            let ver = ver.unwrap_or(d.curr_gen);
            d.entries.retain(|e| e.ver != ver);
        }
        "prepare" => {
            let Some(m) = arg(0).and_then(|i| reg.find(i)).filter(|m| what.has(m)) else {
                out.err(what.unknown());
                return;
            };
            let mut d = m.write();
            d.next_gen = d.next_gen.wrapping_add(1);
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
            let Some(ident) = rest.first().filter(|a| !a.is_empty()) else {
                out.err(what.missing());
                return;
            };
            let Some(m) = reg.find(ident).filter(|m| what.has(m)) else {
                out.err(what.unknown());
                return;
            };
            let mut d = m.write();
            // HAProxy's window, in wrapping arithmetic: after the current version, up to the
            // last prepared one.
            if ver.wrapping_sub(d.curr_gen.wrapping_add(1)) >= d.next_gen.wrapping_sub(d.curr_gen) {
                out.err("Version number out of range.\n");
                return;
            }
            // The committed version replaces every older one; later ones stay prepared.
            d.curr_gen = ver;
            d.entries.retain(|e| e.ver.wrapping_sub(ver) as i32 >= 0);
        }
        _ => out.err(what.unknown()),
    }
}

fn get(m: &Map, what: What, sample: &str, out: &mut Reply) {
    let (found, key) = match what {
        What::Map => ("found", "key"),
        What::Acl => ("match", "pattern"),
    };
    if m.is_map() {
        let _ = write!(out, "type={}, case=sensitive, {found}=", m.kind.name());
        match m.lookup(sample) {
            Some((k, v)) => {
                let idx = if m.kind.indexed() { "tree" } else { "list" };
                let _ = write!(out, "yes, idx={idx}, {key}=\"{k}\"");
                if what == What::Map {
                    let _ = write!(out, ", value=\"{v}\", type=\"str\"");
                }
                out.push('\n');
            }
            None => out.push_str("no\n"),
        }
    }
    let keys = m.current_keys();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    for u in m.users() {
        let case = if u.icase() {
            "insensitive"
        } else {
            "sensitive"
        };
        let _ = write!(out, "type={}, case={case}, {found}=", u.type_name());
        match u.lookup(&keys, sample) {
            Some((p, tree)) => {
                let idx = if tree { "tree" } else { "list" };
                let _ = write!(out, "yes, idx={idx}, {key}=\"{p}\"");
                if what == What::Map {
                    out.push_str(", value=none");
                }
                out.push('\n');
            }
            None => out.push_str("no\n"),
        }
    }
}

fn add(reg: &Registry, what: What, args: &[String], payload: Option<&str>, out: &mut Reply) {
    let (ver, rest) = version(args);
    let arg = |i: usize| rest.get(i).filter(|a| !a.is_empty());
    let ident = match what {
        What::Map => match (arg(0), arg(1), arg(2), payload) {
            (Some(i), _, _, Some(_)) | (Some(i), Some(_), Some(_), None) => Some(i),
            _ => None,
        },
        What::Acl => arg(0).filter(|_| arg(1).is_some()),
    };
    let Some(ident) = ident else {
        out.err(match what {
            What::Map => "'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload\n",
            What::Acl => "'add acl' expects two parameters: ACL identifier and pattern.\n",
        });
        return;
    };
    let Some(m) = reg.find(ident) else {
        out.err(what.unknown());
        return;
    };
    if let Some(v) = ver
        && v.wrapping_sub(m.read().next_gen) as i32 > 0
    {
        out.err(match what {
            What::Map => "Version number in the future, please use 'prepare map' before.\n",
            What::Acl => "Version number in the future, please use 'prepare acl' before.\n",
        });
        return;
    }
    if what == What::Acl && m.is_map() {
        out.err("This ACL is shared with a map containing samples. You must use the command 'add map' to add values.\n");
        return;
    }
    let pairs: Vec<(String, String)> = match (what, payload) {
        (What::Map, Some(p)) => super::parse_file(p),
        (What::Map, None) => vec![(
            arg(1).cloned().unwrap_or_default(),
            arg(2).cloned().unwrap_or_default(),
        )],
        (What::Acl, _) => vec![(arg(1).cloned().unwrap_or_default(), String::new())],
    };
    let ver = ver.unwrap_or_else(|| m.read().curr_gen);
    let users = m.users();
    for (k, v) in pairs {
        // Every ACL using the reference must accept the pattern (HAProxy's error, with a period).
        if let Some(e) = users.iter().find_map(|u| u.check(&k).err()) {
            out.err(&format!("{e}.\n"));
            return;
        }
        m.add(ver, &k, &v);
    }
}

/// Applies `f` to the current version's entries with that key (or the one `#0x<ref>` names).
fn update(m: &Map, key: &str, f: impl Fn(&mut super::Entry)) -> Result<(), &'static str> {
    let by_ref = entry_ref(key).map_err(|_| MALFORMED)?;
    let mut d = m.write();
    let cur = d.curr_gen;
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

fn show(reg: &Registry, what: What, args: &[String], out: &mut Reply) {
    if args.first().is_none_or(|a| a.is_empty()) {
        out.push_str("# id (file) description\n");
        for m in reg.all().into_iter().filter(|m| what.has(m)) {
            let (curr_gen, next_gen) = {
                let d = m.read();
                (d.curr_gen, d.next_gen)
            };
            let _ = writeln!(
                out,
                "{} ({}) {}. curr_ver={} next_ver={} entry_cnt={}",
                m.uid(),
                m.path,
                m.display(),
                curr_gen,
                next_gen,
                m.entry_count()
            );
        }
        return;
    }
    let (ver, rest) = version(args);
    let Some(m) = rest
        .first()
        .and_then(|i| reg.find(i))
        .filter(|m| what.has(m))
    else {
        out.err(what.unknown());
        return;
    };
    let smp = m.is_map();
    let d = m.read();
    let ver = ver.unwrap_or(d.curr_gen);
    for e in d.entries.iter().filter(|e| e.ver == ver) {
        if smp {
            let _ = writeln!(out, "{:#x} {} {}", e.id, e.key, e.value);
        } else {
            let _ = writeln!(out, "{:#x} {}", e.id, e.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::MatchKind;
    use super::*;

    fn run_s(reg: &Registry, line: &str) -> String {
        let words: Vec<String> = line.split(' ').map(str::to_string).collect();
        let mut r = Reply::default();
        run(
            reg,
            &words[0],
            What::from_word(&words[1]),
            &words[2..],
            None,
            &mut r,
        );
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
        assert_eq!(run_s(&reg, "add map /nope k v"), What::Map.unknown());
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
