//! Maps (HAProxy's pattern references behind `map*` converters): a file of `key value` lines
//! loaded at start, then changed live through the CLI with versions (`prepare map` makes an
//! empty next version, `add map @<v>` fills it, `commit map @<v>` makes it current and drops
//! the older entries). Pure: loading takes the file's text; the registry is shared by the
//! converters (which hold an [`Arc<Map>`]) and the admin socket.

pub mod cli;

use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// How a map's keys match a sample (`map_str`, `map_beg`…; `map` is `str`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    Str,
    Beg,
    End,
    Sub,
    Dir,
    Dom,
    Reg,
    Ip,
    Int,
}

impl MatchKind {
    /// The converter name's suffix (`map_<kind>`); `map` alone is `str`.
    pub fn from_converter(name: &str) -> Option<MatchKind> {
        Some(match name {
            "map" | "map_str" => MatchKind::Str,
            "map_beg" => MatchKind::Beg,
            "map_end" => MatchKind::End,
            "map_sub" => MatchKind::Sub,
            "map_dir" => MatchKind::Dir,
            "map_dom" => MatchKind::Dom,
            "map_reg" => MatchKind::Reg,
            "map_ip" => MatchKind::Ip,
            "map_int" => MatchKind::Int,
            _ => return None,
        })
    }
    /// As `get map` names it (`type=…`).
    pub fn name(self) -> &'static str {
        match self {
            MatchKind::Str => "str",
            MatchKind::Beg => "beg",
            MatchKind::End => "end",
            MatchKind::Sub => "sub",
            MatchKind::Dir => "dir",
            MatchKind::Dom => "dom",
            MatchKind::Reg => "reg",
            MatchKind::Ip => "ip",
            MatchKind::Int => "int",
        }
    }
    /// HAProxy indexes these in a tree, the others are scanned as a list (`get map` `idx=`).
    pub fn indexed(self) -> bool {
        matches!(
            self,
            MatchKind::Str | MatchKind::Beg | MatchKind::Ip | MatchKind::Int
        )
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    /// Unique within the process: the `0x…` reference `show map` prints and `#<ref>` names.
    pub id: u64,
    pub key: String,
    pub value: String,
    /// The version the entry belongs to.
    pub ver: u32,
    /// Compiled key for `map_reg` / `map_ip` / `map_int`.
    compiled: Compiled,
}

#[derive(Clone, Debug)]
enum Compiled {
    None,
    Reg(regex::Regex),
    Net(IpAddr, u8),
    Int(i64, i64),
    Invalid,
}

#[derive(Debug, Default)]
pub struct Data {
    pub entries: Vec<Entry>,
    pub curr_gen: u32,
    pub next_gen: u32,
}

/// One map file.
#[derive(Debug)]
pub struct Map {
    /// The path as written in the configuration.
    pub path: String,
    /// `show map`'s id.
    pub uid: u32,
    pub kind: MatchKind,
    /// Where the first converter using it is (`used by map at file '…' line …`).
    pub origin: (String, u32),
    pub data: RwLock<Data>,
}

/// Entry references look like HAProxy's (heap addresses, 12 hex digits, 16-byte aligned), so
/// that a reference copied from HAProxy's `show map` never names an entry here by accident.
static NEXT_ENTRY: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0x5650_0000_0010);
const ENTRY_STEP: u64 = 0x10;

fn compile(kind: MatchKind, key: &str) -> Compiled {
    match kind {
        MatchKind::Reg => regex::Regex::new(key).map_or(Compiled::Invalid, Compiled::Reg),
        MatchKind::Ip => match crate::config::addr::parse_net(key) {
            Some((ip, len)) => Compiled::Net(ip, len),
            None => Compiled::Invalid,
        },
        MatchKind::Int => {
            let (lo, hi) = key.split_once(':').unwrap_or((key, key));
            match (lo.parse::<i64>(), hi.parse::<i64>()) {
                (Ok(a), Ok(b)) => Compiled::Int(a, b),
                _ => Compiled::Invalid,
            }
        }
        _ => Compiled::None,
    }
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// Whether `key` (an entry of `kind`) matches `sample`, and how long the match is (the longest
/// wins for prefix and network matches, as HAProxy's trees do).
fn matches(kind: MatchKind, e: &Entry, sample: &str) -> Option<usize> {
    let k = e.key.as_str();
    match kind {
        MatchKind::Str => (sample == k).then_some(k.len()),
        MatchKind::Beg => sample.starts_with(k).then_some(k.len()),
        MatchKind::End => sample.ends_with(k).then_some(k.len()),
        MatchKind::Sub => sample.contains(k).then_some(k.len()),
        // Whole `/`-delimited (dir) or `.`-delimited (dom) words of the sample.
        MatchKind::Dir => format!("/{sample}/")
            .contains(&format!("/{}/", k.trim_matches('/')))
            .then_some(k.len()),
        MatchKind::Dom => format!(".{sample}.")
            .contains(&format!(".{}.", k.trim_matches('.')))
            .then_some(k.len()),
        MatchKind::Reg => match &e.compiled {
            Compiled::Reg(r) => r.is_match(sample).then_some(0),
            _ => None,
        },
        MatchKind::Ip => match (&e.compiled, sample.parse::<IpAddr>()) {
            (Compiled::Net(n, len), Ok(ip)) => in_net(ip, *n, *len).then_some(usize::from(*len)),
            _ => None,
        },
        MatchKind::Int => match (&e.compiled, sample.parse::<i64>()) {
            (Compiled::Int(lo, hi), Ok(v)) => (*lo <= v && v <= *hi).then_some(0),
            _ => None,
        },
    }
}

impl Map {
    fn new(path: &str, uid: u32, kind: MatchKind, origin: (String, u32)) -> Map {
        Map {
            path: path.to_string(),
            uid,
            kind,
            origin,
            data: RwLock::new(Data::default()),
        }
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Data> {
        self.data.read().unwrap_or_else(|p| p.into_inner())
    }
    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, Data> {
        self.data.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an entry to version `ver`.
    pub fn add(&self, ver: u32, key: &str, value: &str) {
        let e = Entry {
            id: NEXT_ENTRY.fetch_add(ENTRY_STEP, std::sync::atomic::Ordering::Relaxed),
            key: key.to_string(),
            value: value.to_string(),
            ver,
            compiled: compile(self.kind, key),
        };
        self.write().entries.push(e);
    }

    /// The entry of the current version matching `sample`.
    pub fn lookup(&self, sample: &str) -> Option<(String, String)> {
        let d = self.read();
        let mut best: Option<(&Entry, usize)> = None;
        for e in d.entries.iter().filter(|e| e.ver == d.curr_gen) {
            if let Some(len) = matches(self.kind, e, sample) {
                // Tree kinds keep the longest match, list kinds the first one.
                let better = match best {
                    None => true,
                    Some((_, l)) => self.kind.indexed() && len > l,
                };
                if better {
                    best = Some((e, len));
                }
            }
        }
        best.map(|(e, _)| (e.key.clone(), e.value.clone()))
    }
}

/// Parses a map file's text: `key value` per line (the value is the rest of the line), `#`
/// comments and empty lines skipped.
pub fn parse_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let (k, v) = match l.find([' ', '\t']) {
            Some(i) => (&l[..i], l[i..].trim()),
            None => (l, ""),
        };
        out.push((k.to_string(), v.to_string()));
    }
    out
}

/// Every map of the process, by path (one per file, as HAProxy shares a file's reference).
#[derive(Default)]
pub struct Registry {
    maps: Mutex<Vec<Arc<Map>>>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// The process' maps (the configuration loads them; the CLI reads and changes them).
pub fn registry() -> &'static Registry {
    REGISTRY.get_or_init(Registry::default)
}

thread_local! {
    /// The configuration line being compiled, for `show map`'s description.
    static ORIGIN: std::cell::RefCell<(String, u32)> = const { std::cell::RefCell::new((String::new(), 0)) };
}

/// Runs `f` with `file:line` as the origin of the maps it loads.
pub fn with_origin<R>(file: &str, line: u32, f: impl FnOnce() -> R) -> R {
    ORIGIN.with(|o| *o.borrow_mut() = (file.to_string(), line));
    let r = f();
    ORIGIN.with(|o| *o.borrow_mut() = (String::new(), 0));
    r
}

impl Registry {
    /// The map of `path`, loaded from `text` on first use (`read` supplies the file's text).
    pub fn load(
        &self,
        path: &str,
        kind: MatchKind,
        read: impl FnOnce() -> std::io::Result<String>,
    ) -> Result<Arc<Map>, String> {
        let mut maps = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = maps.iter().find(|m| m.path == path) {
            return Ok(Arc::clone(m));
        }
        // HAProxy's wording; the OS reason is left out as it does.
        let text = read().map_err(|_| format!("failed to open pattern file <{path}>"))?;
        let uid = maps.iter().map(|m| m.uid + 1).max().unwrap_or(0);
        let origin = ORIGIN.with(|o| o.borrow().clone());
        let map = Arc::new(Map::new(path, uid, kind, origin));
        for (k, v) in parse_file(&text) {
            map.add(0, &k, &v);
        }
        maps.push(Arc::clone(&map));
        Ok(map)
    }

    pub fn all(&self) -> Vec<Arc<Map>> {
        self.maps.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `#<id>` or a path.
    pub fn find(&self, ident: &str) -> Option<Arc<Map>> {
        let maps = self.all();
        if let Some(id) = ident.strip_prefix('#') {
            let id: u32 = id.parse().ok()?;
            return maps.into_iter().find(|m| m.uid == id);
        }
        maps.into_iter().find(|m| m.path == ident)
    }
}

/// A map loaded for a converter from the file system.
pub fn load_file(path: &str, kind: MatchKind) -> Result<Arc<Map>, String> {
    registry().load(path, kind, || std::fs::read_to_string(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kind: MatchKind, text: &str) -> Map {
        let m = Map::new("t.map", 0, kind, (String::new(), 0));
        for (k, v) in parse_file(text) {
            m.add(0, &k, &v);
        }
        m
    }

    #[test]
    fn file_lines_and_matches() {
        assert_eq!(
            parse_file("a.example be_a\n# c\n\n  b.example   be b \nlonely\n"),
            [
                ("a.example".to_string(), "be_a".to_string()),
                ("b.example".into(), "be b".into()),
                ("lonely".into(), "".into())
            ]
        );
        let m = map(
            MatchKind::Str,
            "www.example.com be_a\napi.example.com be_b\n",
        );
        assert_eq!(m.lookup("api.example.com").unwrap().1, "be_b");
        assert_eq!(m.lookup("API.example.com"), None);
        let m = map(MatchKind::Beg, "/api be_b\n/api/v2 be_c\n/ be_a\n");
        assert_eq!(m.lookup("/api/v2/x").unwrap().1, "be_c");
        assert_eq!(m.lookup("/apix").unwrap().1, "be_b");
        let m = map(MatchKind::Ip, "10.0.0.0/8 a\n10.1.0.0/16 b\n::1 c\n");
        assert_eq!(m.lookup("10.1.2.3").unwrap().1, "b");
        assert_eq!(m.lookup("10.2.2.3").unwrap().1, "a");
        assert_eq!(m.lookup("::1").unwrap().1, "c");
        assert_eq!(m.lookup("11.0.0.1"), None);
        let m = map(MatchKind::Reg, "^/img/.*\\.png$ img\n");
        assert_eq!(m.lookup("/img/a.png").unwrap().1, "img");
        let m = map(MatchKind::Dom, "example.com d\n");
        assert!(m.lookup("www.example.com").is_some());
        assert!(m.lookup("www.example.community").is_none());
        let m = map(MatchKind::Int, "1:10 low\n11:99 high\n");
        assert_eq!(m.lookup("42").unwrap().1, "high");
        let m = map(MatchKind::End, ".png png\n");
        assert_eq!(m.lookup("/a.png").unwrap().1, "png");
        let m = map(MatchKind::Dir, "img i\n");
        assert!(m.lookup("/static/img/a").is_some());
        assert!(m.lookup("/static/imgs/a").is_none());
    }

    #[test]
    fn versions_are_invisible_until_committed() {
        let m = map(MatchKind::Str, "a 1\n");
        m.add(1, "a", "2");
        assert_eq!(m.lookup("a").unwrap().1, "1");
        let mut d = m.write();
        d.curr_gen = 1;
        d.entries.retain(|e| e.ver >= 1);
        drop(d);
        assert_eq!(m.lookup("a").unwrap().1, "2");
    }
}
