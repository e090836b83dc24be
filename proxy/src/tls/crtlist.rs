//! `crt-list <file>`: one certificate per line, `<crtfile> [\[<sslbindconf> ...\]] [[!]<snifilter>
//! ...]`, with HAProxy 2.6's quirks (checked with `haproxy -c`): words before `[` other than the
//! file are dropped with a warning, an unclosed `[` leaves the options empty and makes the rest
//! filters. Pure: the caller reads the file.

use crate::config::model::{BindSsl, TlsVersion};

/// One certificate line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrtListLine {
    pub line: usize,
    pub crt: String,
    /// `[...]` options: keyword and its value (for the keywords that take one).
    pub opts: Vec<(String, Option<String>)>,
    /// SNI filters as written (`!` negative, `*.` wildcard); empty: the certificate's names.
    pub filters: Vec<String>,
}

/// A parsed file: its lines and HAProxy's warnings (already located `parsing [file:line]: ...`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrtList {
    pub lines: Vec<CrtListLine>,
    pub warnings: Vec<String>,
}

/// The ssl bind keywords HAProxy 2.6 accepts inside `[...]`, with their number of values.
const SSL_KWS: &[(&str, usize)] = &[
    ("allow-0rtt", 0),
    ("alpn", 1),
    ("ca-file", 1),
    ("ca-verify-file", 1),
    ("ciphers", 1),
    ("ciphersuites", 1),
    ("crl-file", 1),
    ("curves", 1),
    ("ecdhe", 1),
    ("no-ca-names", 0),
    ("npn", 1),
    ("ssl-max-ver", 1),
    ("ssl-min-ver", 1),
    ("verify", 1),
];

#[derive(Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Open,
    Close,
}

/// Words split on blanks, `[` and `]` standing alone even when glued to a word; quotes group.
fn tokenize(line: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            } else {
                cur.push(c);
            }
            continue;
        }
        match c {
            '"' | '\'' => {
                quote = Some(c);
                in_word = true;
            }
            ' ' | '\t' | '[' | ']' => {
                if in_word {
                    out.push(Tok::Word(std::mem::take(&mut cur)));
                    in_word = false;
                }
                match c {
                    '[' => out.push(Tok::Open),
                    ']' => out.push(Tok::Close),
                    _ => {}
                }
            }
            _ => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(Tok::Word(cur));
    }
    out
}

fn words(toks: &[Tok]) -> Vec<String> {
    toks.iter()
        .filter_map(|t| match t {
            Tok::Word(w) => Some(w.clone()),
            _ => None,
        })
        .collect()
}

/// Parses the text of crt-list `path`. Errors read as HAProxy's, without the `'crt-list' : `
/// prefix the bind line adds.
pub fn parse(path: &str, text: &str) -> Result<CrtList, String> {
    let mut out = CrtList::default();
    for (idx, raw) in text.lines().enumerate() {
        let n = idx + 1;
        let at = |m: &str| format!("parsing [{path}:{n}]: {m}");
        let line = raw.trim_start_matches([' ', '\t']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let toks = tokenize(line);
        let open = toks.iter().position(|t| *t == Tok::Open);
        let close = toks.iter().position(|t| *t == Tok::Close);
        if open == Some(0) {
            return Err(at("file must start with a cert"));
        }
        if let Some(c) = close
            && open.is_none_or(|o| c < o)
        {
            return Err(at("missing '['"));
        }
        let Some(Tok::Word(crt)) = toks.first() else {
            continue;
        };
        let (opt_toks, filter_toks): (&[Tok], &[Tok]) = match (open, close) {
            (Some(o), Some(c)) => (
                toks.get(o + 1..c).unwrap_or_default(),
                toks.get(c + 1..).unwrap_or_default(),
            ),
            (Some(o), None) => (&[], toks.get(o + 1..).unwrap_or_default()),
            _ => (&[], toks.get(1..).unwrap_or_default()),
        };
        if open.is_some_and(|o| o > 1) {
            out.warnings.push(at(
                "malformated line, filters can't be between filename and options!",
            ));
        }
        let opt_words = words(opt_toks);
        let mut opts = Vec::new();
        let mut i = 0;
        while let Some(kw) = opt_words.get(i) {
            let Some(&(_, nargs)) = SSL_KWS.iter().find(|(k, _)| k == kw) else {
                return Err(at(&format!("unknown ssl keyword {kw}")));
            };
            let val = if nargs == 1 {
                let Some(v) = opt_words.get(i + 1) else {
                    return Err(at(&format!("ssl args out of '[]' for {kw}")));
                };
                if (kw == "ssl-min-ver" || kw == "ssl-max-ver") && tls_version(v).is_none() {
                    return Err(format!("'{v}' : unknown ssl/tls version"));
                }
                Some(v.clone())
            } else {
                None
            };
            opts.push((kw.clone(), val));
            i += 1 + nargs;
        }
        out.lines.push(CrtListLine {
            line: n,
            crt: crt.clone(),
            opts,
            filters: words(filter_toks),
        });
    }
    Ok(out)
}

fn tls_version(s: &str) -> Option<TlsVersion> {
    Some(match s {
        "SSLv3" => TlsVersion::Ssl3,
        "TLSv1.0" => TlsVersion::Tls10,
        "TLSv1.1" => TlsVersion::Tls11,
        "TLSv1.2" => TlsVersion::Tls12,
        "TLSv1.3" => TlsVersion::Tls13,
        _ => return None,
    })
}

/// Per-certificate settings rustls cannot honour: rustls negotiates ALPN, versions, suites and
/// groups once per `ServerConfig` (one per bind) before or regardless of the certificate choice,
/// so a line may only repeat the bind's own values. Refused rather than silently ignored.
pub fn check_opts(path: &str, l: &CrtListLine, bind: &BindSsl) -> Result<(), String> {
    for (kw, val) in &l.opts {
        let v = val.as_deref().unwrap_or("");
        let same = match kw.as_str() {
            "alpn" => v.split(',').eq(bind.alpn.iter().map(String::as_str)),
            "ssl-min-ver" => tls_version(v) == bind.options.min_ver,
            "ssl-max-ver" => tls_version(v) == bind.options.max_ver,
            "ciphers" => bind.ciphers.as_deref() == Some(v),
            "ciphersuites" => bind.ciphersuites.as_deref() == Some(v),
            "curves" => bind.curves.as_deref() == Some(v),
            // No client certificates are requested, so there are no CA names to leave out.
            "verify" => v == "none",
            "no-ca-names" => true,
            _ => false,
        };
        if !same {
            let shown = match val {
                Some(v) => format!("{kw} {v}"),
                None => kw.clone(),
            };
            return Err(format!(
                "parsing [{path}:{}]: '{shown}' is not supported per certificate (rustls sets it once per bind); use the bind line's value or move the certificate to its own bind",
                l.line
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> CrtListLine {
        let l = parse("l.txt", text).unwrap();
        assert_eq!(l.lines.len(), 1, "{l:?}");
        l.lines.into_iter().next().unwrap()
    }

    #[test]
    fn comments_blank_lines_and_plain_lines() {
        let l = parse(
            "l.txt",
            "# comment\n\n  default.pem\n\ta.pem a.example.com *.b.com !c.b.com\n",
        )
        .unwrap();
        assert_eq!(l.warnings, Vec::<String>::new());
        assert_eq!(l.lines.len(), 2);
        assert_eq!(l.lines[0].crt, "default.pem");
        assert_eq!(l.lines[0].line, 3);
        assert!(l.lines[0].filters.is_empty());
        assert_eq!(l.lines[1].line, 4);
        assert_eq!(
            l.lines[1].filters,
            vec!["a.example.com", "*.b.com", "!c.b.com"]
        );
    }

    #[test]
    fn options_between_brackets() {
        let l = one("a.pem [alpn h2 ssl-min-ver TLSv1.2 no-ca-names] x.com");
        assert_eq!(
            l.opts,
            vec![
                ("alpn".to_string(), Some("h2".to_string())),
                ("ssl-min-ver".to_string(), Some("TLSv1.2".to_string())),
                ("no-ca-names".to_string(), None),
            ]
        );
        assert_eq!(l.filters, vec!["x.com"]);
        // Brackets glued to words and blanks inside them, as HAProxy accepts.
        let l = one("a.pem[ alpn h2 ]x.com");
        assert_eq!(l.crt, "a.pem");
        assert_eq!(l.opts.len(), 1);
        assert_eq!(l.filters, vec!["x.com"]);
        let l = one("a.pem [alpn \"h2\"] \"x y\"");
        assert_eq!(l.filters, vec!["x y"]);
    }

    #[test]
    fn haproxy_quirks() {
        // Words between the file and `[` are dropped with a warning.
        let l = parse("l.txt", "a.pem zz.com [alpn h2]\n").unwrap();
        assert_eq!(
            l.warnings,
            vec![
                "parsing [l.txt:1]: malformated line, filters can't be between filename and options!"
            ]
        );
        assert!(l.lines[0].filters.is_empty());
        assert_eq!(l.lines[0].opts.len(), 1);
        // An unclosed `[`: no options, the rest are filters (HAProxy 2.6 serves it so).
        let l = one("b.pem [alpn h2");
        assert!(l.opts.is_empty());
        assert_eq!(l.filters, vec!["alpn", "h2"]);
    }

    #[test]
    fn errors_in_haproxy_words() {
        let e = |t: &str| parse("/x/l.txt", t).unwrap_err();
        assert_eq!(
            e("ok.pem\n[alpn h2] a.pem"),
            "parsing [/x/l.txt:2]: file must start with a cert"
        );
        assert_eq!(e("a.pem ]"), "parsing [/x/l.txt:1]: missing '['");
        assert_eq!(
            e("a.pem [foo bar] x"),
            "parsing [/x/l.txt:1]: unknown ssl keyword foo"
        );
        assert_eq!(
            e("a.pem [crt foo]"),
            "parsing [/x/l.txt:1]: unknown ssl keyword crt"
        );
        assert_eq!(
            e("a.pem [alpn] x"),
            "parsing [/x/l.txt:1]: ssl args out of '[]' for alpn"
        );
        assert_eq!(
            e("a.pem [alpn h2 alpn]"),
            "parsing [/x/l.txt:1]: ssl args out of '[]' for alpn"
        );
        assert_eq!(
            e("a.pem [ssl-min-ver TLSv9] x"),
            "'TLSv9' : unknown ssl/tls version"
        );
    }

    #[test]
    fn per_certificate_options_must_match_the_bind() {
        let bind = BindSsl {
            alpn: vec!["h2".into(), "http/1.1".into()],
            options: crate::config::model::SslOptions {
                min_ver: Some(TlsVersion::Tls12),
                ..Default::default()
            },
            ..BindSsl::default()
        };
        let ok = one("a.pem [alpn h2,http/1.1 ssl-min-ver TLSv1.2 verify none no-ca-names]");
        assert_eq!(check_opts("l.txt", &ok, &bind), Ok(()));
        let bad = one("a.pem [alpn h2] a.com");
        assert_eq!(
            check_opts("l.txt", &bad, &bind).unwrap_err(),
            "parsing [l.txt:1]: 'alpn h2' is not supported per certificate (rustls sets it once per bind); use the bind line's value or move the certificate to its own bind"
        );
        for t in [
            "a.pem [ssl-max-ver TLSv1.2]",
            "a.pem [ciphers ECDHE+AESGCM]",
            "a.pem [ciphersuites TLS_AES_128_GCM_SHA256]",
            "a.pem [verify required]",
            "a.pem [allow-0rtt]",
        ] {
            assert!(check_opts("l.txt", &one(t), &bind).is_err(), "{t}");
        }
    }
}
