//! Sample expressions and log-format strings in a health check's context — what HAProxy's check
//! session can fetch: the check's variables, the response to the last send, the backend and
//! server names, constants. Used by `http-check set-var`, `send … uri-lf|hdr|body-lf` and
//! `expect hdr … name-lf|value-lf`. Pure: the probe hands it the state.
//!
//! A check has no client request, so the request fetches of `ana::sample` do not apply here;
//! this is the small set a check can answer.

use std::collections::HashMap;

/// What a check's expressions see.
pub struct Ctx<'a> {
    pub vars: &'a HashMap<String, String>,
    /// The last response's status and headers (names as received), if one was read.
    pub status: Option<u16>,
    pub headers: &'a [(String, String)],
    pub backend: &'a str,
    pub server: &'a str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Fetch {
    Str(String),
    Int(i64),
    Var(String),
    /// `res.hdr` (comma-separated values) / `res.fhdr` (`full`), occurrence (negative: from last).
    Hdr {
        name: String,
        full: bool,
        occ: i64,
    },
    HdrCnt(String),
    Status,
    BeName,
    SrvName,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conv {
    Lower,
    Upper,
    Length,
}

/// `<fetch>[(<args>)][,<conv>]*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    fetch: Fetch,
    convs: Vec<Conv>,
}

/// Splits `s` at top-level commas (not inside parentheses).
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// `name(args)` → (name, Some(args)); `name` → (name, None).
fn call(s: &str) -> Result<(&str, Option<&str>), String> {
    match s.find('(') {
        None => Ok((s, None)),
        Some(i) => {
            let Some(args) = s[i + 1..].strip_suffix(')') else {
                return Err(format!(
                    "missing closing ')' after arguments to fetch '{}'",
                    &s[..i]
                ));
            };
            Ok((&s[..i], Some(args)))
        }
    }
}

pub fn parse_expr(s: &str) -> Result<Expr, String> {
    let parts = split_top(s.trim());
    let (name, args) = call(parts.first().copied().unwrap_or_default())?;
    let need = |what: &str| -> Result<&str, String> {
        args.filter(|a| !a.is_empty())
            .ok_or_else(|| format!("fetch method '{name}' : missing {what}"))
    };
    let fetch = match name {
        "str" => Fetch::Str(need("string argument")?.to_string()),
        "int" => {
            let a = need("integer argument")?;
            Fetch::Int(
                a.trim()
                    .parse()
                    .map_err(|_| format!("fetch method '{name}' : invalid integer '{a}'"))?,
            )
        }
        "var" => {
            let v = need("variable name")?;
            if !v.contains('.') {
                return Err(format!(
                    "fetch method '{name}' : invalid variable name '{v}'"
                ));
            }
            Fetch::Var(v.to_string())
        }
        "res.hdr" | "res.fhdr" => {
            let a = need("header name")?;
            let (h, occ) = match a.split_once(',') {
                Some((h, o)) => (
                    h,
                    o.trim()
                        .parse()
                        .map_err(|_| format!("fetch method '{name}' : invalid occurrence '{o}'"))?,
                ),
                None => (a, -1),
            };
            Fetch::Hdr {
                name: h.to_ascii_lowercase(),
                full: name == "res.fhdr",
                occ,
            }
        }
        "res.hdr_cnt" => Fetch::HdrCnt(need("header name")?.to_ascii_lowercase()),
        "status" | "res.status" => Fetch::Status,
        "be_name" => Fetch::BeName,
        "srv_name" => Fetch::SrvName,
        "" => return Err("missing fetch method".to_string()),
        other => return Err(format!("unknown fetch method '{other}'")),
    };
    let mut convs = Vec::new();
    for c in parts.iter().skip(1) {
        convs.push(match call(c.trim())? {
            ("lower", None) => Conv::Lower,
            ("upper", None) => Conv::Upper,
            ("length", None) => Conv::Length,
            (other, _) => return Err(format!("unknown converter '{other}'")),
        });
    }
    Ok(Expr { fetch, convs })
}

/// The values of header `name` in `headers`: each comma-separated one, or whole ones (`full`).
fn header_values<'a>(headers: &'a [(String, String)], name: &str, full: bool) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (n, v) in headers {
        if !n.eq_ignore_ascii_case(name) {
            continue;
        }
        if full {
            out.push(v.trim());
        } else {
            out.extend(v.split(',').map(str::trim));
        }
    }
    out
}

impl Expr {
    /// `None` when the sample does not exist (an unset variable, a missing header).
    pub fn eval(&self, c: &Ctx) -> Option<String> {
        let mut v = match &self.fetch {
            Fetch::Str(s) => s.clone(),
            Fetch::Int(n) => n.to_string(),
            Fetch::Var(name) => c.vars.get(name)?.clone(),
            Fetch::Hdr { name, full, occ } => {
                let vals = header_values(c.headers, name, *full);
                let i = if *occ < 0 {
                    vals.len()
                        .checked_sub(usize::try_from(occ.unsigned_abs()).ok()?)?
                } else {
                    usize::try_from(*occ).ok()?.checked_sub(1)?
                };
                vals.get(i)?.to_string()
            }
            Fetch::HdrCnt(name) => header_values(c.headers, name, false).len().to_string(),
            Fetch::Status => c.status?.to_string(),
            Fetch::BeName => c.backend.to_string(),
            Fetch::SrvName => c.server.to_string(),
        };
        for conv in &self.convs {
            v = match conv {
                Conv::Lower => v.to_ascii_lowercase(),
                Conv::Upper => v.to_ascii_uppercase(),
                Conv::Length => v.len().to_string(),
            };
        }
        Some(v)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Lit(String),
    Expr(Expr),
}

/// A log-format string of a check: literal text and `%[<expr>]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lf(Vec<Piece>);

pub fn parse_lf(s: &str) -> Result<Lf, String> {
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        lit.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('%') {
            lit.push('%');
            rest = a;
        } else if let Some(a) = after.strip_prefix('[') {
            let Some(end) = a.find(']') else {
                return Err(format!("missing ']' in log-format expression '%[{a}'"));
            };
            if !lit.is_empty() {
                pieces.push(Piece::Lit(std::mem::take(&mut lit)));
            }
            pieces.push(Piece::Expr(parse_expr(&a[..end])?));
            rest = &a[end + 1..];
        } else {
            let alias: String = after
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect();
            return Err(format!(
                "log-format alias '%{alias}' is not supported in health checks by portcullis (use %[<fetch>])"
            ));
        }
    }
    lit.push_str(rest);
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    Ok(Lf(pieces))
}

impl Lf {
    /// A missing sample expands to nothing (HAProxy's check log-format strings, e.g.
    /// `hdr x-test "server=%[var(check.server)]"` sends `server=` once the variable is unset).
    pub fn eval(&self, c: &Ctx) -> String {
        let mut out = String::new();
        for p in &self.0 {
            match p {
                Piece::Lit(s) => out.push_str(s),
                Piece::Expr(e) => out.push_str(&e.eval(c).unwrap_or_default()),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx<'a>(vars: &'a HashMap<String, String>, headers: &'a [(String, String)]) -> Ctx<'a> {
        Ctx {
            vars,
            status: Some(202),
            headers,
            backend: "be4",
            server: "srv",
        }
    }

    #[test]
    fn fetches_and_converters() {
        let mut vars = HashMap::new();
        vars.insert("check.path".to_string(), "/req1".to_string());
        let headers = [
            (
                "X-Test2".to_string(),
                "true, begin-value, value-end".to_string(),
            ),
            ("x-hdr-name".to_string(), "x-test1".to_string()),
        ];
        let c = ctx(&vars, &headers);
        let ev = |s: &str| parse_expr(s).unwrap().eval(&c);
        assert_eq!(ev("str(srv)").as_deref(), Some("srv"));
        assert_eq!(ev("var(check.path)").as_deref(), Some("/req1"));
        assert_eq!(ev("var(check.none)"), None);
        assert_eq!(ev("res.fhdr(x-hdr-name)").as_deref(), Some("x-test1"));
        assert_eq!(ev("res.hdr(x-test2)").as_deref(), Some("value-end"));
        assert_eq!(ev("res.hdr(x-test2,1)").as_deref(), Some("true"));
        assert_eq!(
            ev("res.fhdr(X-TEST2)").as_deref(),
            Some("true, begin-value, value-end")
        );
        assert_eq!(ev("res.hdr_cnt(x-test2)").as_deref(), Some("3"));
        assert_eq!(ev("status").as_deref(), Some("202"));
        assert_eq!(ev("be_name,upper").as_deref(), Some("BE4"));
        assert_eq!(ev("str(abc),length").as_deref(), Some("3"));
        assert_eq!(
            parse_expr("nosuchfetch").unwrap_err(),
            "unknown fetch method 'nosuchfetch'"
        );
        assert_eq!(
            parse_expr("str(a),nope").unwrap_err(),
            "unknown converter 'nope'"
        );
    }

    #[test]
    fn log_format_strings() {
        let vars = HashMap::new();
        let c = ctx(&vars, &[]);
        let lf = |s: &str| parse_lf(s).unwrap().eval(&c);
        assert_eq!(
            lf("health-check on %[be_name]-%[srv_name]"),
            "health-check on be4-srv"
        );
        // An unset variable expands to nothing, as in reg-test checks/http-check.
        assert_eq!(lf("server=%[var(check.server)]"), "server=");
        assert_eq!(lf("100%% %[str(x)]"), "100% x");
        assert!(parse_lf("%H").unwrap_err().contains("'%H'"));
        assert!(parse_lf("%[str(x)").is_err());
    }
}
