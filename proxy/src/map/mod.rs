//! Pattern references (HAProxy's `pat_ref`): the entries behind `map*` converters (a file of
//! `key value` lines) and behind ACLs (a `-f` file of patterns, or the patterns written inline,
//! one anonymous reference per ACL expression), loaded at start, then changed live through the
//! CLI with versions (`prepare map|acl` makes an empty next version, `add … @<v>` fills it,
//! `commit … @<v>` makes it current and drops the older entries). Every change bumps a stamp
//! that the ACL matchers compare to recompile their patterns on the next request. Pure: loading
//! takes the file's text; the registry is shared by the converters and ACLs (which hold an
//! [`Arc<Map>`]) and the admin socket.

pub mod cli;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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

/// An ACL expression using a reference, as `get acl` and `add acl` see it (HAProxy's
/// `pattern_expr`): the ACL module supplies it, so this module stays free of matching rules.
pub trait PatternUser: Send + Sync {
    /// `type=` of `get acl` (the match method's name).
    fn type_name(&self) -> String;
    fn icase(&self) -> bool;
    /// Whether `pattern` parses for this user; the error is HAProxy's text without the period.
    fn check(&self, pattern: &str) -> Result<(), String>;
    /// The pattern (of `patterns`, the current version's) matching `sample`, and whether
    /// HAProxy indexes it in a tree (`idx=tree`) rather than a list.
    fn lookup(&self, patterns: &[&str], sample: &str) -> Option<(String, bool)>;
}

/// What uses a reference and how `show map|acl` describes it.
#[derive(Default)]
struct Meta {
    map: bool,
    acl: bool,
    /// For inline ACL patterns: `acl '<kw>' file … line …`; for files, built from `regs`.
    display: String,
    /// Each configuration line using the file: (file, line, order of registration, `map|acl`).
    regs: Vec<(String, u32, u64, &'static str)>,
    users: Vec<Arc<dyn PatternUser>>,
}

/// One pattern reference: a map file, an ACL file, or an ACL expression's inline patterns.
pub struct Map {
    /// The path as written in the configuration; empty for inline ACL patterns.
    pub path: String,
    /// `show map|acl`'s id, given once the configuration is loaded (see [`Registry::all`]).
    uid: AtomicU32,
    /// Creation order, and whether it was made after the configuration was parsed (HAProxy
    /// resolves `use_backend`'s converters then, so those maps come after every ACL).
    seq: u64,
    late: bool,
    pub kind: MatchKind,
    /// Where the first user is (file, line).
    pub origin: (String, u32),
    pub data: RwLock<Data>,
    meta: Mutex<Meta>,
    /// Bumped after every change (see [`WriteGuard`]).
    stamp: AtomicU64,
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map")
            .field("path", &self.path)
            .field("uid", &self.uid())
            .finish_non_exhaustive()
    }
}

/// Write access to a reference's entries; the stamp moves when it is dropped, while the lock
/// is still held, so a matcher that sees the new stamp reads the new entries.
pub struct WriteGuard<'a> {
    g: std::sync::RwLockWriteGuard<'a, Data>,
    stamp: &'a AtomicU64,
}

impl std::ops::Deref for WriteGuard<'_> {
    type Target = Data;
    fn deref(&self) -> &Data {
        &self.g
    }
}
impl std::ops::DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut Data {
        &mut self.g
    }
}
impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.stamp.fetch_add(1, Ordering::AcqRel);
    }
}

static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

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
    fn new(path: &str, late: bool, kind: MatchKind, origin: (String, u32)) -> Map {
        Map {
            path: path.to_string(),
            uid: AtomicU32::new(0),
            seq: NEXT_SEQ.fetch_add(1, Ordering::Relaxed),
            late,
            kind,
            origin,
            data: RwLock::new(Data::default()),
            meta: Mutex::new(Meta::default()),
            stamp: AtomicU64::new(0),
        }
    }

    /// A reference outside any registry (ACLs compiled without a configuration location).
    pub fn detached(patterns: &[String]) -> Arc<Map> {
        let m = Map::new("", false, MatchKind::Str, (String::new(), 0));
        for p in patterns {
            m.add(0, p, "");
        }
        Arc::new(m)
    }

    pub fn uid(&self) -> u32 {
        self.uid.load(Ordering::Relaxed)
    }
    /// Changes with every write to the entries.
    pub fn stamp(&self) -> u64 {
        self.stamp.load(Ordering::Acquire)
    }
    fn meta(&self) -> std::sync::MutexGuard<'_, Meta> {
        self.meta.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub fn is_map(&self) -> bool {
        self.meta().map
    }
    pub fn is_acl(&self) -> bool {
        self.meta().acl
    }
    /// `show map|acl`'s description: for a file, its users in the configuration's order.
    pub fn display(&self) -> String {
        let m = self.meta();
        let mut regs = m.regs.clone();
        if regs.is_empty() {
            return m.display.clone();
        }
        regs.sort_by_key(|r| (r.1, r.2));
        let mut out = format!("pattern loaded from file '{}'", self.path);
        for (i, (f, l, _, kind)) in regs.iter().enumerate() {
            let sep = if i == 0 { " used" } else { "," };
            out.push_str(&format!("{sep} by {kind} at file '{f}' line {l}"));
        }
        out
    }
    /// `entry_cnt`: HAProxy counts the entries indexed by each expression using the reference.
    pub fn entry_count(&self) -> usize {
        let users = {
            let m = self.meta();
            (m.users.len() + usize::from(m.map)).max(1)
        };
        self.read().entries.len() * users
    }
    /// Where the reference first appears in the configuration: (file, line, registration).
    fn first_use(&self) -> (String, u32, u64) {
        let m = self.meta();
        m.regs
            .iter()
            .min_by_key(|r| (r.1, r.2))
            .map_or((self.origin.0.clone(), self.origin.1, self.seq), |r| {
                (r.0.clone(), r.1, r.2)
            })
    }
    pub fn users(&self) -> Vec<Arc<dyn PatternUser>> {
        self.meta().users.clone()
    }
    /// Adds an ACL expression using this reference (one per match method and case, as
    /// HAProxy shares a `pattern_expr` between identical users).
    pub fn add_user(&self, u: Arc<dyn PatternUser>) {
        let mut m = self.meta();
        if !m
            .users
            .iter()
            .any(|x| x.type_name() == u.type_name() && x.icase() == u.icase())
        {
            m.users.push(u);
        }
    }
    /// The current version's keys, in order.
    pub fn current_keys(&self) -> Vec<String> {
        let d = self.read();
        d.entries
            .iter()
            .filter(|e| e.ver == d.curr_gen)
            .map(|e| e.key.clone())
            .collect()
    }

    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Data> {
        self.data.read().unwrap_or_else(|p| p.into_inner())
    }
    pub fn write(&self) -> WriteGuard<'_> {
        WriteGuard {
            g: self.data.write().unwrap_or_else(|p| p.into_inner()),
            stamp: &self.stamp,
        }
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

/// Every pattern reference of the process (one per file, as HAProxy shares a file's
/// reference between its users, plus one per ACL expression for its inline patterns).
#[derive(Default)]
pub struct Registry {
    maps: Mutex<Vec<Arc<Map>>>,
}

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// The process' references (the configuration loads them; the CLI reads and changes them).
/// HAProxy's own HTTP client always adds two ACLs (`var(...) -m ip 0.0.0.0`), numbered after
/// the configuration's ACLs; they are here too so that ids and `show acl` match.
pub fn registry() -> &'static Registry {
    REGISTRY.get_or_init(|| {
        let r = Registry::default();
        for _ in 0..2 {
            let m = Map::new("", false, MatchKind::Ip, ("httpclient".into(), 0));
            {
                let mut meta = m.meta();
                meta.acl = true;
                meta.display = "acl 'var' file 'httpclient' line 0".into();
                meta.users.push(Arc::new(BuiltinIp));
            }
            m.add(0, "0.0.0.0", "");
            r.push(Arc::new(m));
        }
        r
    })
}

/// The HTTP client's `-m ip` ACLs, for `get acl`.
struct BuiltinIp;
impl PatternUser for BuiltinIp {
    fn type_name(&self) -> String {
        "ip".into()
    }
    fn icase(&self) -> bool {
        false
    }
    fn check(&self, pattern: &str) -> Result<(), String> {
        match crate::config::addr::parse_net(pattern) {
            Some(_) => Ok(()),
            None => Err(format!("'{pattern}' is not a valid IPv4 or IPv6 address")),
        }
    }
    fn lookup(&self, patterns: &[&str], sample: &str) -> Option<(String, bool)> {
        let ip: IpAddr = sample.parse().ok()?;
        patterns
            .iter()
            .filter_map(|p| {
                let (n, l) = crate::config::addr::parse_net(p)?;
                in_net(ip, n, l).then_some((l, p))
            })
            .max_by_key(|(l, _)| *l)
            .map(|(_, p)| (p.to_string(), true))
    }
}

thread_local! {
    /// The configuration line being compiled, for `show map`'s description, and whether HAProxy
    /// resolves it after parsing (`use_backend`).
    static ORIGIN: std::cell::RefCell<((String, u32), bool)> = const { std::cell::RefCell::new(((String::new(), 0), false)) };
}

/// Runs `f` with `file:line` as the origin of the maps it loads.
pub fn with_origin<R>(file: &str, line: u32, f: impl FnOnce() -> R) -> R {
    ORIGIN.with(|o| *o.borrow_mut() = ((file.to_string(), line), false));
    let r = f();
    ORIGIN.with(|o| *o.borrow_mut() = ((String::new(), 0), false));
    r
}

/// [`with_origin`] for a rule HAProxy resolves once the configuration is parsed
/// (`use_backend` with a log-format name): its maps are numbered after the ACLs.
pub fn with_late_origin<R>(file: &str, line: u32, f: impl FnOnce() -> R) -> R {
    ORIGIN.with(|o| *o.borrow_mut() = ((file.to_string(), line), true));
    let r = f();
    ORIGIN.with(|o| *o.borrow_mut() = ((String::new(), 0), false));
    r
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Map>>> {
        self.maps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets every reference but the HTTP client's two, for a process that compiles
    /// configurations one after another (the configuration fuzzer): each configuration's
    /// references would otherwise stay, numbered before the next one's, and every reference
    /// made renumbers them all.
    pub fn forget_configurations(&self) {
        let mut maps = self.lock();
        maps.retain(|m| {
            !m.late && m.path.is_empty() && (m.origin.0.as_str(), m.origin.1) == ("httpclient", 0)
        });
        number(&maps);
    }

    fn push(&self, m: Arc<Map>) {
        let mut maps = self.lock();
        maps.push(m);
        number(&maps);
    }

    /// The map of `path`, loaded from `text` on first use (`read` supplies the file's text).
    pub fn load(
        &self,
        path: &str,
        kind: MatchKind,
        read: impl FnOnce() -> std::io::Result<String>,
    ) -> Result<Arc<Map>, String> {
        let (origin, late) = ORIGIN.with(|o| o.borrow().clone());
        let reg = (
            origin.0.clone(),
            origin.1,
            NEXT_SEQ.fetch_add(1, Ordering::Relaxed),
            "map",
        );
        if let Some(m) = self.lock().iter().find(|m| m.path == path) {
            let mut meta = m.meta();
            if meta.acl && !meta.map {
                return Err(format!(
                    "The file \"{path}\" is already used as one column file and cannot be used by as two column file."
                ));
            }
            meta.map = true;
            // The same converter compiled twice is one user.
            if !meta
                .regs
                .iter()
                .any(|r| r.0 == reg.0 && r.1 == reg.1 && r.3 == "map")
            {
                meta.regs.push(reg);
            }
            return Ok(Arc::clone(m));
        }
        // HAProxy's wording; the OS reason is left out as it does.
        let text = read().map_err(|_| format!("failed to open pattern file <{path}>"))?;
        let map = Map::new(path, late, kind, origin.clone());
        {
            let mut meta = map.meta();
            meta.map = true;
            meta.regs.push(reg);
        }
        for (k, v) in parse_file(&text) {
            map.add(0, &k, &v);
        }
        let map = Arc::new(map);
        self.push(Arc::clone(&map));
        Ok(map)
    }

    /// The reference of an ACL's `-f <path>` (one pattern per line, already checked by the
    /// caller), used by the ACL at `file:line`.
    pub fn acl_file(
        &self,
        path: &str,
        lines: &[String],
        at: (&str, u32),
    ) -> Result<Arc<Map>, String> {
        let reg = (
            at.0.to_string(),
            at.1,
            NEXT_SEQ.fetch_add(1, Ordering::Relaxed),
            "acl",
        );
        let existing = self.lock().iter().find(|m| m.path == path).cloned();
        if let Some(m) = existing {
            let mut meta = m.meta();
            if meta.map && !meta.acl {
                return Err(format!(
                    "The file \"{path}\" is already used as two column file and cannot be used by as one column file."
                ));
            }
            meta.acl = true;
            meta.regs.push(reg);
            drop(meta);
            number(&self.lock());
            return Ok(m);
        }
        let m = Map::new(path, false, MatchKind::Str, (at.0.to_string(), at.1));
        {
            let mut meta = m.meta();
            meta.acl = true;
            meta.regs.push(reg);
        }
        for l in lines {
            m.add(0, l, "");
        }
        let m = Arc::new(m);
        self.push(Arc::clone(&m));
        Ok(m)
    }

    /// The anonymous reference of one ACL expression's inline patterns (`acl '<kw>' file …`).
    pub fn acl_inline(&self, kw: &str, patterns: &[String], at: (&str, u32)) -> Arc<Map> {
        let m = Map::new("", false, MatchKind::Str, (at.0.to_string(), at.1));
        {
            let mut meta = m.meta();
            meta.acl = true;
            meta.display = format!("acl '{kw}' file '{}' line {}", at.0, at.1);
        }
        for p in patterns {
            m.add(0, p, "");
        }
        let m = Arc::new(m);
        self.push(Arc::clone(&m));
        m
    }

    /// Every reference, by id.
    pub fn all(&self) -> Vec<Arc<Map>> {
        let mut v = self.lock().clone();
        v.sort_by_key(|m| m.uid());
        v
    }

    /// `#<id>` (HAProxy's strtol: `#` alone is 0) or a path.
    pub fn find(&self, ident: &str) -> Option<Arc<Map>> {
        let maps = self.all();
        if let Some(id) = ident.strip_prefix('#') {
            let id: u32 = if id.is_empty() { 0 } else { id.parse().ok()? };
            return maps.into_iter().find(|m| m.uid() == id);
        }
        maps.into_iter().find(|m| m.path == ident)
    }
}

/// HAProxy's numbering (`pattern_finalize_config`): references in the order they were made,
/// which for ACLs is the configuration's order (they are made while it is parsed: compiled
/// here proxy by proxy, so they are sorted by file and line), then the HTTP client's two, then
/// the maps (made when converters' arguments are resolved, after parsing).
fn number(maps: &[Arc<Map>]) {
    let firsts: Vec<(String, u32, u64)> = maps.iter().map(|m| m.first_use()).collect();
    // A file ranks by its earliest use; one pass, not one per reference (this runs at every
    // reference made: with a scan per reference, a config of n inline ACLs cost n³ compares).
    let mut ranks: HashMap<&str, u64> = HashMap::new();
    for (file, _, seq) in &firsts {
        let r = ranks.entry(file.as_str()).or_insert(*seq);
        *r = (*r).min(*seq);
    }
    let file_rank = |f: &str| ranks.get(f).copied().unwrap_or(0);
    let mut order: Vec<(u8, u64, u32, u64, &Arc<Map>)> = maps
        .iter()
        .zip(&firsts)
        .map(|(m, (file, line, seq))| {
            if m.late {
                (2, 0, 0, m.seq, m)
            } else if m.origin.0 == "httpclient" {
                (1, 0, 0, m.seq, m)
            } else {
                (0, file_rank(file), *line, *seq, m)
            }
        })
        .collect();
    order.sort_by_key(|(g, r, l, s, _)| (*g, *r, *l, *s));
    for (i, (.., m)) in order.into_iter().enumerate() {
        m.uid
            .store(u32::try_from(i).unwrap_or(u32::MAX), Ordering::Relaxed);
    }
}

/// A map loaded for a converter from the file system.
pub fn load_file(path: &str, kind: MatchKind) -> Result<Arc<Map>, String> {
    registry().load(path, kind, || std::fs::read_to_string(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgotten_configurations_leave_their_numbers() {
        let r = Registry::default();
        // The HTTP client's own reference stays (numbered after the configuration's).
        r.push(Arc::new(Map::new(
            "",
            false,
            MatchKind::Ip,
            ("httpclient".into(), 0),
        )));
        let pats = ["/a".to_string()];
        let first = r.acl_inline("path", &pats, ("a.cfg", 3));
        let _ = r.acl_inline("path", &pats, ("a.cfg", 1));
        // A configuration file that happens to be called so goes.
        let _ = r.acl_inline("path", &pats, ("httpclient", 2));
        assert_eq!(first.uid(), 1);
        r.forget_configurations();
        assert_eq!(r.all().len(), 1);
        let again = r.acl_inline("path", &pats, ("b.cfg", 1));
        assert_eq!((again.uid(), r.all().len()), (0, 2));
    }

    fn map(kind: MatchKind, text: &str) -> Map {
        let m = Map::new("t.map", false, kind, (String::new(), 0));
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
