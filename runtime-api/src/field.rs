//! Typed field values and their three renderings (CSV cell, `typed` line, JSON object), shared by
//! `show stat` and `show info`.

use std::fmt::Write as _;

/// Value type as printed by the typed and JSON formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    S32,
    U32,
    S64,
    U64,
    Flt,
    Str,
}

impl Ty {
    pub fn as_str(self) -> &'static str {
        match self {
            Ty::S32 => "s32",
            Ty::U32 => "u32",
            Ty::S64 => "s64",
            Ty::U64 => "u64",
            Ty::Flt => "flt",
            Ty::Str => "str",
        }
    }
}

/// Origin, nature and scope letters (`MCP`, `KNS`…).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tags(pub [u8; 3]);

impl Tags {
    pub fn origin_name(self) -> &'static str {
        match self.0[0] {
            b'M' => "Metric",
            b'S' => "Status",
            b'K' => "Key",
            b'C' => "Config",
            b'P' => "Product",
            _ => "Unknown",
        }
    }
    pub fn nature_name(self) -> &'static str {
        match self.0[1] {
            b'G' => "Gauge",
            b'L' => "Limit",
            b'm' => "Min",
            b'M' => "Max",
            b'R' => "Rate",
            b'C' => "Counter",
            b'D' => "Duration",
            b'A' => "Age",
            b'T' => "Time",
            b'N' => "Name",
            b'O' => "Output",
            b'a' => "Avg",
            _ => "Unknown",
        }
    }
    pub fn scope_name(self) -> &'static str {
        match self.0[2] {
            b'P' => "Process",
            b'S' => "Service",
            b's' => "System",
            b'C' => "Cluster",
            _ => "Unknown",
        }
    }
    fn push(self, out: &mut String) {
        for b in self.0 {
            out.push(b as char);
        }
    }
}

/// One field's value; `Empty` fields are blank in CSV and skipped by typed/JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Val<'a> {
    Empty,
    U(u64),
    I(i64),
    S(&'a str),
}

impl Val<'_> {
    pub fn is_empty(&self) -> bool {
        matches!(self, Val::Empty)
    }

    /// Raw value (typed/JSON/`show info`): numbers in decimal, strings as they are.
    pub fn push_raw(&self, out: &mut String) {
        match *self {
            Val::Empty => {}
            Val::U(v) => {
                let _ = write!(out, "{v}");
            }
            Val::I(v) => {
                let _ = write!(out, "{v}");
            }
            Val::S(s) => out.push_str(s),
        }
    }

    /// CSV cell: strings are quoted only when they hold `,`, `"`, CR or LF (HAProxy's
    /// `csv_enc(…, quote=1, oneline)`): `"` doubles, LF becomes a space, CR is dropped and
    /// trailing spaces go.
    pub fn push_csv(&self, out: &mut String) {
        match *self {
            Val::S(s) => push_csv_str(s, out),
            _ => self.push_raw(out),
        }
    }
}

fn push_csv_str(s: &str, out: &mut String) {
    let quote = s.contains([',', '"', '\r', '\n']);
    if quote {
        out.push('"');
    }
    let start = out.len();
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\"\""),
            '\n' => out.push(' '),
            '\r' => {}
            c => out.push(c),
        }
    }
    while out.len() > start && out.ends_with(' ') {
        out.pop();
    }
    if quote {
        out.push('"');
    }
}

/// `<tags>:<type>:<value>` as in typed output.
pub fn push_typed_value(tags: Tags, ty: Ty, v: &Val, out: &mut String) {
    tags.push(out);
    out.push(':');
    out.push_str(ty.as_str());
    out.push(':');
    v.push_raw(out);
}

/// `"tags":{…},"value":{…}` as in JSON output. Strings are not escaped (HAProxy 2.6 does not).
pub fn push_json_tags_value(tags: Tags, ty: Ty, v: &Val, out: &mut String) {
    let _ = write!(
        out,
        "\"tags\":{{\"origin\":\"{}\",\"nature\":\"{}\",\"scope\":\"{}\"}},\"value\":{{\"type\":\"{}\",\"value\":",
        tags.origin_name(),
        tags.nature_name(),
        tags.scope_name(),
        ty.as_str()
    );
    if let Val::S(s) = v {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        v.push_raw(out);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quoting_follows_haproxy() {
        let mut s = String::new();
        Val::S("plain text").push_csv(&mut s);
        s.push('|');
        Val::S("a,b").push_csv(&mut s);
        s.push('|');
        Val::S("say \"hi\"").push_csv(&mut s);
        s.push('|');
        Val::S("l1\nl2\r ").push_csv(&mut s);
        assert_eq!(s, "plain text|\"a,b\"|\"say \"\"hi\"\"\"|\"l1 l2\"");
    }

    #[test]
    fn typed_and_json_values() {
        let mut s = String::new();
        push_typed_value(Tags(*b"MAP"), Ty::S32, &Val::I(-1), &mut s);
        assert_eq!(s, "MAP:s32:-1");
        s.clear();
        push_json_tags_value(Tags(*b"SGP"), Ty::Str, &Val::S("UP"), &mut s);
        assert_eq!(
            s,
            "\"tags\":{\"origin\":\"Status\",\"nature\":\"Gauge\",\"scope\":\"Process\"},\"value\":{\"type\":\"str\",\"value\":\"UP\"}"
        );
    }
}
