//! The section state machine: feeds each line's words to the keyword tables of the current
//! section, applies `defaults` inheritance when a proxy section opens, and runs the checks that
//! need the whole configuration (references, ids, conflicting binds) at the end.

use super::diag::{Diag, Severity};
use super::model::{
    BindAddr, Cap, Config, Global, HttpRequestAction, LoadServerState, Loc, Mode, Proxy,
};
use super::values::invalid_name_char;
use super::{Sys, cond, kw_global, kw_proxy, lexer, suggest};
use std::sync::Arc;

/// What a keyword parser needs besides its target: where it is and where to report.
pub(crate) struct Ctx<'a> {
    pub loc: Loc,
    pub diags: &'a mut Vec<Diag>,
    pub sys: &'a Sys<'a>,
}

impl Ctx<'_> {
    pub fn alert(&mut self, msg: impl Into<String>) {
        self.diags
            .push(Diag::alert(&self.loc.file, self.loc.line, msg));
    }
    /// An alert worded `parsing [f:l]: msg` (HAProxy's spacing for some global keywords).
    pub fn alert_tight(&mut self, msg: impl Into<String>) {
        self.diags.push(Diag::reader(
            &self.loc.file,
            self.loc.line,
            Severity::Alert,
            msg,
        ));
    }
    pub fn warn(&mut self, msg: impl Into<String>) {
        self.diags
            .push(Diag::warning(&self.loc.file, self.loc.line, msg));
    }
    /// HAProxy's `alertif_too_many_args`: true (and an alert) when `args` has more than `max`
    /// words after the keyword (`kw_words` words long).
    pub fn too_many(&mut self, args: &[String], kw_words: usize, max: usize) -> bool {
        match args.get(kw_words + max) {
            Some(extra) => {
                let kw = args.get(..kw_words).unwrap_or_default().join(" ");
                self.alert(format!(
                    "'{kw}' cannot handle unexpected argument '{extra}'."
                ));
                true
            }
            None => false,
        }
    }
}

enum Section {
    None,
    Global,
    Defaults(usize),
    Proxy(usize),
    /// An `http-errors <name>` section (index in `Parser::http_errors`).
    HttpErrors(usize),
    /// A `userlist <name>` section (index in `Parser::userlists`).
    Userlist(usize),
    /// A `program <name>` section (index in `Parser::programs`).
    Program(usize),
    /// A `resolvers <name>` section (index in `Parser::resolvers`).
    Resolvers(usize),
    /// A `peers <name>` section (index in `Parser::peers`).
    Peers(usize),
    /// After a broken section header or in a section kind we do not support: lines are ignored.
    Skip,
}

pub(crate) const UNSUPPORTED_SECTIONS: &[&str] = &[
    "mailers",
    "ring",
    "cache",
    "fcgi-app",
    "crt-store",
    "log-forward",
];

pub(crate) struct Parser<'s> {
    sys: &'s Sys<'s>,
    pub diags: Vec<Diag>,
    pub global: Global,
    pub proxies: Vec<Proxy>,
    /// Every `defaults` section so far: (name, settings). The last one applies to new proxies.
    defaults: Vec<(Option<String>, Proxy)>,
    section: Section,
    /// Open `.if` blocks of the current file, innermost last.
    conds: Vec<CondState>,
    /// HAProxy left its line loop for this file (`break` after some errors).
    stop_file: bool,
    /// HAProxy stopped reading the configuration (`ERR_ABORT`).
    aborted: bool,
    /// `http-errors` sections: (name, where, pages).
    http_errors: Vec<HttpErrors>,
    userlists: Vec<super::model::Userlist>,
    programs: Vec<super::model::Program>,
    resolvers: Vec<super::model::Resolvers>,
    peers: Vec<super::model::PeersSection>,
    /// The `peers` section being read.
    peers_reading: super::kw_peers::Reading,
    /// This process' peer name: `-L`, else `localpeer`, else the host name.
    localpeer: String,
}

struct HttpErrors {
    name: String,
    loc: Loc,
    pages: Vec<(u16, Vec<u8>)>,
}

/// Where a `.if` block stands (HAProxy's `nested_cond_state`): TAKE lines are parsed, DROP
/// lines are not (the condition was false), SKIP lines are not (an earlier branch was taken or
/// the enclosing block is masked, so this condition is never evaluated).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CondState {
    IfTake,
    IfDrop,
    IfSkip,
    ElifTake,
    ElifDrop,
    ElifSkip,
    ElseTake,
    ElseDrop,
}

impl CondState {
    fn masked(self) -> bool {
        !matches!(
            self,
            CondState::IfTake | CondState::ElifTake | CondState::ElseTake
        )
    }
    /// A branch of this block was (or is being) taken, or it never evaluates anything.
    fn settled(self) -> bool {
        matches!(
            self,
            CondState::IfTake | CondState::IfSkip | CondState::ElifTake | CondState::ElifSkip
        )
    }
    fn after_else(self) -> bool {
        matches!(self, CondState::ElseTake | CondState::ElseDrop)
    }
}

/// HAProxy's MAXNESTEDCONDS.
const MAX_NESTED_CONDS: usize = 100;

impl<'s> Parser<'s> {
    pub fn new(sys: &'s Sys<'s>) -> Self {
        // `lua-load` lines register keywords as they are read: start from none.
        if let Some(h) = crate::ana::script::host() {
            h.reset();
        }
        Parser {
            sys,
            diags: Vec::new(),
            global: Global::default(),
            proxies: Vec::new(),
            defaults: Vec::new(),
            section: Section::None,
            conds: Vec::new(),
            stop_file: false,
            aborted: false,
            http_errors: Vec::new(),
            userlists: Vec::new(),
            programs: Vec::new(),
            resolvers: Vec::new(),
            peers: Vec::new(),
            peers_reading: Default::default(),
            localpeer: sys.localpeer.to_string(),
        }
    }

    /// Parses one file's text. Sections do not continue across files (HAProxy's rule).
    pub fn feed(&mut self, file: &str, text: &str) {
        let file: Arc<str> = Arc::from(file);
        self.section = Section::None;
        self.conds.clear();
        self.stop_file = false;
        if self.aborted {
            return;
        }
        let mut last = 0u32;
        let pieces: Vec<&str> = text.split('\n').collect();
        for (i, raw) in pieces.iter().enumerate() {
            // The empty piece after a final newline is not a line.
            if i + 1 == pieces.len() && raw.is_empty() && i > 0 {
                break;
            }
            last = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let loc = Loc {
                file: file.clone(),
                line: last,
            };
            self.line(loc, raw);
            if self.aborted || self.stop_file {
                break;
            }
        }
        if !self.aborted && !self.conds.is_empty() {
            self.reader_abort(&file, last, "non-terminated '.if' block.".to_string());
        }
    }

    fn reader_abort(&mut self, file: &str, line: u32, msg: String) {
        let mut d = Diag::reader(file, line, Severity::Alert, msg);
        d.abort = true;
        self.diags.push(d);
        self.aborted = true;
    }

    fn reader_alert(&mut self, loc: &Loc, msg: String) {
        self.diags
            .push(Diag::reader(&loc.file, loc.line, Severity::Alert, msg));
    }

    /// `.if`/`.elif`/`.else`/`.endif` (and, outside masked blocks, `.alert`/`.warning`/
    /// `.notice`/`.diag`): true when the line is consumed (a directive or masked out).
    fn directive(&mut self, loc: &Loc, words: &[String]) -> bool {
        let first = words.first().map_or("", String::as_str);
        let top = self.conds.last().copied();
        let extra = words.get(1).filter(|w| !w.is_empty());
        match first {
            ".if" => {
                if self.conds.len() + 1 >= MAX_NESTED_CONDS {
                    self.reader_abort(
                        &loc.file,
                        loc.line,
                        format!("too many nested '.if', max is {MAX_NESTED_CONDS}."),
                    );
                    return true;
                }
                if top.is_some_and(CondState::masked) {
                    self.conds.push(CondState::IfSkip);
                    return true;
                }
                if let Some(v) = self.condition(loc, ".if", words) {
                    self.conds.push(if v {
                        CondState::IfTake
                    } else {
                        CondState::IfDrop
                    });
                }
                return true;
            }
            ".elif" => {
                let Some(t) = top else {
                    let msg = "lone '.elif' with no matching '.if'.".to_string();
                    self.reader_abort(&loc.file, loc.line, msg);
                    return true;
                };
                if t.after_else() {
                    let msg = "'.elif' after '.else' is not permitted.".to_string();
                    self.reader_abort(&loc.file, loc.line, msg);
                    return true;
                }
                let next = if t.settled() {
                    Some(CondState::ElifSkip)
                } else {
                    self.condition(loc, ".elif", words).map(|v| {
                        if v {
                            CondState::ElifTake
                        } else {
                            CondState::ElifDrop
                        }
                    })
                };
                if let (Some(n), Some(slot)) = (next, self.conds.last_mut()) {
                    *slot = n;
                }
                return true;
            }
            ".else" | ".endif" => {
                // HAProxy aborts on all of these (ERR_ABORT).
                if let Some(a) = extra {
                    let msg = format!("Unexpected argument '{a}' for '{first}'.");
                    self.reader_abort(&loc.file, loc.line, msg);
                    return true;
                }
                let Some(t) = top else {
                    let msg = format!("lone '{first}' with no matching '.if'.");
                    self.reader_abort(&loc.file, loc.line, msg);
                    return true;
                };
                if first == ".endif" {
                    self.conds.pop();
                    return true;
                }
                if t.after_else() {
                    let msg = "'.else' after '.else' is not permitted.".to_string();
                    self.reader_abort(&loc.file, loc.line, msg);
                    return true;
                }
                if let Some(slot) = self.conds.last_mut() {
                    *slot = if t.settled() {
                        CondState::ElseDrop
                    } else {
                        CondState::ElseTake
                    };
                }
                return true;
            }
            _ => {}
        }
        if top.is_some_and(CondState::masked) {
            return true;
        }
        if !first.starts_with('.') {
            return false;
        }
        let sev = match first {
            ".alert" => Severity::Alert,
            ".warning" => Severity::Warning,
            ".notice" => Severity::Notice,
            ".diag" => Severity::Notice,
            _ => {
                self.reader_alert(loc, format!("unknown directive '{first}'."));
                self.stop_file = true;
                return true;
            }
        };
        if let Some(a) = words.get(2).filter(|w| !w.is_empty()) {
            self.reader_alert(
                loc,
                format!(
                    "Unexpected argument '{a}' for '{first}'. Use quotes if the message should contain spaces."
                ),
            );
            return true;
        }
        let msg = format!("'{}'.", words.get(1).map_or("", String::as_str));
        match first {
            ".alert" => self.reader_abort(&loc.file, loc.line, msg),
            // `.diag` messages are only shown in HAProxy's diagnostic mode (-dD).
            ".diag" => {}
            _ => self.diags.push(Diag::reader(&loc.file, loc.line, sev, msg)),
        }
        true
    }

    /// Evaluates the condition of a `.if`/`.elif` line; `None` after reporting an error (which
    /// stops the configuration, as in HAProxy).
    fn condition(&mut self, loc: &Loc, kw: &str, words: &[String]) -> Option<bool> {
        // HAProxy re-joins the line's words with single spaces.
        let expr = words.get(1..).unwrap_or_default().join(" ");
        match cond::eval_at(&expr, self.sys.env) {
            Ok(v) => Some(v),
            Err(e) => {
                let caret = format!("{:>w$}", "^", w = e.pos + kw.len() + 2);
                let msg = format!(
                    "{} in '{kw}' at position {}:\n  {kw} {expr}\n  {caret}",
                    e.msg,
                    e.pos + 1
                );
                self.reader_abort(&loc.file, loc.line, msg);
                None
            }
        }
    }

    fn line(&mut self, loc: Loc, raw: &str) {
        let words = match lexer::split_line(raw, self.sys.env) {
            Ok(w) => w,
            Err(e) => {
                self.diags
                    .push(Diag::alert(&loc.file, loc.line, e.describe(raw)));
                return;
            }
        };
        let Some(first) = words.first() else { return };
        if first.is_empty() {
            return;
        }
        if (first.starts_with('.') || !self.conds.is_empty()) && self.directive(&loc, &words) {
            return;
        }
        match first.as_str() {
            "global" => {
                self.section = Section::Global;
                return;
            }
            "defaults" => return self.open_defaults(loc, &words),
            "frontend" | "backend" | "listen" => return self.open_proxy(loc, &words),
            "http-errors" => return self.open_http_errors(loc, &words),
            "userlist" => return self.open_userlist(loc, &words),
            "resolvers" => {
                self.section = Section::Skip;
                let mut ctx = Ctx {
                    loc,
                    diags: &mut self.diags,
                    sys: self.sys,
                };
                if let Some(r) = super::kw_resolvers::open(&mut ctx, &words, &self.resolvers) {
                    self.resolvers.push(r);
                    self.section = Section::Resolvers(self.resolvers.len() - 1);
                }
                return;
            }
            "peers" => {
                self.section = Section::Skip;
                let mut ctx = Ctx {
                    loc,
                    diags: &mut self.diags,
                    sys: self.sys,
                };
                if let Some(p) = super::kw_peers::open(&mut ctx, &words, &self.peers) {
                    self.peers.push(p);
                    self.peers_reading = Default::default();
                    self.section = Section::Peers(self.peers.len() - 1);
                } else if self.diags.last().is_some_and(|d| d.abort) {
                    self.aborted = true;
                }
                return;
            }
            "program" => {
                self.section = Section::Skip;
                let mut ctx = Ctx {
                    loc,
                    diags: &mut self.diags,
                    sys: self.sys,
                };
                if let Some(p) = super::kw_program::open(&mut ctx, &words, &self.programs) {
                    self.programs.push(p);
                    self.section = Section::Program(self.programs.len() - 1);
                }
                return;
            }
            s if UNSUPPORTED_SECTIONS.contains(&s) => {
                self.diags.push(Diag::alert(
                    &loc.file,
                    loc.line,
                    format!("'{s}' sections are not supported by portcullis."),
                ));
                self.section = Section::Skip;
                return;
            }
            _ => {}
        }
        let mut ctx = Ctx {
            loc,
            diags: &mut self.diags,
            sys: self.sys,
        };
        match self.section {
            Section::None => {
                ctx.alert(format!("unknown keyword '{first}' out of section."));
            }
            Section::Skip => {}
            Section::HttpErrors(i) => {
                if first == "errorfile" {
                    if let Some(page) = super::kw_pages::load_errorfile(&mut ctx, &words)
                        && let Some(h) = self.http_errors.get_mut(i)
                    {
                        h.pages.push(page);
                    }
                } else {
                    ctx.alert(format!(
                        "unknown keyword '{first}' in 'http-errors' section"
                    ));
                }
            }
            Section::Resolvers(i) => {
                if let Some(r) = self.resolvers.get_mut(i) {
                    super::kw_resolvers::dispatch(r, &mut ctx, &words);
                }
            }
            Section::Peers(i) => {
                if let Some(s) = self.peers.get_mut(i) {
                    let mut pending = Vec::new();
                    super::kw_peers::dispatch(
                        s,
                        &mut self.peers_reading,
                        &mut ctx,
                        &words,
                        &self.localpeer,
                        &self.proxies,
                        &mut pending,
                    );
                    for kw in pending {
                        self.global.pending.push((kw, ctx.loc.clone()));
                    }
                }
            }
            Section::Program(i) => {
                if let Some(p) = self.programs.get_mut(i) {
                    super::kw_program::dispatch(p, &mut ctx, &words);
                }
            }
            Section::Userlist(i) => {
                if let Some(ul) = self.userlists.get_mut(i) {
                    super::kw_userlist::dispatch(ul, &mut ctx, &words);
                }
            }
            // `localpeer` names the peer matched while `peers` sections are read (HAProxy
            // compares as it parses), so it only counts before them and without `-L`.
            Section::Global
                if first == "localpeer" && words.get(1).is_some_and(|w| !w.is_empty()) =>
            {
                if ctx.too_many(&words, 1, 1) {
                    return;
                }
                if ctx.sys.localpeer_cmdline {
                    ctx.warn(
                        "'localpeer' ignored since it is already set by using the '-L' command line argument.",
                    );
                } else if !self.peers.is_empty() {
                    ctx.warn("'localpeer' ignored since it is used after 'peers' section.");
                } else {
                    self.localpeer = words[1].clone();
                    kw_global::dispatch(&mut self.global, &mut ctx, &words);
                }
            }
            Section::Global => kw_global::dispatch(&mut self.global, &mut ctx, &words),
            Section::Defaults(i) => {
                if let Some((name, px)) = self.defaults.get_mut(i) {
                    kw_proxy::dispatch(px, Some(name.is_some()), &self.global, &mut ctx, &words);
                }
            }
            Section::Proxy(i) => {
                if let Some(px) = self.proxies.get_mut(i) {
                    kw_proxy::dispatch(px, None, &self.global, &mut ctx, &words);
                }
            }
        }
    }

    fn find_defaults(&self, name: &str) -> Option<&Proxy> {
        self.defaults
            .iter()
            .rev()
            .find(|(n, _)| n.as_deref() == Some(name))
            .map(|(_, p)| p)
    }

    /// Settings a new section starts from: `from <name>`, else the last defaults section.
    fn base(&mut self, loc: &Loc, from: Option<&str>, what: &str) -> Option<Proxy> {
        match from {
            Some(n) => match self.find_defaults(n) {
                Some(p) => Some(p.clone()),
                None => {
                    self.diags.push(Diag::alert(
                        &loc.file,
                        loc.line,
                        format!("defaults section '{n}' not found for {what}."),
                    ));
                    None
                }
            },
            None => self.defaults.last().map(|(_, p)| p.clone()),
        }
    }

    /// `[from <name>]` after a section name; `Err` for anything else.
    fn parse_from<'w>(&mut self, loc: &Loc, words: &'w [String]) -> Result<Option<&'w str>, ()> {
        match words.get(2).map(String::as_str) {
            None => Ok(None),
            Some("from") => match words.get(3) {
                Some(n) if words.len() == 4 => Ok(Some(n.as_str())),
                _ => {
                    self.diags.push(Diag::alert(
                        &loc.file,
                        loc.line,
                        format!("'{}' : 'from' expects a defaults section name.", words[0]),
                    ));
                    Err(())
                }
            },
            Some(_) => {
                let msg = if words[0] == "backend" || words[0] == "defaults" {
                    format!("'{}' : 'from' or end of line expected.", words[0])
                } else {
                    "please use the 'bind' keyword for listening addresses.".to_string()
                };
                self.diags.push(Diag::alert(&loc.file, loc.line, msg));
                Err(())
            }
        }
    }

    /// `http-errors <name>`: a set of `errorfile` lines that `errorfiles` refers to.
    fn open_http_errors(&mut self, loc: Loc, words: &[String]) {
        self.section = Section::Skip;
        let Some(name) = words.get(1).filter(|n| !n.is_empty()) else {
            self.diags.push(Diag::alert(
                &loc.file,
                loc.line,
                format!("{} : missing name", words[0]),
            ));
            return;
        };
        if let Some(c) = invalid_name_char(name) {
            self.diags.push(Diag::alert(
                &loc.file,
                loc.line,
                format!(
                    "character '{c}' is not permitted in '{}' name '{name}'.",
                    words[0]
                ),
            ));
            return;
        }
        if let Some(prev) = self.http_errors.iter().find(|h| h.name == *name) {
            self.diags.push(Diag::alert(
                &loc.file,
                loc.line,
                format!(
                    "{} section '{name}' has the same name as another {} section declared at {}:{}.",
                    words[0], words[0], prev.loc.file, prev.loc.line
                ),
            ));
            return;
        }
        self.http_errors.push(HttpErrors {
            name: name.clone(),
            loc,
            pages: Vec::new(),
        });
        self.section = Section::HttpErrors(self.http_errors.len() - 1);
    }

    /// `userlist <name>`.
    fn open_userlist(&mut self, loc: Loc, words: &[String]) {
        self.section = Section::Skip;
        let mut ctx = Ctx {
            loc,
            diags: &mut self.diags,
            sys: self.sys,
        };
        let Some(name) = super::kw_userlist::open(&mut ctx, words, &self.userlists) else {
            return;
        };
        self.userlists.push(super::model::Userlist {
            name,
            ..Default::default()
        });
        self.section = Section::Userlist(self.userlists.len() - 1);
    }

    /// `errorfiles` lines take their pages from the `http-errors` sections (HAProxy's
    /// `proxy_check_errors`).
    fn resolve_errorfiles(&mut self) {
        for px in &mut self.proxies {
            for r in std::mem::take(&mut px.extra.errorfiles_refs) {
                let Some(h) = self.http_errors.iter().find(|h| h.name == r.section) else {
                    self.diags.push(Diag::global(
                        Severity::Alert,
                        format!(
                            "proxy '{}': unknown http-errors section '{}' (at {}:{}).",
                            px.name, r.section, r.loc.file, r.loc.line
                        ),
                    ));
                    continue;
                };
                let codes: Vec<u16> = if r.statuses.is_empty() {
                    super::kw_pages::ERR_CODES.to_vec()
                } else {
                    r.statuses.clone()
                };
                for code in codes {
                    match h.pages.iter().rev().find(|(s, _)| *s == code) {
                        Some(page) => px.extra.error_pages.push(page.clone()),
                        None if !r.statuses.is_empty() => self.diags.push(Diag::global(
                            Severity::Warning,
                            format!(
                                "config: proxy '{}' : status '{code}' not declared in http-errors section '{}' (at {}:{}).",
                                px.name, h.name, r.loc.file, r.loc.line
                            ),
                        )),
                        None => {}
                    }
                }
            }
        }
    }

    fn open_defaults(&mut self, loc: Loc, words: &[String]) {
        let name = words.get(1).filter(|n| n.as_str() != "from").cloned();
        let from_words: Vec<String> = if name.is_none() {
            // `defaults from x`: shift so that `from` sits where parse_from expects it.
            let mut w = vec![words[0].clone(), String::new()];
            w.extend(words.iter().skip(1).cloned());
            w
        } else {
            words.to_vec()
        };
        if let Some(n) = &name
            && let Some(c) = invalid_name_char(n)
        {
            self.diags.push(Diag::alert(
                &loc.file,
                loc.line,
                format!("character '{c}' is not permitted in 'defaults' name '{n}'."),
            ));
        }
        let Ok(from) = self.parse_from(&loc, &from_words) else {
            self.section = Section::Skip;
            return;
        };
        let what = format!("defaults '{}'", name.as_deref().unwrap_or(""));
        let mut px = match from {
            Some(f) => match self.base(&loc, Some(f), &what) {
                Some(p) => p,
                None => {
                    self.section = Section::Skip;
                    return;
                }
            },
            // A defaults section without `from` resets everything to the built-in values.
            None => Proxy::new("", Cap::default(), loc.clone()),
        };
        px.name = name.clone().unwrap_or_default();
        px.loc = loc;
        self.defaults.push((name, px));
        self.section = Section::Defaults(self.defaults.len() - 1);
    }

    fn open_proxy(&mut self, loc: Loc, words: &[String]) {
        let kw = words[0].as_str();
        let cap = match kw {
            "frontend" => Cap {
                frontend: true,
                backend: false,
            },
            "backend" => Cap {
                frontend: false,
                backend: true,
            },
            _ => Cap {
                frontend: true,
                backend: true,
            },
        };
        self.section = Section::Skip;
        let Some(name) = words.get(1).filter(|n| !n.is_empty()) else {
            self.diags.push(Diag::alert(
                &loc.file,
                loc.line,
                format!("'{kw}' expects an <id> argument"),
            ));
            return;
        };
        if let Some(c) = invalid_name_char(name) {
            self.diags.push(Diag::alert(
                &loc.file,
                loc.line,
                format!("character '{c}' is not permitted in '{kw}' name '{name}'."),
            ));
            return;
        }
        let Ok(from) = self.parse_from(&loc, words) else {
            return;
        };
        let kind = Proxy::new("", cap, loc.clone()).kind();
        if let Some(other) = self.proxies.iter().find(|p| {
            p.name == *name && ((p.cap.frontend && cap.frontend) || (p.cap.backend && cap.backend))
        }) {
            let msg = format!(
                "{kind} '{name}' has the same name as {} '{name}' declared at {}.",
                other.kind(),
                other.loc
            );
            self.diags.push(Diag::alert(&loc.file, loc.line, msg));
        }
        let what = format!("{kw} '{name}'");
        let px = match self.base(&loc, from, &what) {
            Some(base) => inherit(base, name, cap, loc),
            None if from.is_some() => return,
            None => Proxy::new(name, cap, loc),
        };
        self.proxies.push(px);
        self.section = Section::Proxy(self.proxies.len() - 1);
    }

    /// Whole-configuration checks and derived values; returns the configuration.
    pub fn finish(mut self) -> (Config, Vec<Diag>) {
        if self.aborted {
            let config = Config {
                global: self.global,
                proxies: self.proxies,
                userlists: self.userlists,
                programs: self.programs,
                resolvers: self.resolvers,
                peers: self.peers,
            };
            return (config, self.diags);
        }
        self.resolve_errorfiles();
        super::kw_userlist::check(&self.userlists, &mut self.diags);
        // `unix-bind` shapes UNIX listeners (prefix, mode, owner): not applied yet, so it only
        // matters, and refuses the start, when the configuration has one.
        if self.global.process.unix_bind != super::model::UnixBind::default()
            && let Some(b) = self
                .proxies
                .iter()
                .flat_map(|p| p.binds.iter())
                .find(|b| matches!(b.addr, BindAddr::Unix(_)))
        {
            self.global
                .pending
                .push(("unix-bind (with a UNIX bind)".to_string(), b.loc.clone()));
        }
        for px in &mut self.proxies {
            kw_proxy::finish_proxy(px, &self.global, &mut self.diags);
        }
        if !self.resolvers.iter().any(|r| r.name == "default")
            && let Some(d) =
                super::kw_resolvers::implicit_default((self.sys.read)("/etc/resolv.conf"))
        {
            self.resolvers.push(d);
        }
        super::kw_resolvers::finish(
            &mut self.proxies,
            &self.resolvers,
            self.sys.resolve,
            &mut self.diags,
        );
        super::kw_peers::finish(
            &mut self.peers,
            &mut self.proxies,
            &self.localpeer,
            &mut self.diags,
        );
        assign_ids(&self.global, &mut self.proxies, &mut self.diags);
        check_references(&self.proxies, &mut self.diags);
        check_binds(&self.global, &self.proxies, &mut self.diags);
        check_server_tls(&self.global, &self.proxies, &mut self.diags);
        for px in &self.proxies {
            let mixed = px.stats.as_ref().is_some_and(|st| {
                !st.http_request.is_empty() && (!st.auth.is_empty() || st.realm.is_some())
            });
            if mixed {
                self.diags.push(Diag::global(Severity::Alert, format!("proxy '{}': stats 'auth'/'realm' and 'http-request' can't be used at the same time.", px.name)));
            }
        }
        // Advice about a configuration that does not parse is noise (HAProxy stops earlier).
        if !self.diags.iter().any(Diag::is_alert) {
            for px in &self.proxies {
                warn_proxy(px, &mut self.diags);
                let global_state = px.extra.load_server_state == Some(LoadServerState::Global);
                if px.cap.backend && global_state && self.global.process.server_state_file.is_none()
                {
                    self.diags.push(Diag::global(Severity::Warning, format!("backend '{}' configured to load server state file from global section 'server-state-file' directive. Unfortunately, 'server-state-file' is not set!", px.name)));
                }
            }
        }
        (
            Config {
                global: self.global,
                proxies: self.proxies,
                userlists: self.userlists,
                programs: self.programs,
                resolvers: self.resolvers,
                peers: self.peers,
            },
            self.diags,
        )
    }
}

/// A new proxy from a defaults section: what HAProxy copies (`proxy_preset_defaults` /
/// `init_new_proxy`), not the per-proxy things (binds, servers, id).
fn inherit(base: Proxy, name: &str, cap: Cap, loc: Loc) -> Proxy {
    let mut px = base;
    px.name = name.to_string();
    px.cap = cap;
    px.loc = loc;
    px.id = 0;
    px.binds.clear();
    px.servers.clear();
    px.use_backends.clear();
    px.disabled = false;
    px.extra.checks_inherited = true;
    if !cap.frontend {
        px.default_backend = None;
    }
    px
}

fn assign_ids(global: &Global, proxies: &mut [Proxy], diags: &mut Vec<Diag>) {
    let mut used: Vec<u32> = Vec::new();
    for i in 0..proxies.len() {
        let id = proxies[i].id;
        if id == 0 {
            continue;
        }
        if let Some(prev) = proxies[..i].iter().find(|p| p.id == id) {
            let p = &proxies[i];
            diags.push(Diag::alert(
                &p.loc.file,
                p.loc.line,
                format!(
                    "{} {} reuses same custom id as {} {} (declared at {}).",
                    p.kind(),
                    p.name,
                    prev.kind(),
                    prev.name,
                    prev.loc
                ),
            ));
        }
        used.push(id);
    }
    let mut next = 1u32;
    let mut take = |used: &mut Vec<u32>| {
        while used.contains(&next) {
            next += 1;
        }
        used.push(next);
        next
    };
    // The hidden GLOBAL (stats socket) proxy consumes the first automatic id.
    if !global.stats_sockets.is_empty() {
        take(&mut used);
    }
    for px in proxies.iter_mut() {
        if px.id == 0 {
            px.id = take(&mut used);
        }
        let mut sused: Vec<u32> = px.servers.iter().map(|s| s.id).filter(|&i| i > 0).collect();
        let mut snext = 1u32;
        for s in &mut px.servers {
            if s.id == 0 {
                while sused.contains(&snext) {
                    snext += 1;
                }
                s.id = snext;
                sused.push(snext);
            }
        }
    }
}

fn check_references(proxies: &[Proxy], diags: &mut Vec<Diag>) {
    // A stick rule's table: its own `stick-table`, or the named proxy's.
    for px in proxies.iter().filter(|p| p.cap.backend) {
        for r in &px.stick_rules {
            let name = r.table.as_deref().unwrap_or(&px.name);
            let found = proxies
                .iter()
                .any(|t| t.name == name && t.stick_table.is_some());
            if !found {
                diags.push(Diag::global(
                    Severity::Alert,
                    format!("Proxy '{}': unable to find stick-table '{name}'.", px.name),
                ));
            }
        }
    }
    // A backend's `default_backend` (ignored, with a warning) is still checked, as HAProxy.
    for px in proxies.iter().filter(|p| !p.cap.frontend) {
        let Some((name, loc)) = &px.default_backend else {
            continue;
        };
        if *name == px.name {
            diags.push(Diag::global(
                Severity::Alert,
                format!(
                    "Proxy '{}': loop detected for default_backend: '{name}'.",
                    px.name
                ),
            ));
        } else if !proxies.iter().any(|p| p.cap.backend && p.name == *name) {
            diags.push(Diag::alert(
                &loc.file,
                loc.line,
                format!(
                    "Proxy '{}': unable to find required default_backend: '{name}'.",
                    px.name
                ),
            ));
        }
    }
    for px in proxies.iter().filter(|p| p.cap.frontend) {
        let targets = px
            .default_backend
            .iter()
            .map(|(n, l)| (n, l, "default_backend"))
            .chain(
                px.use_backends
                    .iter()
                    .map(|u| (&u.backend, &u.loc, "use_backend")),
            );
        for (name, loc, kw) in targets {
            // Names built from a log-format expression are only known at run time.
            if name.contains("%[") {
                continue;
            }
            match proxies.iter().find(|p| p.cap.backend && p.name == *name) {
                None => diags.push(Diag::alert(
                    &loc.file,
                    loc.line,
                    format!(
                        "Proxy '{}': unable to find required {kw}: '{name}'.",
                        px.name
                    ),
                )),
                Some(be) if be.mode == Mode::Tcp && px.mode == Mode::Http => {
                    let role = if kw == "default_backend" {
                        "default backend"
                    } else {
                        "backend"
                    };
                    diags.push(Diag::alert(
                        &loc.file,
                        loc.line,
                        format!(
                            "http {} '{}' ({}) tries to use incompatible tcp backend '{}' ({}) as its {role} (see 'mode').",
                            px.kind(),
                            px.name,
                            px.loc,
                            be.name,
                            be.loc
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
    }
}

/// Inet listeners are bound with SO_REUSEPORT, so the same address in two places (or `*:p`
/// beside `127.0.0.1:p`) is accepted, as HAProxy does; a UNIX path or an inherited fd can only
/// be used once.
fn check_binds(global: &Global, proxies: &[Proxy], diags: &mut Vec<Diag>) {
    let mut seen: Vec<(&BindAddr, &Loc, String)> = Vec::new();
    for s in &global.stats_sockets {
        seen.push((&s.addr, &s.loc, "'stats socket'".to_string()));
    }
    for px in proxies.iter().filter(|p| !p.disabled) {
        for b in &px.binds {
            if let Some((_, loc, owner)) = seen.iter().find(|(a, _, _)| overlaps(a, &b.addr)) {
                diags.push(Diag::alert(
                    &b.loc.file,
                    b.loc.line,
                    format!(
                        "'bind {}' : address already used by {owner} at {loc}.",
                        show_addr(&b.addr)
                    ),
                ));
            }
            seen.push((&b.addr, &b.loc, format!("{} '{}'", px.kind(), px.name)));
        }
    }
}

/// A server that verifies its peer needs a CA file (HAProxy refuses to start otherwise).
fn check_server_tls(global: &Global, proxies: &[Proxy], diags: &mut Vec<Diag>) {
    for px in proxies.iter().filter(|p| !p.disabled) {
        for s in px.servers.iter().filter(|s| s.opts.ssl || s.opts.check_ssl) {
            let verify_none = if s.opts.verify_set {
                s.opts.verify_none
            } else {
                global.ssl_server_verify_none
            };
            if verify_none || s.opts.ca_file.is_some() {
                continue;
            }
            let why = if global.ssl_server_verify_none {
                "verify is enabled but no CA file specified."
            } else {
                "verify is enabled by default but no CA file specified. If you're running on a \
                 LAN where you're certain to trust the server's certificate, please set an \
                 explicit 'verify none' statement on the 'server' line, or use \
                 'ssl-server-verify none' in the global section to disable server-side \
                 verifications by default."
            };
            diags.push(Diag::global(
                Severity::Alert,
                format!(
                    "[{}:{}] : 'server {}/{}' : {why}",
                    s.loc.file, s.loc.line, px.name, s.name
                ),
            ));
        }
    }
}

pub(crate) fn show_addr(a: &BindAddr) -> String {
    match a {
        BindAddr::Inet(sa) => sa.to_string(),
        BindAddr::Unix(p) => p.clone(),
        BindAddr::Abns(n) => format!("abns@{n}"),
        BindAddr::Fd(n) => format!("fd@{n}"),
    }
}

fn overlaps(a: &BindAddr, b: &BindAddr) -> bool {
    match (a, b) {
        (BindAddr::Unix(x), BindAddr::Unix(y)) | (BindAddr::Abns(x), BindAddr::Abns(y)) => x == y,
        (BindAddr::Fd(x), BindAddr::Fd(y)) => x == y,
        _ => false,
    }
}

fn warn_proxy(px: &Proxy, diags: &mut Vec<Diag>) {
    if px.disabled {
        return;
    }
    let t = &px.timeouts;
    if (px.cap.frontend && t.client.is_none())
        || (px.cap.backend && (t.connect.is_none() || t.server.is_none()))
    {
        diags.push(Diag::global(
            Severity::Warning,
            format!(
                "missing timeouts for {} '{}'.\n   | While not properly invalid, you will certainly encounter various problems\n   | with such a configuration. To fix this, please ensure that all following\n   | timeouts are set to a non-zero value: 'client', 'connect', 'server'.",
                px.kind(),
                px.name
            ),
        ));
    }
    if px.cap.frontend && px.binds.is_empty() {
        diags.push(Diag::global(
            Severity::Warning,
            format!(
                "{} '{}' has no 'bind' directive. Please declare it as a backend if this was intended.",
                if px.cap.backend { "proxy" } else { "frontend" },
                px.name
            ),
        ));
    }
    // `capture … id <n>` names a slot the frontend declares (HAProxy's post-parse check).
    if px.cap.frontend {
        for (kw, rules, slots) in [
            ("http-request", &px.http_request, px.captures.req.len()),
            ("http-response", &px.http_response, px.captures.res.len()),
            (
                "http-after-response",
                &px.http_after_response,
                px.captures.res.len(),
            ),
        ] {
            for r in rules {
                if let HttpRequestAction::Capture { slot, len: 0, .. } = r.action
                    && slot >= slots
                {
                    diags.push(Diag::global(
                        Severity::Alert,
                        format!(
                            "Proxy '{}': unable to find capture id '{slot}' referenced by {kw} capture rule.",
                            px.name
                        ),
                    ));
                }
            }
        }
    }
    for (kw, empty) in [
        ("http-request", px.http_request.is_empty()),
        ("http-response", px.http_response.is_empty()),
        ("http-after-response", px.http_after_response.is_empty()),
    ] {
        if px.mode == Mode::Tcp && !empty {
            diags.push(Diag::global(
                Severity::Warning,
                format!(
                    "'{kw}' rules ignored for {} '{}' as they require HTTP mode.",
                    px.kind(),
                    px.name
                ),
            ));
        }
    }
}

/// "unknown keyword" with HAProxy's "did you mean" suffix when a candidate is close.
pub(crate) fn unknown_kw<'a>(
    word: &str,
    section: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    let mut msg = format!("unknown keyword '{word}' in '{section}' section");
    if let Some(m) = suggest::best_match(word, candidates) {
        msg.push_str(&format!("; did you mean '{m}' maybe ?"));
    }
    msg
}
