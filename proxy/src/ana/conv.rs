//! Sample converters (`path,lower`, `src,ipmask(24)`, `req.hdr(x),field(2,:)`), with HAProxy
//! 2.6's semantics: which input they cast to, what an out-of-range argument gives, and the
//! capped integer arithmetic. Pure: a converter maps one value to another (or to none).

use std::borrow::Cow;
use std::net::IpAddr;

use base64::Engine;

use super::sample::SampleValue;
use super::vars::{VarName, Vars};

/// A parsed converter with its arguments.
#[derive(Clone, Debug)]
pub enum Conv {
    /// `lua.<name>[(args)]`: a converter a Lua script registered (`core.register_converters`).
    Lua {
        name: String,
        args: Vec<String>,
    },
    Lower,
    Upper,
    Length,
    /// `map`, `map_<match>(<file>[,<default>])`: the value of the matching entry, else the
    /// default, else no sample.
    Map(MapConv),
    Hex,
    Hex2i,
    Base64,
    B64Dec,
    Ub64Enc,
    Ub64Dec,
    /// `bytes(<offset>[,<length>])`
    Bytes(usize, Option<usize>),
    /// `field|word(<index>,<delimiters>[,<count>])`: `words` merges runs of delimiters.
    Field {
        index: i64,
        delims: Vec<u8>,
        count: i64,
        words: bool,
    },
    /// `regsub(<regex>,<subst>[,<flags>])`
    Regsub {
        re: regex::Regex,
        subst: String,
        global: bool,
    },
    Sha1,
    /// `sha2([<bits>])`: 256 (default), 384 or 512 (224 is not offered).
    Sha2(u16),
    /// `digest(<alg>)`: md5 is not offered; sha1 and the sha2 family are.
    Digest(DigestAlg),
    /// `hmac(<alg>,<base64 key>)`
    Hmac(DigestAlg, Vec<u8>),
    Crc32(bool),
    Djb2(bool),
    Sdbm(bool),
    Wt6(bool),
    /// `json([<input-code>])`: only the ASCII reading (the default) and `utf8`/`utf8s`.
    Json(JsonInput),
    /// `ipmask(<mask4>[,<mask6>])`
    IpMask(u32, Option<u128>),
    /// `ltime|utime(<format>[,<offset>])` (`utc`).
    Time {
        format: String,
        offset: i64,
        utc: bool,
    },
    /// `http_date([<offset>[,<unit>]])`: the unit divides the input (s, ms, us).
    HttpDate {
        offset: i64,
        per_sec: i64,
    },
    /// `url_dec([<in_form>])`
    UrlDec(bool),
    CutCrlf,
    Ltrim(Vec<u8>),
    Rtrim(Vec<u8>),
    /// `iif(<true>,<false>)`
    Iif(String, String),
    /// `add|sub|mul|div|mod|and|or|xor(<integer>|<variable>)`
    Arith(ArithOp, IntArg),
    /// `concat([<start>],[<var>],[<end>])`: the input, then each part.
    Concat(String, Option<VarName>, String),
    /// `add_item(<delim>,[<var>][,<suffix>])`: the delimiter only after a non-empty input.
    AddItem(String, Option<VarName>, String),
    /// `strcmp(<var>)`: strcmp(3)-like order of the input and the variable.
    Strcmp(VarName),
    /// `secure_memcmp(<var>)`: constant-time equality with the variable.
    SecureMemcmp(VarName),
    Neg,
    Cpl,
    Bool,
    Not,
    Odd,
    Even,
    /// `debug`: passes the value through (HAProxy also copies it to a ring).
    Debug,
    /// `in_table(<table>)`: the input (an address) has an entry in the table.
    InTable(String),
    /// `table_<data>(<table>)`: the entry's value, 0 without an entry.
    Table(crate::stick::StickData, String),
}

/// What converters read besides their input: the transaction's variables and stick tables.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConvEnv<'a> {
    pub vars: Option<&'a Vars>,
    pub stick: Option<crate::stick::StickView<'a>>,
}

/// An operator's argument: an integer, or a variable read at run time (HAProxy tries the
/// variable name first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntArg {
    Const(i64),
    Var(VarName),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestAlg {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonInput {
    Ascii,
    /// Invalid UTF-8 makes the converter fail.
    Utf8,
    /// Invalid UTF-8 sequences are skipped.
    Utf8Skip,
}

#[derive(Clone, Debug)]
pub struct MapConv {
    pub map: std::sync::Arc<crate::map::Map>,
    pub default: Option<String>,
}

impl PartialEq for Conv {
    fn eq(&self, o: &Self) -> bool {
        // Converters compare by what they print; a regex or a map by identity of the source.
        match (self, o) {
            (Conv::Map(a), Conv::Map(b)) => {
                std::sync::Arc::ptr_eq(&a.map, &b.map) && a.default == b.default
            }
            (Conv::Regsub { re: a, .. }, Conv::Regsub { re: b, .. }) => {
                a.as_str() == b.as_str() && format!("{self:?}") == format!("{o:?}")
            }
            _ => format!("{self:?}") == format!("{o:?}"),
        }
    }
}
impl Eq for Conv {}

/// The converter names [`Conv::parse`] knows (besides the `map*` family).
pub const NAMES: &[&str] = &[
    "add_item",
    "and",
    "b64dec",
    "base64",
    "bool",
    "bytes",
    "concat",
    "cpl",
    "crc32",
    "cut_crlf",
    "debug",
    "digest",
    "div",
    "djb2",
    "even",
    "field",
    "hex",
    "hex2i",
    "hmac",
    "http_date",
    "in_table",
    "iif",
    "ipmask",
    "json",
    "length",
    "lower",
    "ltime",
    "ltrim",
    "mod",
    "mul",
    "neg",
    "not",
    "odd",
    "or",
    "regsub",
    "rtrim",
    "sdbm",
    "secure_memcmp",
    "sha1",
    "sha2",
    "strcmp",
    "sub",
    "table_conn_cnt",
    "table_conn_cur",
    "table_conn_rate",
    "table_http_req_cnt",
    "table_http_req_rate",
    "table_sess_cnt",
    "table_sess_rate",
    "add",
    "ub64dec",
    "ub64enc",
    "upper",
    "url_dec",
    "utime",
    "word",
    "wt6",
    "xor",
];

fn int_arg(name: &str, args: &[String], i: usize) -> Result<Option<i64>, String> {
    match args.get(i).map(|a| a.trim()) {
        None | Some("") => Ok(None),
        Some(a) => a.parse::<i64>().map(Some).map_err(|_| {
            format!(
                "invalid args in converter '{name}' : failed to parse '{a}' as type 'signed integer' at position {}",
                i + 1
            )
        }),
    }
}

fn need<'a>(name: &str, args: &'a [String], i: usize, ty: &str) -> Result<&'a str, String> {
    match args.get(i) {
        Some(a) if !a.is_empty() => Ok(a),
        _ => Err(format!(
            "invalid args in converter '{name}' : expected type '{ty}' at position {}, but got nothing",
            i + 1
        )),
    }
}

fn need_int(name: &str, args: &[String], i: usize) -> Result<i64, String> {
    need(name, args, i, "signed integer")?;
    Ok(int_arg(name, args, i)?.unwrap_or(0))
}

fn max_args(name: &str, args: &[String], max: usize) -> Result<(), String> {
    if args.len() > max {
        let rest = args[max..].join(",");
        return Err(if max == 0 {
            format!("converter '{name}' does not support any args")
        } else {
            format!("invalid args in converter '{name}' : end of arguments expected at '{rest}'")
        });
    }
    Ok(())
}

fn ipv4_mask(name: &str, s: &str) -> Result<u32, String> {
    let bad = || {
        format!(
            "invalid args in converter '{name}' : failed to parse '{s}' as type 'mask4' at position 1"
        )
    };
    if let Ok(n) = s.parse::<u32>() {
        return match n {
            0 => Ok(0),
            1..=32 => Ok(u32::MAX << (32 - n)),
            _ => Err(bad()),
        };
    }
    s.parse::<std::net::Ipv4Addr>()
        .map(u32::from)
        .map_err(|_| bad())
}

fn ipv6_mask(name: &str, s: &str) -> Result<u128, String> {
    let bad = || {
        format!(
            "invalid args in converter '{name}' : failed to parse '{s}' as type 'mask6' at position 2"
        )
    };
    if let Ok(n) = s.parse::<u32>() {
        return match n {
            0 => Ok(0),
            1..=128 => Ok(u128::MAX << (128 - n)),
            _ => Err(bad()),
        };
    }
    s.parse::<std::net::Ipv6Addr>()
        .map(u128::from)
        .map_err(|_| bad())
}

fn digest_alg(name: &str, s: &str) -> Result<DigestAlg, String> {
    match s.to_ascii_lowercase().as_str() {
        "sha1" => Ok(DigestAlg::Sha1),
        "sha256" => Ok(DigestAlg::Sha256),
        "sha384" => Ok(DigestAlg::Sha384),
        "sha512" => Ok(DigestAlg::Sha512),
        _ => Err(format!(
            "invalid args in converter '{name}' : algorithm must be a valid OpenSSL message digest name."
        )),
    }
}

impl Conv {
    /// A converter from its name and (already unquoted) arguments; `None` if the name is not a
    /// converter portcullis has.
    pub fn parse(name: &str, args: &[String]) -> Option<Result<Conv, String>> {
        let plain = |c: Conv| Some(max_args(name, args, 0).map(|_| c));
        let hash = |f: fn(bool) -> Conv| {
            Some(
                max_args(name, args, 1)
                    .and_then(|_| int_arg(name, args, 0))
                    .map(|a| f(a.unwrap_or(0) != 0)),
            )
        };
        if let Some(n) = name.strip_prefix("lua.")
            && super::script::has_converter(n)
        {
            return Some(Ok(Conv::Lua {
                name: n.to_string(),
                args: args.to_vec(),
            }));
        }
        let r = match name {
            "lower" => return plain(Conv::Lower),
            "upper" => return plain(Conv::Upper),
            "length" => return plain(Conv::Length),
            "hex" => return plain(Conv::Hex),
            "hex2i" => return plain(Conv::Hex2i),
            "base64" => return plain(Conv::Base64),
            "b64dec" => return plain(Conv::B64Dec),
            "ub64enc" => return plain(Conv::Ub64Enc),
            "ub64dec" => return plain(Conv::Ub64Dec),
            "sha1" => return plain(Conv::Sha1),
            "cut_crlf" => return plain(Conv::CutCrlf),
            "neg" => return plain(Conv::Neg),
            "cpl" => return plain(Conv::Cpl),
            "bool" => return plain(Conv::Bool),
            "not" => return plain(Conv::Not),
            "odd" => return plain(Conv::Odd),
            "even" => return plain(Conv::Even),
            "crc32" => return hash(Conv::Crc32),
            "djb2" => return hash(Conv::Djb2),
            "sdbm" => return hash(Conv::Sdbm),
            "wt6" => return hash(Conv::Wt6),
            "debug" => Ok(Conv::Debug),
            "bytes" => max_args(name, args, 2).and_then(|_| {
                let off = need_int(name, args, 0)?;
                let len = int_arg(name, args, 1)?;
                Ok(Conv::Bytes(
                    usize::try_from(off.max(0)).unwrap_or(0),
                    len.map(|l| usize::try_from(l.max(0)).unwrap_or(0)),
                ))
            }),
            "field" | "word" => max_args(name, args, 3).and_then(|_| {
                let index = need_int(name, args, 0)?;
                let delims = need(name, args, 1, "string")?.as_bytes().to_vec();
                if index == 0 {
                    return Err(format!(
                        "invalid args in converter '{name}' : Unexpected value 0 for index"
                    ));
                }
                Ok(Conv::Field {
                    index,
                    delims,
                    count: int_arg(name, args, 2)?.unwrap_or(1),
                    words: name == "word",
                })
            }),
            "regsub" => max_args(name, args, 3).and_then(|_| {
                let pat = need(name, args, 0, "regex")?;
                let subst = args.get(1).cloned().ok_or_else(|| {
                    format!("invalid args in converter '{name}' : expected type 'string' at position 2, but got nothing")
                })?;
                let flags = args.get(2).map_or("", String::as_str);
                let mut global = false;
                let mut icase = false;
                for f in flags.chars() {
                    match f {
                        'g' => global = true,
                        'i' => icase = true,
                        _ => {
                            return Err(format!(
                                "invalid args in converter '{name}' : invalid regex flag '{f}', only 'i' and 'g' are supported"
                            ));
                        }
                    }
                }
                let re = regex::RegexBuilder::new(pat)
                    .case_insensitive(icase)
                    .build()
                    .map_err(|e| {
                        format!(
                            "invalid args in converter '{name}' : {}",
                            crate::ana::acl::regex_invalid(pat, &e)
                        )
                    })?;
                Ok(Conv::Regsub { re, subst, global })
            }),
            "sha2" => max_args(name, args, 1).and_then(|_| {
                match int_arg(name, args, 0)?.unwrap_or(256) {
                    b @ (256 | 384 | 512) => Ok(Conv::Sha2(b as u16)),
                    _ => Err(format!(
                        "invalid args in converter '{name}' : Unsupported number of bits: '{}'.",
                        args.first().map_or("", String::as_str)
                    )),
                }
            }),
            "digest" => max_args(name, args, 1).and_then(|_| {
                digest_alg(name, need(name, args, 0, "string")?).map(Conv::Digest)
            }),
            "hmac" => max_args(name, args, 2).and_then(|_| {
                let alg = digest_alg(name, need(name, args, 0, "string")?)?;
                let key = need(name, args, 1, "string")?;
                let key = base64::engine::general_purpose::STANDARD
                    .decode(key)
                    .map_err(|_| {
                        format!("invalid args in converter '{name}' : failed to decode key as base64.")
                    })?;
                Ok(Conv::Hmac(alg, key))
            }),
            "json" => max_args(name, args, 1).and_then(|_| {
                match args.first().map_or("", String::as_str) {
                    "" | "ascii" => Ok(Conv::Json(JsonInput::Ascii)),
                    "utf8" | "utf8p" => Ok(Conv::Json(JsonInput::Utf8)),
                    "utf8s" | "utf8ps" => Ok(Conv::Json(JsonInput::Utf8Skip)),
                    other => Err(format!(
                        "invalid args in converter '{name}' : Unexpected input code type '{other}'. Allowed value are 'ascii', 'utf8', 'utf8s', 'utf8p' and 'utf8ps'"
                    )),
                }
            }),
            "ipmask" => max_args(name, args, 2).and_then(|_| {
                let m4 = ipv4_mask(name, need(name, args, 0, "mask4")?)?;
                let m6 = match args.get(1).filter(|a| !a.is_empty()) {
                    Some(a) => Some(ipv6_mask(name, a)?),
                    None => None,
                };
                Ok(Conv::IpMask(m4, m6))
            }),
            "ltime" | "utime" => max_args(name, args, 2).and_then(|_| {
                Ok(Conv::Time {
                    format: need(name, args, 0, "string")?.to_string(),
                    offset: int_arg(name, args, 1)?.unwrap_or(0),
                    utc: name == "utime",
                })
            }),
            "http_date" => max_args(name, args, 2).and_then(|_| {
                let per_sec = match args.get(1).map_or("s", String::as_str) {
                    "" | "s" => 1,
                    "ms" => 1_000,
                    "us" => 1_000_000,
                    _ => {
                        return Err(format!(
                            "invalid args in converter '{name}' : Invalid unit for http_date converter"
                        ));
                    }
                };
                Ok(Conv::HttpDate {
                    offset: int_arg(name, args, 0)?.unwrap_or(0),
                    per_sec,
                })
            }),
            "url_dec" => max_args(name, args, 1)
                .and_then(|_| int_arg(name, args, 0))
                .map(|a| Conv::UrlDec(a.unwrap_or(0) != 0)),
            "ltrim" | "rtrim" => max_args(name, args, 1).and_then(|_| {
                let d = need(name, args, 0, "string")?.as_bytes().to_vec();
                Ok(if name == "ltrim" {
                    Conv::Ltrim(d)
                } else {
                    Conv::Rtrim(d)
                })
            }),
            "iif" => max_args(name, args, 2).and_then(|_| {
                let t = need(name, args, 0, "string")?;
                let f = need(name, args, 1, "string")?;
                Ok(Conv::Iif(t.to_string(), f.to_string()))
            }),
            "add" | "sub" | "mul" | "div" | "mod" | "and" | "or" | "xor" => {
                max_args(name, args, 1).and_then(|_| {
                    let op = match name {
                        "add" => ArithOp::Add,
                        "sub" => ArithOp::Sub,
                        "mul" => ArithOp::Mul,
                        "div" => ArithOp::Div,
                        "mod" => ArithOp::Mod,
                        "and" => ArithOp::And,
                        "or" => ArithOp::Or,
                        _ => ArithOp::Xor,
                    };
                    let a = need(name, args, 0, "string")?;
                    let v = match VarName::parse(a) {
                        Ok(var) => IntArg::Var(var),
                        Err(_) => IntArg::Const(parse_c_int(a).ok_or_else(|| {
                            format!("invalid args in converter '{name}' : expects an integer or a variable name")
                        })?),
                    };
                    Ok(Conv::Arith(op, v))
                })
            }
            "concat" | "add_item" => max_args(name, args, 3).and_then(|_| {
                let first = if name == "add_item" {
                    need(name, args, 0, "string")?
                } else {
                    args.first().map_or("", String::as_str)
                };
                let var = match args.get(1).filter(|a| !a.is_empty()) {
                    Some(a) => Some(var_arg(name, a)?),
                    None => None,
                };
                let last = args.get(2).cloned().unwrap_or_default();
                if name == "add_item" {
                    if var.is_none() && last.is_empty() {
                        return Err(format!("invalid args in converter '{name}' : one of the optional arguments has to be nonempty"));
                    }
                    return Ok(Conv::AddItem(first.to_string(), var, last));
                }
                Ok(Conv::Concat(first.to_string(), var, last))
            }),
            "in_table" => max_args(name, args, 1)
                .and_then(|_| need(name, args, 0, "table").map(|t| Conv::InTable(t.to_string()))),
            _ if name.starts_with("table_") => {
                // HAProxy has `table_kbytes_in`, no `table_bytes_in_cnt`.
                let d = crate::stick::StickData::from_name(&name["table_".len()..])
                    .filter(|d| !d.is_u64())?;
                max_args(name, args, 1)
                    .and_then(|_| need(name, args, 0, "table").map(|t| Conv::Table(d, t.to_string())))
            }
            "strcmp" | "secure_memcmp" => max_args(name, args, 1).and_then(|_| {
                let a = need(name, args, 0, "string")?;
                let var = var_arg(name, a)?;
                Ok(if name == "strcmp" {
                    Conv::Strcmp(var)
                } else {
                    Conv::SecureMemcmp(var)
                })
            }),
            _ => return None,
        };
        Some(r)
    }

    /// A map converter from its arguments (the file is loaded once per process).
    pub fn map(name: &str, args: &[&str]) -> Option<Result<Conv, String>> {
        let kind = crate::map::MatchKind::from_converter(name)?;
        let Some(file) = args.first().filter(|f| !f.is_empty()) else {
            return Some(Err(format!(
                "converter '{name}' : expected type 'string' at position 1, but got nothing"
            )));
        };
        Some(
            crate::map::load_file(file, kind)
                .map(|map| {
                    Conv::Map(MapConv {
                        map,
                        default: args.get(1).map(|d| d.to_string()),
                    })
                })
                .map_err(|e| format!("invalid args in converter '{name}' : {e}")),
        )
    }

    /// Applies the converter without variables (those reading one see it unset).
    pub fn apply<'a>(&self, v: SampleValue<'a>) -> Option<SampleValue<'a>> {
        self.apply_with(v, &ConvEnv::default())
    }

    pub fn apply_with<'a>(&self, v: SampleValue<'a>, env: &ConvEnv<'_>) -> Option<SampleValue<'a>> {
        use SampleValue::{Bin, Bool, Int, Ip, Str};
        let var = |n: &VarName| env.vars.and_then(|vs| vs.get(n));
        let owned = |s: String| Some(Str(Cow::Owned(s)));
        Some(match self {
            Conv::Lua { name, args } => return super::script::host()?.convert(name, args, v),
            Conv::Lower => match v {
                Str(Cow::Borrowed(s)) if !s.bytes().any(|b| b.is_ascii_uppercase()) => {
                    Str(Cow::Borrowed(s))
                }
                other => Str(Cow::Owned(other.to_str().to_ascii_lowercase())),
            },
            Conv::Upper => Str(Cow::Owned(v.to_str().to_ascii_uppercase())),
            Conv::Length => Int(i64::try_from(v.to_str().len()).unwrap_or(i64::MAX)),
            Conv::Map(m) => match m.map.lookup(&v.to_str()) {
                Some((_, value)) => Str(Cow::Owned(value)),
                None => Str(Cow::Owned(m.default.clone()?)),
            },
            Conv::Hex => {
                let b = v.to_bytes();
                let mut s = String::with_capacity(b.len() * 2);
                for c in b.iter() {
                    s.push_str(&format!("{c:02X}"));
                }
                return owned(s);
            }
            Conv::Hex2i => {
                let s = v.to_str();
                let mut n: i64 = 0;
                for c in s.bytes() {
                    let d = (c as char).to_digit(16)?;
                    n = n.wrapping_shl(4).wrapping_add(i64::from(d));
                }
                Int(n)
            }
            Conv::Base64 => {
                return owned(base64::engine::general_purpose::STANDARD.encode(v.to_bytes()));
            }
            Conv::Ub64Enc => {
                return owned(
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_bytes()),
                );
            }
            Conv::B64Dec => Bin(Cow::Owned(
                base64::engine::general_purpose::STANDARD
                    .decode(v.to_str().as_bytes())
                    .ok()?,
            )),
            Conv::Ub64Dec => {
                let s = v.to_str();
                let s = s.trim_end_matches('=');
                Bin(Cow::Owned(
                    base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .decode(s.as_bytes())
                        .ok()?,
                ))
            }
            Conv::Bytes(off, len) => {
                let b = v.to_bytes();
                let rest = b.get(*off..).unwrap_or(&[]);
                let take = len.map_or(rest.len(), |l| l.min(rest.len()));
                Bin(Cow::Owned(rest[..take].to_vec()))
            }
            Conv::Field {
                index,
                delims,
                count,
                words,
            } => {
                let s = v.to_str();
                let part = if *words {
                    word(s.as_bytes(), *index, delims, *count)
                } else {
                    field(s.as_bytes(), *index, delims, *count)?
                };
                return owned(String::from_utf8_lossy(part).into_owned());
            }
            Conv::Regsub { re, subst, global } => {
                let s = v.to_str();
                let rep = regsub_template(subst);
                let out = if *global {
                    re.replace_all(&s, rep.as_str())
                } else {
                    re.replace(&s, rep.as_str())
                };
                return owned(out.into_owned());
            }
            Conv::Sha1 => Bin(Cow::Owned(digest(DigestAlg::Sha1, &v.to_bytes()))),
            Conv::Sha2(bits) => {
                let b = v.to_bytes();
                Bin(Cow::Owned(match bits {
                    384 => digest(DigestAlg::Sha384, &b),
                    512 => digest(DigestAlg::Sha512, &b),
                    _ => digest(DigestAlg::Sha256, &b),
                }))
            }
            Conv::Digest(a) => Bin(Cow::Owned(digest(*a, &v.to_bytes()))),
            Conv::Hmac(a, key) => Bin(Cow::Owned(hmac(*a, key, &v.to_bytes()))),
            Conv::Crc32(av) => Int(hashed(crc32(&v.to_bytes()), *av)),
            Conv::Djb2(av) => Int(hashed(djb2(&v.to_bytes()), *av)),
            Conv::Sdbm(av) => Int(hashed(sdbm(&v.to_bytes()), *av)),
            Conv::Wt6(av) => Int(hashed(wt6(&v.to_bytes()), *av)),
            Conv::Json(input) => return json(&v.to_bytes(), *input).and_then(owned),
            Conv::IpMask(m4, m6) => {
                let ip = v.to_ip()?;
                let ip = match ip {
                    IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                        Some(v4) => IpAddr::V4(v4),
                        None => IpAddr::V6(v6),
                    },
                    v4 => v4,
                };
                match ip {
                    IpAddr::V4(a) => Ip(IpAddr::V4((u32::from(a) & m4).into())),
                    IpAddr::V6(a) => Ip(IpAddr::V6((u128::from(a) & (*m6)?).into())),
                }
            }
            Conv::Time {
                format,
                offset,
                utc,
            } => {
                let t = (v.to_int()? & 0x007f_ffff_ffff_ffff).saturating_add(*offset);
                return owned(strftime(format, t, *utc)?);
            }
            Conv::HttpDate { offset, per_sec } => {
                let t = v.to_int()?;
                let secs = t.div_euclid(*per_sec).saturating_add(*offset);
                let dt = chrono::DateTime::from_timestamp(secs, 0)?;
                return owned(dt.format("%a, %d %b %Y %H:%M:%S GMT").to_string());
            }
            Conv::UrlDec(form) => return url_dec(&v.to_str(), *form).and_then(owned),
            Conv::CutCrlf => {
                let s = v.to_str();
                let end = s.find(['\r', '\n']).unwrap_or(s.len());
                return owned(s[..end].to_string());
            }
            Conv::Ltrim(d) => {
                let s = v.to_str();
                let t = s.trim_start_matches(|c: char| c.is_ascii() && d.contains(&(c as u8)));
                return owned(t.to_string());
            }
            Conv::Rtrim(d) => {
                let s = v.to_str();
                let t = s.trim_end_matches(|c: char| c.is_ascii() && d.contains(&(c as u8)));
                return owned(t.to_string());
            }
            Conv::Iif(t, f) => {
                return owned(if v.to_bool() { t.clone() } else { f.clone() });
            }
            Conv::Arith(op, b) => {
                let b = match b {
                    IntArg::Const(i) => *i,
                    IntArg::Var(n) => var(n)?.to_int()?,
                };
                Int(arith(*op, v.to_int()?, b))
            }
            Conv::Concat(start, name, end) => {
                let mut out = v.to_str().into_owned();
                out.push_str(start);
                if let Some(x) = name.as_ref().and_then(var) {
                    out.push_str(&x.to_str());
                }
                out.push_str(end);
                return owned(out);
            }
            Conv::AddItem(delim, name, suffix) => {
                let mut out = v.to_str().into_owned();
                let x = name.as_ref().and_then(var).map(|x| x.to_str().into_owned());
                if !out.is_empty()
                    && (x.as_ref().is_some_and(|x| !x.is_empty()) || !suffix.is_empty())
                {
                    out.push_str(delim);
                }
                out.push_str(x.as_deref().unwrap_or(""));
                out.push_str(suffix);
                return owned(out);
            }
            Conv::Strcmp(n) => {
                let (a, b) = (v.to_bytes(), var(n)?.to_bytes().into_owned());
                Int(strcmp(&a, &b))
            }
            Conv::SecureMemcmp(n) => {
                let (a, b) = (v.to_bytes(), var(n)?.to_bytes().into_owned());
                Bool(a.len() == b.len() && constant_time_eq(&a, &b))
            }
            Conv::Neg => Int(v.to_int()?.checked_neg().unwrap_or(i64::MAX)),
            Conv::Cpl => Int(!v.to_int()?),
            Conv::Bool => Bool(v.to_int()? != 0),
            Conv::Not => Bool(v.to_int()? == 0),
            Conv::Odd => Bool(v.to_int()? & 1 == 1),
            Conv::Even => Bool(v.to_int()? & 1 == 0),
            Conv::Debug => v,
            // As HAProxy: an input that is no key of the table gives no sample; a missing
            // entry gives 0 (false); a present one lacking the data, no sample.
            Conv::InTable(t) | Conv::Table(_, t) => {
                let view = env.stick?;
                let table = view.tables.find(t)?;
                let key = super::stkey::from_sample(table.key, &v)?;
                let present = table.contains(&key, view.now_ms);
                match self {
                    Conv::Table(d, _) if present => {
                        Int(i64::try_from(table.peek(Some(&key), *d, view.now_ms)?)
                            .unwrap_or(i64::MAX))
                    }
                    Conv::Table(..) => Int(0),
                    _ => Bool(present),
                }
            }
        })
    }
}

fn var_arg(name: &str, a: &str) -> Result<VarName, String> {
    VarName::parse(a).map_err(|_| {
        format!("invalid args in converter '{name}' : failed to register variable name '{a}'")
    })
}

/// `read_int64` as `check_operator` uses it: optional sign, digits, nothing after.
fn parse_c_int(a: &str) -> Option<i64> {
    let (neg, digits) = match a.as_bytes().first() {
        Some(b'-') => (true, &a[1..]),
        Some(b'+') => (false, &a[1..]),
        _ => (false, a),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut n: i64 = 0;
    for c in digits.bytes() {
        n = n.wrapping_mul(10).wrapping_add(i64::from(c - b'0'));
    }
    Some(if neg { n.wrapping_neg() } else { n })
}

/// `strcmp` as HAProxy's: `strncmp` over the common length (stops at a NUL), then the shorter
/// one sorts first; the sign of the byte difference otherwise.
fn strcmp(a: &[u8], b: &[u8]) -> i64 {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return i64::from(*x) - i64::from(*y);
        }
        if *x == 0 {
            return 0;
        }
    }
    match a.len().cmp(&b.len()) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    }
}

/// Equal-length comparison whose time does not depend on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// HAProxy's capped integer arithmetic: overflows give the nearest bound, `div` by zero gives
/// the maximum and `mod` by zero gives 0.
fn arith(op: ArithOp, a: i64, b: i64) -> i64 {
    match op {
        ArithOp::Add => a.saturating_add(b),
        ArithOp::Sub => a.saturating_sub(b),
        ArithOp::Mul => a.saturating_mul(b),
        ArithOp::Div if b == 0 => i64::MAX,
        ArithOp::Div => a.checked_div(b).unwrap_or(i64::MAX),
        ArithOp::Mod if b == 0 => 0,
        ArithOp::Mod => a.checked_rem(b).unwrap_or(0),
        ArithOp::And => a & b,
        ArithOp::Or => a | b,
        ArithOp::Xor => a ^ b,
    }
}

/// `field`: the `index`th field (from the end when negative) and `count - 1` more (0: all the
/// rest); `None` when there is no such field.
fn field<'a>(s: &'a [u8], index: i64, delims: &[u8], count: i64) -> Option<&'a [u8]> {
    let is_d = |c: &u8| delims.contains(c);
    let parts: Vec<(usize, usize)> = {
        let mut v = Vec::new();
        let mut start = 0;
        for (i, c) in s.iter().enumerate() {
            if is_d(c) {
                v.push((start, i));
                start = i + 1;
            }
        }
        v.push((start, s.len()));
        v
    };
    let n = parts.len() as i64;
    let take = |first: i64, last: i64| -> Option<&'a [u8]> {
        let (a, _) = parts.get(usize::try_from(first).ok()?)?;
        let (_, b) = parts.get(usize::try_from(last).ok()?)?;
        s.get(*a..*b)
    };
    if index > 0 {
        let first = index - 1;
        if first >= n {
            return None;
        }
        let last = if count <= 0 {
            n - 1
        } else {
            (first + count - 1).min(n - 1)
        };
        take(first, last)
    } else {
        let last = n + index;
        if last < 0 {
            return None;
        }
        let first = if count <= 0 {
            0
        } else {
            (last - count + 1).max(0)
        };
        take(first, last)
    }
}

/// `word`: as `field`, but runs of delimiters count as one and empty words do not exist; a
/// missing word is the empty string.
fn word<'a>(s: &'a [u8], index: i64, delims: &[u8], count: i64) -> &'a [u8] {
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (i, c) in s.iter().enumerate() {
        match (delims.contains(c), start) {
            (false, None) => start = Some(i),
            (true, Some(st)) => {
                words.push((st, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(st) = start {
        words.push((st, s.len()));
    }
    let n = words.len() as i64;
    let (first, last) = if index > 0 {
        let first = index - 1;
        let last = if count <= 0 {
            n - 1
        } else {
            (first + count - 1).min(n - 1)
        };
        (first, last)
    } else {
        let last = n + index;
        let first = if count <= 0 {
            0
        } else {
            (last - count + 1).max(0)
        };
        (first, last)
    };
    if first < 0 || first >= n || last < first {
        return &[];
    }
    let (a, _) = words[first as usize];
    let (_, b) = words[last as usize];
    &s[a..b]
}

/// HAProxy's `\1`…`\9` references become the regex crate's `${1}`; a literal `$` stays one.
fn regsub_template(subst: &str) -> String {
    let mut out = String::with_capacity(subst.len());
    let mut it = subst.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\\' if it.peek().is_some_and(char::is_ascii_digit) => {
                if let Some(d) = it.next() {
                    out.push_str(&format!("${{{d}}}"));
                }
            }
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out
}

fn digest(a: DigestAlg, data: &[u8]) -> Vec<u8> {
    let alg = match a {
        DigestAlg::Sha1 => &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        DigestAlg::Sha256 => &ring::digest::SHA256,
        DigestAlg::Sha384 => &ring::digest::SHA384,
        DigestAlg::Sha512 => &ring::digest::SHA512,
    };
    ring::digest::digest(alg, data).as_ref().to_vec()
}

fn hmac(a: DigestAlg, key: &[u8], data: &[u8]) -> Vec<u8> {
    let alg = match a {
        DigestAlg::Sha1 => ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        DigestAlg::Sha256 => ring::hmac::HMAC_SHA256,
        DigestAlg::Sha384 => ring::hmac::HMAC_SHA384,
        DigestAlg::Sha512 => ring::hmac::HMAC_SHA512,
    };
    let k = ring::hmac::Key::new(alg, key);
    ring::hmac::sign(&k, data).as_ref().to_vec()
}

/// The hashes HAProxy offers (`hash-type … sdbm|djb2|wt6|crc32`), optionally followed by its
/// full-avalanche integer mix; the result is an unsigned 32-bit value.
fn hashed(h: u32, avalanche: bool) -> i64 {
    i64::from(if avalanche { full_hash(h) } else { h })
}

pub fn full_hash(mut a: u32) -> u32 {
    // Bob Jenkins' 32-bit integer avalanche, the one HAProxy uses.
    a = a.wrapping_add(0x7ed55d16).wrapping_add(a << 12);
    a = (a ^ 0xc761c23c) ^ (a >> 19);
    a = a.wrapping_add(0x165667b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2646c) ^ (a << 9);
    a = a.wrapping_add(0xfd7046c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a4f09) ^ (a >> 16);
    // Spread over the tree: a large prime close to 3/4 of 2^32.
    a.wrapping_mul(3_221_225_473)
}

pub fn djb2(b: &[u8]) -> u32 {
    b.iter().fold(5381u32, |h, &c| {
        (h << 5).wrapping_add(h).wrapping_add(u32::from(c))
    })
}

pub fn sdbm(b: &[u8]) -> u32 {
    b.iter().fold(0u32, |h, &c| {
        u32::from(c)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

pub fn crc32(b: &[u8]) -> u32 {
    let mut h = !0u32;
    for &c in b {
        h ^= u32::from(c);
        for _ in 0..8 {
            h = (h >> 1) ^ if h & 1 == 1 { 0xedb8_8320 } else { 0 };
        }
    }
    !h
}

pub fn wt6(b: &[u8]) -> u32 {
    let (mut h0, mut h1) = (0xa53c_965au32, 0x5ca6_953au32);
    let (mut step0, mut step1) = (6u32, 18u32);
    for &c in b {
        let t = u32::from(c);
        h0 = !(h0 ^ t);
        h1 = !(h1.wrapping_add(t));
        let t = h1.rotate_left(step0);
        h1 = h0.rotate_left(step1);
        h0 = t;
        let t = ((h0 >> 16) ^ h1) & 0xffff;
        step0 = t & 0x1f;
        step1 = t >> 11;
    }
    h0 ^ h1
}

/// `json`: escapes for a JSON string as HAProxy does (`/` included; other non-printable bytes
/// as `\u00XX`).
fn json(b: &[u8], input: JsonInput) -> Option<String> {
    let mut out = String::with_capacity(b.len() + 8);
    let push = |c: u32, out: &mut String| match c {
        0x22 => out.push_str("\\\""),
        0x5c => out.push_str("\\\\"),
        0x2f => out.push_str("\\/"),
        0x08 => out.push_str("\\b"),
        0x0c => out.push_str("\\f"),
        0x0d => out.push_str("\\r"),
        0x0a => out.push_str("\\n"),
        0x09 => out.push_str("\\t"),
        0x20..=0x7e => out.push(char::from_u32(c).unwrap_or('?')),
        _ => out.push_str(&format!("\\u{:04x}", c & 0xffff)),
    };
    match input {
        JsonInput::Ascii => {
            for &c in b {
                push(u32::from(c), &mut out);
            }
        }
        JsonInput::Utf8 | JsonInput::Utf8Skip => {
            for chunk in b.utf8_chunks() {
                for ch in chunk.valid().chars() {
                    if u32::from(ch) > 0xffff {
                        if input == JsonInput::Utf8 {
                            return None;
                        }
                        continue;
                    }
                    push(u32::from(ch), &mut out);
                }
                if !chunk.invalid().is_empty() && input == JsonInput::Utf8 {
                    return None;
                }
            }
        }
    }
    Some(out)
}

/// `url_dec`: `%XX` decoded, `+` a space in a form (or after the `?`); a bad escape fails.
fn url_dec(s: &str, form: bool) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut in_query = form;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b.get(i + 1..i + 3)?;
                let h = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(h, 16).ok()?);
                i += 3;
                continue;
            }
            b'+' if in_query => out.push(b' '),
            b'?' => {
                in_query = true;
                out.push(b'?');
            }
            c => out.push(c),
        }
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// strftime(3) over a Unix time, in UTC or the local zone.
fn strftime(format: &str, t: i64, utc: bool) -> Option<String> {
    use std::fmt::Write;
    let dt = chrono::DateTime::from_timestamp(t, 0)?;
    let mut out = String::new();
    let r = if utc {
        write!(out, "{}", dt.format(format))
    } else {
        write!(out, "{}", dt.with_timezone(&chrono::Local).format(format))
    };
    r.ok().map(|_| out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(name: &str, args: &[&str]) -> Conv {
        let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Conv::parse(name, &a).unwrap().unwrap()
    }
    fn s(v: &str) -> SampleValue<'_> {
        SampleValue::Str(Cow::Borrowed(v))
    }
    fn run(name: &str, args: &[&str], v: SampleValue<'_>) -> Option<String> {
        conv(name, args).apply(v).map(|v| v.to_str().into_owned())
    }

    #[test]
    fn field_and_word_as_configuration_txt() {
        // configuration.txt: field(2,:) of "f1:f2:f3" is "f2"; negative indexes count from
        // the end; a count takes more fields.
        assert_eq!(
            run("field", &["2", ":"], s("f1:f2:f3")).as_deref(),
            Some("f2")
        );
        assert_eq!(
            run("field", &["-1", ":"], s("f1:f2:f3")).as_deref(),
            Some("f3")
        );
        assert_eq!(
            run("field", &["2", ":", "2"], s("f1:f2:f3:f4")).as_deref(),
            Some("f2:f3")
        );
        assert_eq!(
            run("field", &["2", ":", "0"], s("f1:f2:f3:f4")).as_deref(),
            Some("f2:f3:f4")
        );
        assert_eq!(
            run("field", &["-2", ":", "2"], s("f1:f2:f3:f4")).as_deref(),
            Some("f2:f3")
        );
        assert_eq!(run("field", &["2", ":"], s("f1::f3")).as_deref(), Some(""));
        assert_eq!(run("field", &["5", ":"], s("f1:f2")), None);
        assert_eq!(
            run("word", &["2", "/"], s("/w1//w2/w3")).as_deref(),
            Some("w2")
        );
        assert_eq!(
            run("word", &["-1", "/"], s("/w1//w2/w3/")).as_deref(),
            Some("w3")
        );
        assert_eq!(
            run("word", &["2", "/", "2"], s("/w1//w2/w3/w4")).as_deref(),
            Some("w2/w3")
        );
        assert_eq!(run("word", &["7", "/"], s("/w1/w2")).as_deref(), Some(""));
        let a: Vec<String> = vec!["0".into(), ":".into()];
        assert!(Conv::parse("field", &a).unwrap().is_err());
    }

    #[test]
    fn hashes_and_encodings() {
        // Known values of the public algorithms.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(djb2(b""), 5381);
        assert_eq!(djb2(b"a"), 5381 * 33 + 97);
        assert_eq!(sdbm(b"a"), 97);
        // With the avalanche flag, as HAProxy 2.6 printed them for this input.
        assert_eq!(full_hash(crc32(b"a\"b/c\\d")), 1_993_860_473);
        assert_eq!(full_hash(sdbm(b"a\"b/c\\d")), 568_292_297);
        assert_eq!(wt6(b"a\"b/c\\d"), 751_834_150);
        assert_eq!(run("hex", &[], s("ab\n")).as_deref(), Some("61620A"));
        assert_eq!(run("base64", &[], s("hello")).as_deref(), Some("aGVsbG8="));
        assert_eq!(
            conv("b64dec", &[])
                .apply(s("aGVsbG8="))
                .map(|v| v.to_str().into_owned())
                .as_deref(),
            Some("hello")
        );
        assert_eq!(run("ub64enc", &[], s("\u{ff}?")).as_deref(), Some("w78_"));
        assert_eq!(run("hex2i", &[], s("1F")).as_deref(), Some("31"));
        assert_eq!(run("hex2i", &[], s("zz")), None);
        let sha1 = conv("sha1", &[]).apply(s("abc")).unwrap();
        assert_eq!(
            conv("hex", &[]).apply(sha1).unwrap().to_str(),
            "A9993E364706816ABA3E25717850C26C9CD0D89D"
        );
        let h256 = conv("sha2", &[]).apply(s("abc")).unwrap();
        assert_eq!(
            conv("hex", &[]).apply(h256).unwrap().to_str(),
            "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
        );
        let mac = conv("hmac", &["sha256", "a2V5"])
            .apply(s("The quick brown fox jumps over the lazy dog"))
            .unwrap();
        assert_eq!(
            conv("hex", &[]).apply(mac).unwrap().to_str(),
            "F7BC83F430538424B13298E6AA6FB143EF4D59A14946175997479DBC2D1A3CD8"
        );
        assert_eq!(run("bytes", &["1", "2"], s("abcd")).as_deref(), Some("bc"));
        assert_eq!(run("bytes", &["9"], s("abcd")).as_deref(), Some(""));
    }

    #[test]
    fn json_escapes_as_haproxy() {
        assert_eq!(
            run("json", &[], s("a\"b\\c/d\n\u{1}")).as_deref(),
            Some("a\\\"b\\\\c\\/d\\n\\u0001")
        );
        assert_eq!(run("json", &["utf8"], s("é")).as_deref(), Some("\\u00e9"));
        // ASCII reading: each byte of é is escaped.
        assert_eq!(run("json", &[], s("é")).as_deref(), Some("\\u00c3\\u00a9"));
    }

    #[test]
    fn arithmetic_is_capped() {
        let i = |n: i64| SampleValue::Int(n);
        assert_eq!(run("add", &["3"], i(4)).as_deref(), Some("7"));
        assert_eq!(run("add", &["1"], i(i64::MAX)), Some(i64::MAX.to_string()));
        assert_eq!(run("sub", &["1"], i(i64::MIN)), Some(i64::MIN.to_string()));
        assert_eq!(run("mul", &["-2"], i(i64::MAX)), Some(i64::MIN.to_string()));
        assert_eq!(run("div", &["0"], i(5)), Some(i64::MAX.to_string()));
        assert_eq!(run("div", &["-1"], i(i64::MIN)), Some(i64::MAX.to_string()));
        assert_eq!(run("mod", &["0"], i(5)).as_deref(), Some("0"));
        assert_eq!(run("mod", &["3"], i(-7)).as_deref(), Some("-1"));
        assert_eq!(run("and", &["6"], i(3)).as_deref(), Some("2"));
        assert_eq!(run("neg", &[], i(5)).as_deref(), Some("-5"));
        assert_eq!(run("odd", &[], i(5)).as_deref(), Some("1"));
        assert_eq!(run("not", &[], i(5)).as_deref(), Some("0"));
        assert_eq!(
            run("iif", &["yes", "no"], SampleValue::Bool(true)).as_deref(),
            Some("yes")
        );
    }

    #[test]
    fn variables_as_arguments() {
        // configuration.txt: concat, add_item, strcmp, secure_memcmp and the operators reading
        // a variable; an unset variable drops the part (concat) or fails the sample.
        use crate::ana::vars::SessVars;
        let vars = Vars::new(SessVars::default());
        let n = |s: &str| VarName::parse(s).unwrap();
        vars.set(&n("txn.x"), s("XX"), &[]);
        vars.set(&n("txn.n"), SampleValue::Int(5), &[]);
        let with = |name: &str, args: &[&str], v: SampleValue<'static>| {
            conv(name, args)
                .apply_with(
                    v,
                    &ConvEnv {
                        vars: Some(&vars),
                        stick: None,
                    },
                )
                .map(|v| v.to_str().into_owned())
        };
        assert_eq!(
            with("concat", &["<", "txn.x", ">"], s("a")).as_deref(),
            Some("a<XX>")
        );
        assert_eq!(
            with("concat", &["", "txn.nope", "!"], s("a")).as_deref(),
            Some("a!")
        );
        assert_eq!(
            with("concat", &[",", "txn.n"], s("a")).as_deref(),
            Some("a,5")
        );
        assert_eq!(
            with("add_item", &[",", "txn.x"], s("a")).as_deref(),
            Some("a,XX")
        );
        assert_eq!(
            with("add_item", &[",", "txn.x"], s("")).as_deref(),
            Some("XX")
        );
        assert_eq!(
            with("add_item", &[",", "", "s"], s("a")).as_deref(),
            Some("a,s")
        );
        assert_eq!(
            with("add_item", &[",", "txn.nope"], s("a")).as_deref(),
            Some("a")
        );
        assert_eq!(with("strcmp", &["txn.x"], s("XX")).as_deref(), Some("0"));
        assert_eq!(with("strcmp", &["txn.x"], s("X")).as_deref(), Some("-1"));
        assert_eq!(with("strcmp", &["txn.x"], s("XXa")).as_deref(), Some("1"));
        assert!(
            with("strcmp", &["txn.x"], s("XA"))
                .unwrap()
                .starts_with('-')
        );
        assert_eq!(with("strcmp", &["txn.nope"], s("XX")), None);
        assert_eq!(
            with("secure_memcmp", &["txn.x"], s("XX")).as_deref(),
            Some("1")
        );
        assert_eq!(
            with("secure_memcmp", &["txn.x"], s("XY")).as_deref(),
            Some("0")
        );
        assert_eq!(
            with("secure_memcmp", &["txn.x"], s("XXX")).as_deref(),
            Some("0")
        );
        assert_eq!(
            with("add", &["txn.n"], SampleValue::Int(2)).as_deref(),
            Some("7")
        );
        assert_eq!(
            with("mul", &["-3"], SampleValue::Int(2)).as_deref(),
            Some("-6")
        );
        assert_eq!(with("sub", &["txn.nope"], SampleValue::Int(2)), None);
        let err = |name: &str, args: &[&str]| {
            let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            Conv::parse(name, &a).unwrap().unwrap_err()
        };
        assert_eq!(
            err("add", &["x1"]),
            "invalid args in converter 'add' : expects an integer or a variable name"
        );
        assert_eq!(
            err("concat", &["a", "foo", "b"]),
            "invalid args in converter 'concat' : failed to register variable name 'foo'"
        );
        assert_eq!(
            err("add_item", &[","]),
            "invalid args in converter 'add_item' : one of the optional arguments has to be nonempty"
        );
        assert!(err("strcmp", &[]).contains("expected type 'string' at position 1"));
    }

    #[test]
    fn table_converters_parse_and_need_a_table() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(matches!(
            Conv::parse("table_http_req_rate", &a(&["t"])),
            Some(Ok(Conv::Table(crate::stick::StickData::HttpReqRate, _)))
        ));
        assert!(matches!(
            Conv::parse("in_table", &a(&["t"])),
            Some(Ok(Conv::InTable(_)))
        ));
        assert!(
            Conv::parse("in_table", &[])
                .unwrap()
                .unwrap_err()
                .contains("expected type 'table' at position 1")
        );
        assert!(matches!(
            Conv::parse("table_gpc0", &a(&["t"])),
            Some(Ok(Conv::Table(crate::stick::StickData::Gpc0, _)))
        ));
        // Not one of HAProxy's converters (its byte counters are `table_kbytes_*`).
        assert!(Conv::parse("table_bytes_in_cnt", &a(&["t"])).is_none());
        // Without stick tables in reach: no sample.
        assert_eq!(run("in_table", &["t"], s("10.0.0.1")), None);
    }

    #[test]
    fn strings_ips_and_dates() {
        assert_eq!(
            run("regsub", &["/+", "/", "g"], s("//a///b")).as_deref(),
            Some("/a/b")
        );
        assert_eq!(
            run("regsub", &["(a)(b)", "\\2\\1$"], s("xaby")).as_deref(),
            Some("xba$y")
        );
        assert_eq!(
            run("url_dec", &[], s("a%20b+c?d+e")).as_deref(),
            Some("a b+c?d e")
        );
        assert_eq!(run("url_dec", &["1"], s("a+b")).as_deref(), Some("a b"));
        assert_eq!(run("url_dec", &[], s("a%2")), None);
        assert_eq!(run("ltrim", &[" /"], s(" /a/ ")).as_deref(), Some("a/ "));
        assert_eq!(run("rtrim", &[" /"], s(" /a/ ")).as_deref(), Some(" /a"));
        assert_eq!(run("cut_crlf", &[], s("ab\r\ncd")).as_deref(), Some("ab"));
        let ip = |a: &str| SampleValue::Ip(a.parse().unwrap());
        assert_eq!(
            run("ipmask", &["24"], ip("192.168.1.77")).as_deref(),
            Some("192.168.1.0")
        );
        assert_eq!(
            run("ipmask", &["255.255.0.0"], ip("10.1.2.3")).as_deref(),
            Some("10.1.0.0")
        );
        assert_eq!(run("ipmask", &["24"], ip("2001:db8::1")), None);
        assert_eq!(
            run("ipmask", &["24", "32"], ip("2001:db8::1")).as_deref(),
            Some("2001:db8::")
        );
        assert_eq!(
            run("http_date", &[], SampleValue::Int(784111777)).as_deref(),
            Some("Sun, 06 Nov 1994 08:49:37 GMT")
        );
        assert_eq!(
            run("http_date", &["0", "ms"], SampleValue::Int(784111777000)).as_deref(),
            Some("Sun, 06 Nov 1994 08:49:37 GMT")
        );
        assert_eq!(
            run(
                "utime",
                &["%Y-%m-%d %H:%M:%S", "3600"],
                SampleValue::Int(784111777)
            )
            .as_deref(),
            Some("1994-11-06 09:49:37")
        );
    }
}
