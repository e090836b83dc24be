//! ACLs and `if`/`unless` conditions, compiled from the tokens the config parser keeps
//! (`config::model::{AclDef, Cond}`) and evaluated against a [`SampleCtx`]. Pure.
//!
//! Semantics follow HAProxy 2.6: an ACL is `<fetch> [-i] [-n] [-m <method>] [--] <pattern>…`
//! and matches when any value of the fetch matches any pattern; several `acl` lines with the
//! same name are OR-ed; a condition is an OR (`||`/`or`) of AND-ed terms, each optionally
//! negated with `!`, naming an ACL or giving one inline between `{` and `}`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, RwLock};

use regex::{Regex, RegexBuilder};

use crate::map::{Map, PatternUser};

use crate::ana::sample::{
    FetchDef, Label, SampleCtx, SampleExpr, SmpType, find_fetch, is_idchar, parse_prefix_with,
};
use crate::config::model::{AclDef, Cond, Loc};

/// Pattern matching method (`-m <method>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchMethod {
    Found,
    Bool,
    Int,
    Ip,
    Len,
    Str,
    Beg,
    Sub,
    Dir,
    Dom,
    End,
    Reg,
    /// `-m bin`: the sample's bytes equal a hex pattern's.
    Bin,
}

impl MatchMethod {
    /// HAProxy's `pat_match_names`.
    pub fn name(self) -> &'static str {
        use MatchMethod::*;
        match self {
            Found => "found",
            Bool => "bool",
            Int => "int",
            Ip => "ip",
            Len => "len",
            Str => "str",
            Beg => "beg",
            Sub => "sub",
            Dir => "dir",
            Dom => "dom",
            End => "end",
            Reg => "reg",
            Bin => "bin",
        }
    }

    fn from_name(s: &str) -> Option<MatchMethod> {
        use MatchMethod::*;
        Some(match s {
            "found" => Found,
            "bool" => Bool,
            "int" => Int,
            "ip" => Ip,
            "len" => Len,
            "str" => Str,
            "beg" => Beg,
            "sub" => Sub,
            "dir" => Dir,
            "dom" => Dom,
            "end" => End,
            "reg" => Reg,
            "bin" => Bin,
            _ => return None,
        })
    }
}

/// ACL keywords that are a fetch plus an implied match method (`path_beg` = `path -m beg`).
static ACL_KWS: &[(&str, &str, MatchMethod)] = {
    use MatchMethod::*;
    &[
        ("base", "base", Str),
        ("base_beg", "base", Beg),
        ("base_dir", "base", Dir),
        ("base_dom", "base", Dom),
        ("base_end", "base", End),
        ("base_len", "base", Len),
        ("base_reg", "base", Reg),
        ("base_sub", "base", Sub),
        ("hdr", "req.hdr", Str),
        ("hdr_beg", "req.hdr", Beg),
        ("hdr_dir", "req.hdr", Dir),
        ("hdr_dom", "req.hdr", Dom),
        ("hdr_end", "req.hdr", End),
        ("hdr_len", "req.hdr", Len),
        ("hdr_reg", "req.hdr", Reg),
        ("hdr_sub", "req.hdr", Sub),
        ("method", "method", Str),
        ("path", "path", Str),
        ("path_beg", "path", Beg),
        ("path_dir", "path", Dir),
        ("path_dom", "path", Dom),
        ("path_end", "path", End),
        ("path_len", "path", Len),
        ("path_reg", "path", Reg),
        ("path_sub", "path", Sub),
        ("req.ssl_ver", "req.ssl_ver", Int),
        ("req_ssl_sni", "req.ssl_sni", Str),
        ("req_ssl_ver", "req.ssl_ver", Int),
        ("ssl_fc_sni_end", "ssl_fc_sni", End),
        ("ssl_fc_sni_reg", "ssl_fc_sni", Reg),
        ("url", "url", Str),
        ("url_beg", "url", Beg),
        ("url_dir", "url", Dir),
        ("url_dom", "url", Dom),
        ("url_end", "url", End),
        ("url_len", "url", Len),
        ("url_reg", "url", Reg),
        ("url_sub", "url", Sub),
    ]
};

/// HAProxy's predefined ACLs (usable without an `acl` line; a user ACL of the same name wins).
static DEFAULT_ACLS: &[(&str, &[&str])] = &[
    ("TRUE", &["always_true"]),
    ("WAIT_END", &["wait_end"]),
    ("FALSE", &["always_false"]),
    ("LOCALHOST", &["src", "127.0.0.1/8", "::1"]),
    ("HTTP", &["req.proto_http"]),
    ("HTTP_1.0", &["req.ver", "1.0"]),
    ("HTTP_1.1", &["req.ver", "1.1"]),
    ("HTTP_2.0", &["req.ver", "2.0"]),
    ("METH_CONNECT", &["method", "CONNECT"]),
    ("METH_DELETE", &["method", "DELETE"]),
    ("METH_GET", &["method", "GET", "HEAD"]),
    ("METH_HEAD", &["method", "HEAD"]),
    ("METH_OPTIONS", &["method", "OPTIONS"]),
    ("METH_POST", &["method", "POST"]),
    ("METH_PUT", &["method", "PUT"]),
    ("METH_TRACE", &["method", "TRACE"]),
    ("HTTP_URL_ABS", &["url_reg", "^[^/:]*://"]),
    ("HTTP_URL_SLASH", &["url_beg", "/"]),
    ("HTTP_URL_STAR", &["url", "*"]),
    ("HTTP_CONTENT", &["req.hdr_val(content-length)", "gt", "0"]),
    ("REQ_CONTENT", &["req.len", "gt", "0"]),
    ("RDP_COOKIE", &["req.rdp_cookie_cnt", "gt", "0"]),
];

/// Predefined in HAProxy but depending on fetches we do not have yet.
static UNSUPPORTED_DEFAULT_ACLS: &[&str] = &[];

#[derive(Clone, Debug)]
enum Patterns {
    None,
    /// Inclusive ranges; `None` = unbounded on that side.
    Ints(Vec<(Option<i64>, Option<i64>)>),
    Ips(Vec<(IpAddr, u8)>),
    /// Lower-cased already when the match is case-insensitive.
    Strs(Vec<String>),
    Regs(Vec<Regex>),
    Bins(Vec<Vec<u8>>),
}

/// One compiled ACL expression: a fetch, a match method and its patterns.
#[derive(Clone, Debug)]
pub struct AclExpr {
    expr: SampleExpr,
    method: MatchMethod,
    icase: bool,
    pats: Arc<Live>,
}

/// An expression's patterns: its references (the `-f` files, then the inline patterns), and
/// their compiled form, rebuilt on the first evaluation after the CLI changed one of them.
struct Live {
    refs: Vec<Arc<Map>>,
    method: MatchMethod,
    icase: bool,
    cache: RwLock<(u64, Arc<Patterns>)>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").field("refs", &self.refs).finish()
    }
}

impl Live {
    fn new(refs: Vec<Arc<Map>>, method: MatchMethod, icase: bool) -> Result<Live, String> {
        let (stamp, p) = Live::compile(&refs, method, icase);
        Ok(Live {
            refs,
            method,
            icase,
            cache: RwLock::new((stamp, Arc::new(p?))),
        })
    }

    /// [`Live::new`] over references whose patterns are `p`, already compiled from their keys.
    /// The stamp is read after they were compiled (`new` reads it first): right while nothing
    /// else writes to them, as during the configuration's parsing, which is where this is used.
    fn compiled(refs: Vec<Arc<Map>>, method: MatchMethod, icase: bool, p: Patterns) -> Live {
        let stamp = Live::stamp(&refs);
        Live {
            refs,
            method,
            icase,
            cache: RwLock::new((stamp, Arc::new(p))),
        }
    }

    fn stamp(refs: &[Arc<Map>]) -> u64 {
        refs.iter().fold(0u64, |a, r| a.wrapping_add(r.stamp()))
    }

    fn compile(
        refs: &[Arc<Map>],
        method: MatchMethod,
        icase: bool,
    ) -> (u64, Result<Patterns, String>) {
        let stamp = Live::stamp(refs);
        let all: Vec<String> = refs.iter().flat_map(|r| r.current_keys()).collect();
        (stamp, parse_patterns(method, icase, &all))
    }

    /// The patterns as the references hold them now.
    fn get(&self) -> Arc<Patterns> {
        let stamp = Live::stamp(&self.refs);
        {
            let c = self.cache.read().unwrap_or_else(|p| p.into_inner());
            if c.0 == stamp {
                return Arc::clone(&c.1);
            }
        }
        // Entries were checked when added (`add acl`), so this compiles; if not, keep the old.
        let (stamp, p) = Live::compile(&self.refs, self.method, self.icase);
        let mut c = self.cache.write().unwrap_or_else(|p| p.into_inner());
        if let Ok(p) = p {
            *c = (stamp, Arc::new(p));
        }
        Arc::clone(&c.1)
    }
}

/// How `get acl` and `add acl` see an expression using a reference.
struct User {
    method: MatchMethod,
    icase: bool,
    meth: bool,
}

impl PatternUser for User {
    fn type_name(&self) -> String {
        if self.meth {
            // HAProxy prints its method matcher's address here (`unknown(0x…)`).
            return "unknown(0x0)".into();
        }
        self.method.name().into()
    }
    fn icase(&self) -> bool {
        self.icase
    }
    fn check(&self, pattern: &str) -> Result<(), String> {
        parse_patterns(self.method, self.icase, &[pattern.to_string()]).map(|_| ())
    }
    fn lookup(&self, patterns: &[&str], sample: &str) -> Option<(String, bool)> {
        ref_lookup(self.method, self.icase, patterns, sample)
    }
}

/// HAProxy's `get acl`: the pattern matching `sample` (a string converted to the method's
/// type); trees (case-sensitive `str` and `beg`, `ip`) give the longest match, lists the first.
fn ref_lookup(
    method: MatchMethod,
    icase: bool,
    patterns: &[&str],
    sample: &str,
) -> Option<(String, bool)> {
    use MatchMethod::*;
    let tree = matches!(method, Ip) || (matches!(method, Str | Beg) && !icase);
    let one = |p: &str| -> Option<usize> {
        let pats = parse_patterns(method, icase, &[p.to_string()]).ok()?;
        match (&pats, method) {
            (Patterns::Ints(r), Int) => {
                let v: i64 = sample.trim().parse().ok()?;
                in_ranges(r, v).then_some(0)
            }
            (Patterns::Ints(r), Len) => {
                in_ranges(r, i64::try_from(sample.len()).ok()?).then_some(0)
            }
            (Patterns::Ips(n), Ip) => {
                let ip: IpAddr = sample.parse().ok()?;
                n.iter()
                    .find(|(n, l)| net_contains(*n, *l, ip))
                    .map(|(_, l)| usize::from(*l))
            }
            (Patterns::Regs(r), Reg) => r.iter().any(|re| re.is_match(sample)).then_some(0),
            (Patterns::Strs(ps), m) => {
                let s = if icase {
                    sample.to_ascii_lowercase()
                } else {
                    sample.to_string()
                };
                let p = ps.first()?;
                let hit = match m {
                    Str => s == *p,
                    Beg => s.starts_with(p.as_str()),
                    End => s.ends_with(p.as_str()),
                    Sub => s.contains(p.as_str()),
                    Dir => match_word(&s, p, icase, b"/?"),
                    Dom => match_word(&s, p, icase, b"/?.:"),
                    _ => false,
                };
                hit.then_some(p.len())
            }
            _ => None,
        }
    };
    let mut best: Option<(&str, usize)> = None;
    for p in patterns {
        if let Some(len) = one(p) {
            if !tree {
                return Some((p.to_string(), false));
            }
            if best.is_none_or(|(_, l)| len > l) {
                best = Some((p, len));
            }
        }
    }
    best.map(|(p, _)| (p.to_string(), true))
}

/// A named ACL: the OR of every `acl <name> …` line.
#[derive(Clone, Debug)]
pub struct Acl {
    pub name: String,
    exprs: Vec<AclExpr>,
}

/// HAProxy's three-valued ACL result: bit-encoded so that AND is `&`, OR is `|`, and a miss
/// (the answer needs more data) survives negation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tri(u8);

impl Tri {
    pub const FAIL: Tri = Tri(0);
    pub const MISS: Tri = Tri(1);
    pub const PASS: Tri = Tri(3);
    fn neg(self) -> Tri {
        match self {
            Tri::PASS => Tri::FAIL,
            Tri::FAIL => Tri::PASS,
            other => other,
        }
    }
}

impl Acl {
    pub fn eval(&self, ctx: &SampleCtx<'_>) -> bool {
        self.exprs.iter().any(|e| e.eval(ctx))
    }
    /// OR of the expressions: a single pass is enough; a miss keeps the door open.
    pub fn eval3(&self, ctx: &SampleCtx<'_>) -> Tri {
        let mut res = Tri::FAIL;
        for e in &self.exprs {
            res = Tri(res.0 | e.eval3(ctx).0);
            if res == Tri::PASS {
                break;
            }
        }
        res
    }
}

/// The ACLs of one proxy.
#[derive(Clone, Debug, Default)]
pub struct AclSet {
    acls: Vec<Arc<Acl>>,
    /// Predefined ACLs the proxy's conditions used: made once per proxy, as HAProxy adds them
    /// to the proxy's list (so each has one reference in `show acl`).
    defaults: Arc<Mutex<Vec<Arc<Acl>>>>,
}

impl AclSet {
    pub fn get(&self, name: &str) -> Option<&Arc<Acl>> {
        self.acls.iter().find(|a| a.name == name)
    }
    pub fn len(&self) -> usize {
        self.acls.len()
    }
    pub fn is_empty(&self) -> bool {
        self.acls.is_empty()
    }
}

/// A compile error with its location. `msg` is HAProxy's text without the
/// `parsing [file:line] : ` prefix (see `Display`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclError {
    pub loc: Loc,
    pub msg: String,
}

impl AclError {
    /// The message HAProxy prints for a bad condition on rule `rule` (e.g. `http-request deny`):
    /// `error detected while parsing an 'http-request deny' condition : no such ACL : 'foo'.`
    pub fn in_rule(&self, rule: &str) -> String {
        format!(
            "error detected while parsing an '{rule}' condition : {}.",
            self.msg
        )
    }
}

impl std::fmt::Display for AclError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "parsing [{}] : {}", self.loc, self.msg)
    }
}

/// A compiled `if`/`unless` condition.
#[derive(Clone, Debug)]
pub struct Condition {
    unless: bool,
    /// OR of suites; each suite is an AND of (negated?, acl).
    suites: Vec<Vec<(bool, Arc<Acl>)>>,
}

impl Condition {
    /// Whether the rule applies (`unless` already accounted for). An empty condition
    /// (`if !`, `if ||`) never matches, as in HAProxy.
    pub fn eval(&self, ctx: &SampleCtx<'_>) -> bool {
        let res = self
            .suites
            .iter()
            .any(|suite| suite.iter().all(|(neg, acl)| acl.eval(ctx) != *neg));
        res != self.unless
    }

    /// For rules evaluated while data may still arrive (`tcp-request content`): `None` when the
    /// answer needs more data (the rule must wait), else whether the rule applies.
    pub fn eval_partial(&self, ctx: &SampleCtx<'_>) -> Option<bool> {
        let mut res = Tri::FAIL;
        for suite in &self.suites {
            let mut s = Tri::PASS;
            for (neg, acl) in suite {
                let r = acl.eval3(ctx);
                s = Tri(s.0 & if *neg { r.neg() } else { r }.0);
                if s != Tri::PASS {
                    break;
                }
            }
            res = Tri(res.0 | s.0);
            if res == Tri::PASS {
                break;
            }
        }
        match res {
            Tri::MISS => None,
            r => Some((r == Tri::PASS) != self.unless),
        }
    }

    /// A rule without a condition always applies.
    pub fn eval_opt(cond: Option<&Condition>, ctx: &SampleCtx<'_>) -> bool {
        cond.is_none_or(|c| c.eval(ctx))
    }
}

/// Compile every `acl` line of a proxy. Lines sharing a name are OR-ed. Errors are collected
/// (one per bad line), worded as HAProxy does after `parsing [file:line] : `.
pub fn compile_acls(defs: &[AclDef]) -> Result<AclSet, Vec<AclError>> {
    let mut set: Vec<Acl> = Vec::new();
    let mut errs = Vec::new();
    for def in defs {
        if let Some(c) = def
            .name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
        {
            errs.push(AclError {
                loc: def.loc.clone(),
                msg: format!(
                    "character '{c}' is not permitted in acl name '{}'.",
                    def.name
                ),
            });
            continue;
        }
        match parse_acl_expr_at(&def.tokens, Some((&def.loc.file, def.loc.line))) {
            Ok(e) => match set.iter_mut().find(|a| a.name == def.name) {
                Some(a) => a.exprs.push(e),
                None => set.push(Acl {
                    name: def.name.clone(),
                    exprs: vec![e],
                }),
            },
            Err(m) => errs.push(AclError {
                loc: def.loc.clone(),
                msg: format!("error detected while parsing ACL '{}' : {m}.", def.name),
            }),
        }
    }
    if errs.is_empty() {
        Ok(AclSet {
            acls: set.into_iter().map(Arc::new).collect(),
            defaults: Arc::default(),
        })
    } else {
        Err(errs)
    }
}

/// Compile an `if`/`unless` condition against the proxy's ACLs (and the predefined ones).
pub fn compile_cond(cond: &Cond, acls: &AclSet) -> Result<Condition, AclError> {
    compile_cond_at(
        cond.unless,
        &cond.tokens,
        acls,
        Some((&cond.loc.file, cond.loc.line)),
    )
    .map_err(|msg| AclError {
        loc: cond.loc.clone(),
        msg,
    })
}

/// [`compile_cond`] on bare tokens; the error is HAProxy's inner message.
pub fn compile_cond_tokens(
    unless: bool,
    tokens: &[String],
    acls: &AclSet,
) -> Result<Condition, String> {
    compile_cond_at(unless, tokens, acls, None)
}

/// `at`: where the condition is, for the references of its inline ACLs (`show acl`); without
/// it they stay out of the registry.
fn compile_cond_at(
    unless: bool,
    tokens: &[String],
    acls: &AclSet,
    at: Option<(&str, u32)>,
) -> Result<Condition, String> {
    let mut suites: Vec<Vec<(bool, Arc<Acl>)>> = Vec::new();
    let mut cur: Option<Vec<(bool, Arc<Acl>)>> = None;
    let mut neg = false;
    let mut i = 0;
    while let Some(tok) = tokens.get(i) {
        let word = tok.trim_start_matches('!');
        if (tok.len() - word.len()) % 2 == 1 {
            neg = !neg;
        }
        if word.is_empty() {
            i += 1;
            continue;
        }
        if word.eq_ignore_ascii_case("or") || word == "||" {
            if let Some(s) = cur.take() {
                suites.push(s);
            }
            neg = false;
            i += 1;
            continue;
        }
        let acl = if word == "{" {
            let rest = tokens.get(i + 1..).unwrap_or(&[]);
            let Some(close) = rest.iter().position(|t| t == "}") else {
                return Err("missing closing '}' in condition".into());
            };
            let inner = rest.get(..close).unwrap_or(&[]);
            let e = parse_acl_expr_at(inner, at)?;
            i += close + 1;
            Arc::new(Acl {
                name: String::new(),
                exprs: vec![e],
            })
        } else {
            match acls.get(word) {
                Some(a) => a.clone(),
                None => {
                    let mut d = acls.defaults.lock().unwrap_or_else(|p| p.into_inner());
                    match d.iter().find(|a| a.name == word) {
                        Some(a) => Arc::clone(a),
                        None => {
                            let a = default_acl(word, at)?;
                            d.push(Arc::clone(&a));
                            a
                        }
                    }
                }
            }
        };
        cur.get_or_insert_with(Vec::new).push((neg, acl));
        neg = false;
        i += 1;
    }
    if let Some(s) = cur.take() {
        suites.push(s);
    }
    Ok(Condition { unless, suites })
}

fn default_acl(name: &str, at: Option<(&str, u32)>) -> Result<Arc<Acl>, String> {
    if UNSUPPORTED_DEFAULT_ACLS.contains(&name) {
        return Err(format!(
            "predefined ACL '{name}' is not supported by portcullis yet"
        ));
    }
    let Some((_, toks)) = DEFAULT_ACLS.iter().find(|(n, _)| *n == name) else {
        return Err(format!("no such ACL : '{name}'"));
    };
    let toks: Vec<String> = toks.iter().map(|t| t.to_string()).collect();
    let e = parse_acl_expr_at(&toks, at)?;
    Ok(Arc::new(Acl {
        name: name.to_string(),
        exprs: vec![e],
    }))
}

fn default_method(t: SmpType) -> MatchMethod {
    match t {
        SmpType::Str | SmpType::Meth => MatchMethod::Str,
        SmpType::Int => MatchMethod::Int,
        SmpType::Bool => MatchMethod::Bool,
        SmpType::Ip => MatchMethod::Ip,
        SmpType::Bin => MatchMethod::Bin,
    }
}

/// Parse `<criterion> [flags] [operator] <value>…` (the tokens after the ACL name).
pub fn parse_acl_expr(tokens: &[String]) -> Result<AclExpr, String> {
    parse_acl_expr_at(tokens, None)
}

/// [`parse_acl_expr`] for the ACL at `file:line`: its patterns are then references of the
/// process' registry (`show acl`, changed by `add acl`…), else detached ones.
pub fn parse_acl_expr_at(tokens: &[String], at: Option<(&str, u32)>) -> Result<AclExpr, String> {
    let Some(first) = tokens.first() else {
        return Err("missing fetch method in ACL expression ''".into());
    };
    let kw_end = first.find(|c: char| !is_idchar(c)).unwrap_or(first.len());
    let kw = first.get(..kw_end).unwrap_or("");
    let acl_kw = ACL_KWS.iter().find(|(n, _, _)| *n == kw);
    let (expr, end, implied) = match acl_kw {
        Some((_, fetch, m)) => {
            let def: Option<&'static FetchDef> = find_fetch(fetch);
            let (e, end) = parse_prefix_with(first, def, Label::AclKw(kw)).map_err(|e| e.msg)?;
            (e, end, Some(*m))
        }
        None => {
            if kw.is_empty() {
                return Err(format!("missing fetch method in ACL expression '{first}'"));
            }
            let (e, end) = parse_prefix_with(first, None, Label::Fetch)
                .map_err(|e| format!("{} in ACL expression '{first}'", e.msg))?;
            (e, end, None)
        }
    };
    if end != first.len() {
        return Err(format!(
            "missing comma after fetch keyword '{kw}' in ACL expression '{first}'"
        ));
    }
    let mut method = implied.unwrap_or_else(|| default_method(expr.out_type()));
    let mut icase = false;
    let mut from_files: Vec<String> = Vec::new();
    let mut rest = tokens.get(1..).unwrap_or(&[]);
    while let Some(opt) = rest.first().filter(|t| t.starts_with('-')) {
        match opt.as_str() {
            "-i" => icase = true,
            "-n" | "-M" => {}
            "-u" => rest = rest.get(1..).unwrap_or(&[]),
            "-m" => {
                let name = rest.get(1).map(String::as_str).unwrap_or("");
                method = MatchMethod::from_name(name).ok_or_else(|| {
                    format!("unknown matching method '{name}' when parsing ACL expression")
                })?;
                rest = rest.get(1..).unwrap_or(&[]);
            }
            "-f" => {
                let path = rest.get(1).map(String::as_str).unwrap_or("");
                from_files.push(path.to_string());
                rest = rest.get(1..).unwrap_or(&[]);
            }
            "--" => {
                rest = rest.get(1..).unwrap_or(&[]);
                break;
            }
            other => {
                return Err(format!(
                    "'{other}' is not a valid ACL option. Please use '--' before any pattern beginning with a '-'"
                ));
            }
        }
        rest = rest.get(1..).unwrap_or(&[]);
    }
    let dotted;
    if acl_kw.is_some_and(|(n, _, _)| n.ends_with("ssl_ver")) && method == MatchMethod::Int {
        dotted = rest.iter().map(|t| dotted_ver(t)).collect::<Vec<_>>();
        rest = &dotted;
    }
    let inline = fold_operators(method, rest)?;
    let checked = parse_patterns(method, icase, &inline)?;
    let mut refs = Vec::new();
    for path in &from_files {
        let lines = read_pattern_file(path, method, icase)?;
        refs.push(match at {
            Some(at) => crate::map::registry().acl_file(path, &lines, at)?,
            None => Map::detached(&lines),
        });
    }
    refs.push(match at {
        Some(at) => crate::map::registry().acl_inline(kw, &inline, at),
        None => Map::detached(&inline),
    });
    let user: Arc<dyn PatternUser> = Arc::new(User {
        method,
        icase,
        meth: expr.out_type() == SmpType::Meth,
    });
    if at.is_some() {
        for r in &refs {
            r.add_user(Arc::clone(&user));
        }
    }
    // Without files the references hold just the inline patterns, compiled above (a regex
    // takes most of the time an ACL's parsing does).
    let pats = Arc::new(if from_files.is_empty() {
        Live::compiled(refs, method, icase, checked)
    } else {
        Live::new(refs, method, icase)?
    });
    Ok(AclExpr {
        expr,
        method,
        icase,
        pats,
    })
}

/// Integer patterns may follow an operator (`gt 3`): folded into ranges (`4:`) so that each
/// pattern stands alone, as one entry of the reference.
fn fold_operators(method: MatchMethod, toks: &[String]) -> Result<Vec<String>, String> {
    if !matches!(method, MatchMethod::Int | MatchMethod::Len) {
        return Ok(toks.to_vec());
    }
    let mut op = Op::Eq;
    let mut out = Vec::new();
    for t in toks {
        let new_op = match t.as_str() {
            "eq" => Some(Op::Eq),
            "gt" => Some(Op::Gt),
            "ge" => Some(Op::Ge),
            "lt" => Some(Op::Lt),
            "le" => Some(Op::Le),
            _ => None,
        };
        if let Some(o) = new_op {
            op = o;
            continue;
        }
        if op != Op::Eq && !t.contains([':', '-']) {
            let v: i64 = t
                .parse()
                .map_err(|_| format!("'{t}' is neither a number nor a supported operator"))?;
            out.push(match op {
                Op::Gt => format!("{}:", v.saturating_add(1)),
                Op::Ge => format!("{v}:"),
                Op::Lt => format!(":{}", v.saturating_sub(1)),
                Op::Le | Op::Eq => format!(":{v}"),
            });
            continue;
        }
        out.push(t.clone());
    }
    Ok(out)
}

/// The networks of a `src <patterns>|-f <file>` ACL expression (what the XDP filter can hold);
/// None for anything else.
pub(crate) fn src_networks(tokens: &[String]) -> Option<Vec<(IpAddr, u8)>> {
    let (first, mut rest) = tokens.split_first()?;
    if first != "src" {
        return None;
    }
    let mut pats: Vec<String> = Vec::new();
    while let Some(opt) = rest.first().filter(|t| t.starts_with('-')) {
        match opt.as_str() {
            "-f" => {
                let path = rest.get(1)?;
                pats.extend(read_pattern_file(path, MatchMethod::Ip, false).ok()?);
                rest = rest.get(2..)?;
            }
            "-n" | "-M" => rest = rest.get(1..)?,
            "-m" if rest.get(1).map(String::as_str) == Some("ip") => rest = rest.get(2..)?,
            "--" => {
                rest = rest.get(1..)?;
                break;
            }
            _ => return None,
        }
    }
    pats.extend(rest.iter().cloned());
    pats.iter().map(|p| parse_net(p)).collect()
}

/// `-f <file>`: one pattern per line, leading blanks skipped, empty lines and `#` comments
/// ignored (trailing blanks are part of the pattern, as in HAProxy). Each line is checked here so
/// that an error names its line.
fn read_pattern_file(path: &str, method: MatchMethod, icase: bool) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|_| format!("failed to open pattern file <{path}>"))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let p = line.trim_start_matches([' ', '\t']);
        if p.is_empty() || p.starts_with('#') {
            continue;
        }
        let p = p.to_string();
        parse_patterns(method, icase, std::slice::from_ref(&p))
            .map_err(|e| format!("{e} at line {} of file '{path}'", n + 1))?;
        out.push(p);
    }
    Ok(out)
}

/// `req_ssl_ver` patterns are `major.minor` versions (ranges with `:`), compared as
/// `major << 16 | minor`: rewritten here into the integers the fetch returns.
fn dotted_ver(t: &str) -> String {
    let one = |v: &str| -> Option<String> {
        if v.is_empty() {
            return Some(String::new());
        }
        let (maj, min) = v.split_once('.').unwrap_or((v, "0"));
        let (maj, min) = (maj.parse::<i64>().ok()?, min.parse::<i64>().ok()?);
        Some((maj << 16 | min).to_string())
    };
    let parts: Option<Vec<String>> = t.split(':').map(one).collect();
    parts.map_or_else(|| t.to_string(), |p| p.join(":"))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Gt,
    Ge,
    Lt,
    Le,
}

fn parse_patterns(method: MatchMethod, icase: bool, toks: &[String]) -> Result<Patterns, String> {
    use MatchMethod::*;
    Ok(match method {
        Found | Bool => Patterns::None,
        Int | Len => {
            let mut op = Op::Eq;
            let mut out = Vec::new();
            for t in toks {
                let new_op = match t.as_str() {
                    "eq" => Some(Op::Eq),
                    "gt" => Some(Op::Gt),
                    "ge" => Some(Op::Ge),
                    "lt" => Some(Op::Lt),
                    "le" => Some(Op::Le),
                    _ => None,
                };
                if let Some(o) = new_op {
                    op = o;
                    continue;
                }
                if op != Op::Eq && !t.contains([':', '-']) {
                    let v: i64 = t.parse().map_err(|_| {
                        format!("'{t}' is neither a number nor a supported operator")
                    })?;
                    out.push(match op {
                        Op::Gt => (Some(v.saturating_add(1)), None),
                        Op::Ge => (Some(v), None),
                        Op::Lt => (None, Some(v.saturating_sub(1))),
                        Op::Le | Op::Eq => (None, Some(v)),
                    });
                    continue;
                }
                out.push(parse_int_range(t)?);
            }
            Patterns::Ints(out)
        }
        Ip => Patterns::Ips(
            toks.iter()
                .map(|t| {
                    parse_net(t).ok_or_else(|| format!("'{t}' is not a valid IPv4 or IPv6 address"))
                })
                .collect::<Result<_, _>>()?,
        ),
        Str | Beg | Sub | Dir | Dom | End => Patterns::Strs(
            toks.iter()
                .map(|t| {
                    if icase {
                        t.to_ascii_lowercase()
                    } else {
                        t.clone()
                    }
                })
                .collect(),
        ),
        Bin => Patterns::Bins(
            toks.iter()
                .map(|t| {
                    hex_pattern(t).ok_or_else(|| format!("'{t}' is not a valid binary string"))
                })
                .collect::<Result<_, _>>()?,
        ),
        Reg => Patterns::Regs(
            toks.iter()
                .map(|t| {
                    RegexBuilder::new(t)
                        .case_insensitive(icase)
                        .build()
                        .map_err(|e| regex_invalid(t, &e))
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// A `-m bin` pattern: an even number of hex digits.
fn hex_pattern(t: &str) -> Option<Vec<u8>> {
    let b = t.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

/// HAProxy's words for a pattern that does not compile.
pub(crate) fn regex_invalid(pattern: &str, e: &regex::Error) -> String {
    format!("regex '{pattern}' is invalid (error={})", regex_err(e))
}

/// The last line of the regex crate's message is the short reason ("unclosed group").
fn regex_err(e: &regex::Error) -> String {
    let s = e.to_string();
    let last = s.lines().last().unwrap_or("").trim();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

/// HAProxy integer patterns: `n`, `a:b` (or `a-b`), `:b`, `a:`.
fn parse_int_range(t: &str) -> Result<(Option<i64>, Option<i64>), String> {
    let bad_range = || format!("'{t}' is not a valid number range");
    if t.is_empty() {
        return Err(bad_range());
    }
    let Some(sep) = t.find([':', '-']) else {
        let v: i64 = t.parse().map_err(|_| format!("'{t}' is not a number"))?;
        return Ok((Some(v), Some(v)));
    };
    let (a, b) = (t.get(..sep).unwrap_or(""), t.get(sep + 1..).unwrap_or(""));
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad_range());
    match (a.is_empty(), b.is_empty()) {
        (true, false) => Ok((None, Some(num(b)?))),
        (false, true) => Ok((Some(num(a)?), None)),
        (false, false) => {
            let (lo, hi) = (num(a)?, num(b)?);
            if lo > hi {
                return Err(bad_range());
            }
            Ok((Some(lo), Some(hi)))
        }
        (true, true) => Err(bad_range()),
    }
}

/// `a.b.c.d[/len|/mask]` or `ipv6[/len]`. No DNS (HAProxy resolves names unless `-n`).
pub(crate) fn parse_net(t: &str) -> Option<(IpAddr, u8)> {
    let (addr, mask) = match t.split_once('/') {
        Some((a, m)) => (a, Some(m)),
        None => (t, None),
    };
    let ip: IpAddr = addr.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match mask {
        None => max,
        Some(m) => match m.parse::<u8>() {
            Ok(l) if l <= max => l,
            Ok(_) => return None,
            Err(_) => {
                // dotted mask, contiguous only
                let mv4: Ipv4Addr = m.parse().ok()?;
                if !ip.is_ipv4() {
                    return None;
                }
                let bits = u32::from(mv4);
                let l = bits.leading_ones();
                if bits.checked_shl(l).unwrap_or(0) != 0 {
                    return None;
                }
                u8::try_from(l).ok()?
            }
        },
    };
    Some((ip, len))
}

fn v6_of(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

fn net_contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), len),
        (IpAddr::V4(n), IpAddr::V6(a)) => match a.to_ipv4_mapped() {
            Some(a4) => prefix_eq(&n.octets(), &a4.octets(), len),
            None => false,
        },
        (IpAddr::V6(n), a) => prefix_eq(&n.octets(), &v6_of(a).octets(), len),
    }
}

fn prefix_eq(a: &[u8], b: &[u8], len: u8) -> bool {
    let full = usize::from(len / 8);
    let rem = len % 8;
    if a.get(..full) != b.get(..full) {
        return false;
    }
    if rem == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rem);
    match (a.get(full), b.get(full)) {
        (Some(x), Some(y)) => x & mask == y & mask,
        _ => false,
    }
}

/// `-m dom` / `-m dir`: the pattern appears as whole delimiter-bounded words.
fn match_word(s: &str, pat: &str, icase: bool, delims: &[u8]) -> bool {
    let is_d = |c: u8| delims.contains(&c);
    let p = pat.as_bytes();
    let p = {
        let start = p.iter().position(|c| !is_d(*c)).unwrap_or(p.len());
        let end = p.iter().rposition(|c| !is_d(*c)).map_or(start, |e| e + 1);
        p.get(start..end).unwrap_or(&[])
    };
    let s = s.as_bytes();
    if p.len() > s.len() {
        return false;
    }
    let eq = |a: &[u8]| {
        if icase {
            a.eq_ignore_ascii_case(p)
        } else {
            a == p
        }
    };
    let mut may_match = true;
    for i in 0..=(s.len() - p.len()) {
        let c = s.get(i).copied().unwrap_or(0);
        if is_d(c) {
            may_match = true;
            continue;
        }
        if !may_match {
            continue;
        }
        if s.get(i..i + p.len()).is_some_and(eq) && s.get(i + p.len()).is_none_or(|c| is_d(*c)) {
            return true;
        }
        may_match = false;
    }
    false
}

impl AclExpr {
    pub fn method(&self) -> MatchMethod {
        self.method
    }

    /// [`AclExpr::eval`], with a miss when it fails on a fetch that may still change.
    pub fn eval3(&self, ctx: &SampleCtx<'_>) -> Tri {
        if self.eval(ctx) {
            Tri::PASS
        } else if self.expr.may_change(ctx) {
            Tri::MISS
        } else {
            Tri::FAIL
        }
    }

    pub fn eval(&self, ctx: &SampleCtx<'_>) -> bool {
        use MatchMethod::*;
        let icase = self.icase;
        let pats = self.pats.get();
        match (&*pats, self.method) {
            (_, Found) => self.expr.any_value(ctx, &mut |_| true),
            (_, Bool) => self.expr.any_value(ctx, &mut |v| v.to_bool()),
            (Patterns::Ints(r), Int) => self
                .expr
                .any_value(ctx, &mut |v| v.to_int().is_some_and(|i| in_ranges(r, i))),
            (Patterns::Ints(r), Len) => self.expr.any_value(ctx, &mut |v| {
                i64::try_from(v.to_str().len()).is_ok_and(|i| in_ranges(r, i))
            }),
            (Patterns::Ips(nets), Ip) => self.expr.any_value(ctx, &mut |v| {
                v.to_ip()
                    .is_some_and(|ip| nets.iter().any(|(n, l)| net_contains(*n, *l, ip)))
            }),
            (Patterns::Regs(res), Reg) => self
                .expr
                .any_value(ctx, &mut |v| res.iter().any(|re| re.is_match(&v.to_str()))),
            (Patterns::Bins(pats), Bin) => self
                .expr
                .any_value(ctx, &mut |v| pats.iter().any(|p| *v.to_bytes() == p[..])),
            (Patterns::Strs(pats), m) => self.expr.any_value(ctx, &mut |v| {
                let s = v.to_str();
                let lowered;
                let hay: &str = if icase && matches!(m, Beg | Sub | End) {
                    lowered = s.to_ascii_lowercase();
                    &lowered
                } else {
                    &s
                };
                pats.iter().any(|p| match m {
                    Str if icase => hay.eq_ignore_ascii_case(p),
                    Str => hay == p,
                    Beg => hay.starts_with(p.as_str()),
                    End => hay.ends_with(p.as_str()),
                    Sub => hay.contains(p.as_str()),
                    Dir => match_word(hay, p, icase, b"/?"),
                    Dom => match_word(hay, p, icase, b"/?.:"),
                    _ => false,
                })
            }),
            _ => false,
        }
    }
}

fn in_ranges(r: &[(Option<i64>, Option<i64>)], i: i64) -> bool {
    r.iter()
        .any(|(lo, hi)| lo.is_none_or(|l| i >= l) && hi.is_none_or(|h| i <= h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ana::sample::SslHello;
    use crate::http::head::{Headers, RequestHead, Version};

    fn loc(line: u32) -> Loc {
        Loc {
            file: "t.cfg".into(),
            line,
        }
    }

    fn toks(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn def(name: &str, rest: &str, line: u32) -> AclDef {
        AclDef {
            name: name.into(),
            tokens: toks(rest),
            loc: loc(line),
        }
    }

    fn req(method: &str, target: &str, hdrs: &[(&str, &str)]) -> RequestHead {
        let mut headers = Headers::default();
        for (n, v) in hdrs {
            headers.append(*n, *v);
        }
        RequestHead {
            method: method.into(),
            target: target.into(),
            version: Version::Http11,
            headers,
        }
    }

    fn ctx<'a>(r: Option<&'a RequestHead>, src: &str) -> SampleCtx<'a> {
        let mut c = SampleCtx::new(
            format!("{src}:5000")
                .parse()
                .unwrap_or_else(|_| format!("[{src}]:5000").parse().unwrap()),
            "127.0.0.1:8080".parse().unwrap(),
            "fe",
        );
        c.req = r;
        c
    }

    /// Evaluate a single anonymous ACL.
    fn m(acl: &str, c: &SampleCtx<'_>) -> bool {
        parse_acl_expr(&toks(acl)).unwrap().eval(c)
    }

    fn cond(s: &str, set: &AclSet) -> Condition {
        compile_cond_tokens(false, &toks(s), set).unwrap()
    }

    /// An ACL compiled at a configuration line owns registry references: `add/del acl` and a
    /// committed version change what the next evaluation matches.
    #[test]
    fn cli_changes_reach_the_matcher() {
        use crate::map::cli::{What, run};
        use portcullis_runtime_api::reply::Reply;
        let dir = std::env::temp_dir().join(format!("acl-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("block.acl");
        std::fs::write(&file, "/admin\n# c\n\n/private\n").unwrap();
        let f = file.display().to_string();
        let e = parse_acl_expr_at(
            &toks(&format!("path_beg -f {f} /inline")),
            Some(("u.cfg", 7)),
        )
        .unwrap();
        let r = |p: &str| req("GET", p, &[]);
        let cli = |line: &str| {
            let w: Vec<String> = line.split(' ').map(String::from).collect();
            let mut out = Reply::default();
            run(
                crate::map::registry(),
                &w[0],
                What::from_word(&w[1]),
                &w[2..],
                None,
                &mut out,
            );
            out.text
        };
        let hit = |p: &str| e.eval(&ctx(Some(&r(p)), "127.0.0.1"));
        assert!(hit("/admin/x") && hit("/inline") && !hit("/new"));
        assert_eq!(cli(&format!("add acl {f} /new")), "");
        assert!(hit("/new/1"));
        assert_eq!(
            cli(&format!("get acl {f} /private/a")),
            "type=beg, case=sensitive, match=yes, idx=tree, pattern=\"/private\"\n"
        );
        assert_eq!(cli(&format!("del acl {f} /admin")), "");
        assert!(!hit("/admin/x"));
        assert_eq!(cli(&format!("prepare acl {f}")), "New version created: 1\n");
        assert_eq!(cli(&format!("add acl @1 {f} /v1")), "");
        assert!(!hit("/v1") && hit("/private"));
        assert_eq!(cli(&format!("commit acl @1 {f}")), "");
        assert!(hit("/v1") && !hit("/private") && hit("/inline"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn path_criteria() {
        let r = req("GET", "/api/v1/Users.json?x=1", &[]);
        let c = ctx(Some(&r), "10.0.0.1");
        assert!(m("path /api/v1/Users.json", &c));
        assert!(!m("path /api/v1/users.json", &c));
        assert!(m("path -i /api/v1/users.json", &c));
        assert!(m("path_beg /api/ /static/", &c));
        assert!(!m("path_beg /static/", &c));
        assert!(m("path_end .json", &c));
        assert!(m("path_sub v1/U", &c));
        assert!(m("path_reg ^/api/v[0-9]+/", &c));
        assert!(!m("path_reg ^/API/", &c));
        assert!(m("path_reg -i ^/API/", &c));
        assert!(m("path_dir v1", &c));
        assert!(!m("path_dir v", &c));
        assert!(m("path_dir /api/v1", &c));
        assert!(m("path_len 18", &c));
        assert!(m("path_len gt 10", &c));
        assert!(m("url_beg /api", &c));
        assert!(m("url /api/v1/Users.json?x=1", &c));
        assert!(m("path -m beg /api", &c));
        assert!(m("path,lower -m end users.json", &c));
        assert!(m("path -m found", &c));
        assert!(!m(
            "query -m found",
            &ctx(Some(&req("GET", "/", &[])), "1.1.1.1")
        ));
    }

    #[test]
    fn header_criteria() {
        let r = req(
            "GET",
            "/",
            &[
                ("Host", "www.Example.com:8080"),
                ("X-A", "one, two"),
                ("x-a", "three"),
            ],
        );
        let c = ctx(Some(&r), "10.0.0.1");
        assert!(m("hdr(host) www.Example.com:8080", &c));
        assert!(m("hdr(host) -i www.example.com:8080", &c));
        assert!(m("hdr_beg(host) www.", &c));
        assert!(m("hdr_end(host) :8080", &c));
        assert!(m("hdr_sub(host) Example", &c));
        assert!(m("hdr_dom(host) Example.com", &c));
        assert!(m("hdr_dom(host) -i example", &c));
        assert!(!m("hdr_dom(host) ample.com", &c));
        assert!(m("hdr_reg(host) ^www\\.", &c));
        // every comma-separated value of every occurrence is tried
        assert!(m("hdr(x-a) two", &c));
        assert!(m("req.hdr(x-a) three", &c));
        assert!(!m("req.hdr(x-a,1) two", &c));
        assert!(m("req.hdr(x-a,2) two", &c));
        assert!(m("hdr_cnt(x-a) eq 3", &c));
        assert!(m("hdr_cnt(x-a) ge 2", &c));
        assert!(!m("hdr_cnt(x-a) lt 3", &c));
        assert!(m("hdr_cnt(x-b) 0", &c));
        assert!(m("req.hdr(x-a) -m found", &c));
        assert!(!m("req.hdr(x-b) -m found", &c));
        assert!(m("req.hdr(x-a) -m len 3", &c));
    }

    #[test]
    fn addresses_and_ints() {
        let c4 = ctx(None, "192.168.10.7");
        assert!(m("src 192.168.0.0/16", &c4));
        assert!(m("src 10.0.0.0/8 192.168.10.7", &c4));
        assert!(m("src 192.168.10.0/255.255.255.0", &c4));
        assert!(!m("src 10.0.0.0/8", &c4));
        assert!(m("src ::ffff:192.168.10.7", &c4));
        let c6 = ctx(None, "2001:db8::5");
        assert!(m("src 2001:db8::/32", &c6));
        assert!(!m("src 2001:db9::/32 10.0.0.0/8", &c6));
        let cm = ctx(None, "::ffff:10.1.2.3");
        assert!(m("src 10.0.0.0/8", &cm));
        assert!(m("dst_port 8080", &c4));
        assert!(m("dst_port 8000:9000", &c4));
        assert!(m("dst_port 80 443 8000-8100", &c4));
        assert!(!m("dst_port lt 8080", &c4));
        assert!(m("dst_port le 8080", &c4));
        assert!(m("dst_port gt 8079", &c4));
        assert!(m("src_port :5000", &c4));
        assert!(m("src -m beg 192.168.", &c4));
    }

    #[test]
    fn booleans_and_ssl() {
        let mut c = ctx(None, "1.2.3.4");
        assert!(!m("ssl_fc", &c));
        c.ssl = true;
        c.ssl_sni = Some("api.example.org");
        assert!(m("ssl_fc", &c));
        assert!(m("ssl_fc_sni api.example.org", &c));
        assert!(m("ssl_fc_sni_end .example.org", &c));
        assert!(!m("req.ssl_sni -m found", &c));
        c.ssl_hello = Some(SslHello {
            hello_type: 1,
            sni: Some("tls.example.net"),
            alpn: None,
        });
        assert!(m("req.ssl_hello_type 1", &c));
        assert!(m("req_ssl_sni tls.example.net", &c));
        assert!(m("req.ssl_sni -m end .example.net", &c));
        assert!(m("req.ssl_sni -i TLS.EXAMPLE.NET", &c));
    }

    #[test]
    fn client_hello_in_payload() {
        let h = crate::tcp::hello::test_hello(Some("Shop.A.Example"), &["h2", "http/1.1"]);
        let mut c = ctx(None, "127.0.0.1");
        c.payload = Some(&h);
        c.partial = true;
        assert!(m("req.ssl_hello_type 1", &c));
        assert!(m("req_ssl_sni -i shop.a.example", &c));
        assert!(
            !m("req.ssl_sni shop.a.example", &c),
            "verbatim, case-sensitive"
        );
        assert!(m("req.ssl_sni -m end .A.Example", &c));
        assert!(!m("req.ssl_sni -m end .a.example", &c));
        assert!(m("req.ssl_sni -i -m end .a.example", &c));
        assert!(m("req.ssl_sni -i -m dom a.example", &c));
        assert!(m("req.ssl_sni -m dom A", &c));
        assert!(!m("req.ssl_sni -m dom a", &c));
        assert!(m("req.ssl_sni -i -m beg shop.", &c));
        assert!(m("req.ssl_sni -i -m sub p.a.e", &c));
        assert!(m("req.ssl_sni -m reg ^Shop\\.[A-Z]\\.", &c));
        assert!(m("req.ssl_sni -i -m reg ^shop\\.a", &c));
        assert!(m("req.ssl_sni,lower -m end .a.example", &c));
        assert!(
            m("req.ssl_alpn http/1.1", &c),
            "every offered protocol is tried"
        );
        assert!(m("req.len gt 100", &c));
        assert!(m("req_ssl_ver 3.3", &c));
        assert!(m("req.ssl_ver ge 3.1", &c));
        assert!(!m("req_ssl_ver 3.1:3.2", &c));
        assert!(
            !m("req.ssl_ver 3", &c),
            "a bare number is a major version (3.0)"
        );
    }

    /// `tcp-request content` semantics: a condition that fails on a fetch still waiting for
    /// bytes is a miss (wait), and a miss survives negation; once final, it is a plain failure.
    #[test]
    fn partial_conditions() {
        let h = crate::tcp::hello::test_hello(Some("a.example"), &[]);
        let set = AclSet::default();
        let pc = |s: &str, payload: &[u8], partial: bool| {
            let mut c = ctx(None, "127.0.0.1");
            c.payload = Some(payload);
            c.partial = partial;
            cond(s, &set).eval_partial(&c)
        };
        let half = &h[..h.len() / 2];
        assert_eq!(pc("{ req.ssl_hello_type 1 }", half, true), None);
        assert_eq!(pc("{ req.ssl_hello_type 1 }", half, false), Some(false));
        assert_eq!(pc("{ req.ssl_hello_type 1 }", &h, true), Some(true));
        assert_eq!(pc("!{ req.ssl_hello_type 1 }", half, true), None);
        assert_eq!(
            pc("{ req.ssl_hello_type 1 }", b"GET / HTTP/1.0", true),
            Some(false)
        );
        assert_eq!(pc("{ req_ssl_sni b.example }", &h, true), Some(false));
        assert_eq!(
            pc("{ req.len eq 3 }", &h, true),
            None,
            "req.len may always grow"
        );
        assert_eq!(pc("{ req.len eq 3 }", &h, false), Some(false));
        assert_eq!(pc("{ req.len gt 3 }", &h, true), Some(true));
        assert_eq!(
            pc("{ src 127.0.0.1 } || { req.len eq 3 }", &h, true),
            Some(true)
        );
        assert_eq!(
            pc("{ src 10.0.0.1 } { req.len eq 3 }", &h, true),
            Some(false)
        );
        assert_eq!(pc("{ req.len eq 3 } { src 10.0.0.1 }", &h, true), None);
        let mut c = ctx(None, "127.0.0.1");
        c.payload = Some(half);
        c.partial = true;
        let u = compile_cond_tokens(true, &toks("{ req.ssl_hello_type 1 }"), &set).unwrap();
        assert_eq!(u.eval_partial(&c), None);
        c.payload = Some(&h);
        assert_eq!(u.eval_partial(&c), Some(false));
    }

    #[test]
    fn conditions() {
        let set = compile_acls(&[
            def("api", "path_beg /api", 1),
            def("api", "path_beg /v2", 2),
            def("local", "src 127.0.0.0/8", 3),
            def("post", "method POST", 4),
        ])
        .unwrap();
        let r1 = req("POST", "/v2/x", &[]);
        let c1 = ctx(Some(&r1), "127.0.0.1");
        let r2 = req("GET", "/other", &[]);
        let c2 = ctx(Some(&r2), "10.0.0.1");
        assert!(cond("api", &set).eval(&c1), "same-name ACLs are OR-ed");
        assert!(cond("api local", &set).eval(&c1));
        assert!(!cond("api !local", &set).eval(&c1));
        assert!(cond("api !local || post", &set).eval(&c1));
        assert!(cond("!api or local", &set).eval(&c2));
        assert!(!cond("!!api", &set).eval(&c2));
        assert!(cond("{ path /other } !post", &set).eval(&c2));
        assert!(cond("!{ path /x }", &set).eval(&c2));
        assert!(cond("METH_GET", &set).eval(&c2));
        assert!(!cond("METH_POST", &set).eval(&c2));
        assert!(cond("HTTP TRUE", &set).eval(&c2));
        assert!(!cond("FALSE", &set).eval(&c2));
        assert!(cond("LOCALHOST", &set).eval(&c1));
        assert!(cond("HTTP_1.1 HTTP_URL_SLASH", &set).eval(&c1));
        // empty conditions never match; unless inverts
        assert!(!cond("!", &set).eval(&c1));
        assert!(!cond("api ||", &set).eval(&c2));
        let u = compile_cond_tokens(true, &toks("local"), &set).unwrap();
        assert!(!u.eval(&c1));
        assert!(u.eval(&c2));
        assert!(Condition::eval_opt(None, &c2));
        // a user ACL overrides a predefined one
        let set2 = compile_acls(&[def("TRUE", "always_false", 1)]).unwrap();
        assert!(!cond("TRUE", &set2).eval(&c2));
    }

    #[test]
    fn errors_in_haproxy_words() {
        let e = |rest: &str| {
            compile_acls(&[def("a9", rest, 9)])
                .unwrap_err()
                .remove(0)
                .to_string()
        };
        assert_eq!(
            e("foo bar"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : unknown fetch method 'foo' in ACL expression 'foo'."
        );
        assert_eq!(
            e(""),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : missing fetch method in ACL expression ''."
        );
        assert_eq!(
            e("hdr(host -m zzz x"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : ACL keyword 'hdr' : expected ')'."
        );
        assert_eq!(
            e("hdr(host) -m zzz x"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : unknown matching method 'zzz' when parsing ACL expression."
        );
        assert_eq!(
            e("path -m"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : unknown matching method '' when parsing ACL expression."
        );
        assert_eq!(
            e("src 1.2.3.4/33"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : '1.2.3.4/33' is not a valid IPv4 or IPv6 address."
        );
        assert_eq!(
            e("dst_port abc"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : 'abc' is not a number."
        );
        assert_eq!(
            e("dst_port 80 -m str 80"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : '-m' is not a valid number range."
        );
        assert_eq!(
            e("req.hdr(host,x) a"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : fetch method 'req.hdr' : failed to parse 'x' as type 'integer' at position 2 in ACL expression 'req.hdr(host,x)'."
        );
        assert_eq!(
            e("src(1) 1.2.3.4"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : fetch method 'src' : expected ')' before '1)' in ACL expression 'src(1)'."
        );
        assert_eq!(
            e("hdr(a,1,2) x"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : ACL keyword 'hdr' : expected ')' before ',2)'."
        );
        assert_eq!(
            e("path,foo /x"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : ACL keyword 'path' : unknown converter 'foo'.."
        );
        assert_eq!(
            e("path -z x"),
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : '-z' is not a valid ACL option. Please use '--' before any pattern beginning with a '-'."
        );
        assert!(e("path_reg (").starts_with(
            "parsing [t.cfg:9] : error detected while parsing ACL 'a9' : regex '(' is invalid (error="
        ));
        let bad = compile_acls(&[def("9a!x", "path /", 9)]).unwrap_err();
        assert_eq!(
            bad[0].to_string(),
            "parsing [t.cfg:9] : character '!' is not permitted in acl name '9a!x'."
        );
        let set = AclSet::default();
        let c = Cond {
            unless: false,
            tokens: toks("nosuch"),
            loc: loc(18),
        };
        let err = compile_cond(&c, &set).unwrap_err();
        assert_eq!(
            err.in_rule("http-request deny"),
            "error detected while parsing an 'http-request deny' condition : no such ACL : 'nosuch'."
        );
        assert_eq!(
            compile_cond_tokens(false, &toks("{ path /x"), &set).unwrap_err(),
            "missing closing '}' in condition"
        );
        assert_eq!(
            compile_cond_tokens(false, &toks("{ }"), &set).unwrap_err(),
            "missing fetch method in ACL expression ''"
        );
    }

    #[test]
    fn options_and_double_dash() {
        let r = req("GET", "-x", &[]);
        let c = ctx(Some(&r), "1.1.1.1");
        assert!(m("path -- -x", &c));
        assert!(m("path -i -m beg -- -X", &c));
        assert!(m("dst_port 80:90 gt 3", &c));
    }
}
