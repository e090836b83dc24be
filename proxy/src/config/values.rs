//! Scalar values in HAProxy's syntax: times (`us ms s m h d`, bare numbers are milliseconds),
//! sizes (`k m g`), integers, and the character set of proxy/server names.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeError {
    Empty,
    /// The first character that is neither a digit nor a known unit.
    BadChar(char),
    /// Above 2^31-1 ms, HAProxy's timer limit.
    Overflow,
}

/// Largest timer HAProxy accepts (ms).
pub const TIME_MAX_MS: u64 = i32::MAX as u64;

/// Microseconds per unit of a time suffix (`us|ms|s|m|h|d`; `bare_us` for none), or the
/// character HAProxy names: the first one after the longest known unit prefix.
pub fn time_unit_us(unit: &str, bare_us: u64) -> Result<u64, char> {
    Ok(match unit {
        "" => bare_us,
        "ms" => 1_000,
        "us" => 1,
        "s" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => {
            let known = ["ms", "us", "s", "m", "h", "d"]
                .iter()
                .find(|u| unit.starts_with(**u))
                .map_or(0, |u| u.len());
            return Err(unit
                .get(known..)
                .and_then(|r| r.chars().next())
                .unwrap_or(' '));
        }
    })
}

/// Parses `<n>[us|ms|s|m|h|d]` where a bare number is in milliseconds.
pub fn parse_time(s: &str) -> Result<Duration, TimeError> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if s.is_empty() {
        return Err(TimeError::Empty);
    }
    let (num, unit) = s.split_at(digits);
    if num.is_empty() {
        return Err(TimeError::BadChar(unit.chars().next().unwrap_or(' ')));
    }
    let n: u64 = num.parse().map_err(|_| TimeError::Overflow)?;
    let us_per = time_unit_us(unit, 1_000).map_err(TimeError::BadChar)?;
    let us = n.checked_mul(us_per).ok_or(TimeError::Overflow)?;
    if us / 1_000 > TIME_MAX_MS {
        return Err(TimeError::Overflow);
    }
    Ok(Duration::from_micros(us))
}

/// `timeout`-style message for a time error: `'<what>'` names the directive.
pub fn time_error_msg(e: &TimeError, arg: &str, what: &str) -> String {
    match e {
        TimeError::Empty => format!("'{what}' expects an integer value (in milliseconds)"),
        TimeError::BadChar(c) => format!("unexpected character '{c}' in '{what}'"),
        TimeError::Overflow => format!(
            "timer overflow in argument '{arg}' to '{what}' (maximum value is 2147483647 ms or ~24.8 days)"
        ),
    }
}

/// Parses `<n>[k|m|g]` (binary multiples).
pub fn parse_size(s: &str) -> Option<u64> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = s.split_at(digits);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit {
        "" => 1,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// A plain non-negative decimal integer (no sign, no spaces).
/// C's `atol`: optional blanks and sign, then digits; anything after is ignored and no digits
/// read as 0 (HAProxy reads several numeric keywords this way).
pub fn atol(s: &str) -> i64 {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    for c in t.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    if neg { -v } else { v }
}

pub fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The first character not allowed in a proxy, server or ACL name (letters, digits, `-_.:`).
pub fn invalid_name_char(name: &str) -> Option<char> {
    name.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
}

/// The words after the keyword joined with single spaces, as HAProxy reads `description <text>…`
/// (global and proxy alike); None when there are none.
pub(crate) fn joined_words(args: &[String]) -> Option<String> {
    let words: Vec<&str> = args
        .iter()
        .skip(1)
        .map(String::as_str)
        .take_while(|w| !w.is_empty())
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// C's `atoi`: leading blanks, an optional sign, then digits up to the first other character
/// (0 when there are none), saturating.
pub fn atoi(s: &str) -> i64 {
    let t = s.trim_start();
    match t.as_bytes().first() {
        Some(b'-') => strtol_radix(&t[1..], 10).0.saturating_neg(),
        Some(b'+') => strtol_radix(&t[1..], 10).0,
        _ => strtol_radix(t, 10).0,
    }
}

/// C's `strtol(s, &end, 0)`: the value and what follows it (`0x` hex, leading-`0` octal).
pub fn strtol(s: &str) -> (i64, &str) {
    let t = s.trim_start();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if (body.starts_with("0x") || body.starts_with("0X"))
        && body[2..].starts_with(|c: char| c.is_ascii_hexdigit())
    {
        (16, &body[2..])
    } else if body.starts_with('0') {
        (8, body)
    } else {
        (10, body)
    };
    let (n, rest) = strtol_radix(digits, radix);
    if rest.len() == digits.len() {
        // No digits at all: nothing is consumed.
        return (0, s);
    }
    (if neg { n.saturating_neg() } else { n }, rest)
}

/// Unsigned digits in `radix`, saturating, and what follows them.
fn strtol_radix(body: &str, radix: u32) -> (i64, &str) {
    let end = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    let n = body[..end].chars().fold(0i64, |n, c| {
        n.saturating_mul(i64::from(radix))
            .saturating_add(i64::from(c.to_digit(radix).unwrap_or(0)))
    });
    (n, &body[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_time("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_time("1500"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_time("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_time("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_time("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_time("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_time("5d"), Ok(Duration::from_secs(5 * 86400)));
        assert_eq!(parse_time(""), Err(TimeError::Empty));
        assert_eq!(parse_time("5x"), Err(TimeError::BadChar('x')));
        assert_eq!(parse_time("x"), Err(TimeError::BadChar('x')));
        assert_eq!(parse_time("5msx"), Err(TimeError::BadChar('x')));
        assert_eq!(parse_time("-1"), Err(TimeError::BadChar('-')));
        assert_eq!(parse_time("25d"), Err(TimeError::Overflow));
        assert_eq!(
            parse_time("2147483647"),
            Ok(Duration::from_millis(2147483647))
        );
        assert_eq!(parse_time("2147483648"), Err(TimeError::Overflow));
        assert_eq!(
            parse_time("99999999999999999999999"),
            Err(TimeError::Overflow)
        );
        assert_eq!(
            time_error_msg(&TimeError::BadChar('x'), "5x", "timeout connect"),
            "unexpected character 'x' in 'timeout connect'"
        );
    }

    #[test]
    fn sizes_numbers_names() {
        assert_eq!(parse_size("16k"), Some(16384));
        assert_eq!(parse_size("2m"), Some(2 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("1t"), None);
        assert_eq!(parse_u32("42"), Some(42));
        assert_eq!(parse_u32("-1"), None);
        assert_eq!(parse_u32("4294967296"), None);
        assert_eq!(parse_u32(""), None);
        assert_eq!(invalid_name_char("be_1.x:y-z"), None);
        assert_eq!(invalid_name_char("f/x"), Some('/'));
    }
}
