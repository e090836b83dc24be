//! OpenSSL cipher strings, TLS 1.3 ciphersuite lists, curve lists and version ranges translated
//! onto what rustls (aws-lc-rs provider) can do. Pure: no I/O.

use rustls::crypto::SupportedKxGroup;
use rustls::{CipherSuite, SupportedCipherSuite};

use crate::config::model::TlsVersion;

/// OpenSSL's name and the alias words that select it, for each TLS 1.2 suite rustls offers.
/// Aliases follow `openssl ciphers -v` groups (kx, auth, enc, mac, strength).
const TLS12_NAMES: &[(CipherSuite, &str, &[&str])] = &[
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        &["ECDSA", "aECDSA", "AES", "AES256", "AESGCM", "SHA384"],
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        &["ECDSA", "aECDSA", "AES", "AES128", "AESGCM", "SHA256"],
    ),
    (
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        &["ECDSA", "aECDSA", "CHACHA20", "SHA256"],
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-RSA-AES256-GCM-SHA384",
        &["RSA", "aRSA", "AES", "AES256", "AESGCM", "SHA384"],
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-RSA-AES128-GCM-SHA256",
        &["RSA", "aRSA", "AES", "AES128", "AESGCM", "SHA256"],
    ),
    (
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-RSA-CHACHA20-POLY1305",
        &["RSA", "aRSA", "CHACHA20", "SHA256"],
    ),
];

/// Words every rustls TLS 1.2 suite carries (all are ECDHE AEAD suites of HIGH strength).
const COMMON_ALIASES: &[&str] = &[
    "ALL",
    "DEFAULT",
    "HIGH",
    "ECDHE",
    "EECDH",
    "kECDHE",
    "kEECDH",
    "ECDH",
    "AEAD",
    "TLSv1.2",
    "COMPLEMENTOFDEFAULT",
];

fn tls12_matches(suite: CipherSuite, word: &str) -> bool {
    if word == "COMPLEMENTOFDEFAULT" {
        return false;
    }
    TLS12_NAMES.iter().any(|(s, name, aliases)| {
        *s == suite && (*name == word || aliases.contains(&word) || COMMON_ALIASES.contains(&word))
    })
}

/// Applies an OpenSSL cipher string (`ECDHE+AESGCM:!aRSA`) to the TLS 1.2 suites in `available`,
/// keeping OpenSSL's semantics: `:`/`,`/space separate, `+` intersects, a leading `!` removes for
/// good, `-` removes, `+` moves to the end, `@…` directives are ignored. Words OpenSSL would know
/// but rustls has no suite for select nothing (as unknown words do in OpenSSL); only an empty
/// result is an error, in HAProxy's words.
pub fn tls12_suites(
    spec: &str,
    available: &[SupportedCipherSuite],
) -> Result<Vec<SupportedCipherSuite>, String> {
    let pool: Vec<SupportedCipherSuite> = available
        .iter()
        .copied()
        .filter(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
        .collect();
    let mut active: Vec<SupportedCipherSuite> = Vec::new();
    let mut killed: Vec<CipherSuite> = Vec::new();
    for token in spec.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
        let (op, body) = match token.as_bytes().first() {
            Some(b'!') => ('!', &token[1..]),
            Some(b'-') => ('-', &token[1..]),
            Some(b'+') => ('+', &token[1..]),
            Some(b'@') => continue,
            _ => (' ', token),
        };
        let selected: Vec<SupportedCipherSuite> = pool
            .iter()
            .copied()
            .filter(|s| {
                body.split('+')
                    .all(|w| !w.is_empty() && tls12_matches(s.suite(), w))
            })
            .collect();
        match op {
            '!' => {
                active.retain(|a| !selected.iter().any(|s| s.suite() == a.suite()));
                killed.extend(selected.iter().map(|s| s.suite()));
            }
            '-' => active.retain(|a| !selected.iter().any(|s| s.suite() == a.suite())),
            '+' => {
                let (moved, kept): (Vec<_>, Vec<_>) = active
                    .iter()
                    .copied()
                    .partition(|a| selected.iter().any(|s| s.suite() == a.suite()));
                active = kept;
                active.extend(moved);
            }
            _ => {
                for s in selected {
                    if !killed.contains(&s.suite())
                        && !active.iter().any(|a| a.suite() == s.suite())
                    {
                        active.push(s);
                    }
                }
            }
        }
    }
    if active.is_empty() {
        return Err(format!("unable to set SSL cipher list to '{spec}'"));
    }
    Ok(active)
}

/// TLS 1.3 suite names rustls knows under the aws-lc-rs provider.
const TLS13_NAMES: &[(CipherSuite, &str)] = &[
    (
        CipherSuite::TLS13_AES_256_GCM_SHA384,
        "TLS_AES_256_GCM_SHA384",
    ),
    (
        CipherSuite::TLS13_AES_128_GCM_SHA256,
        "TLS_AES_128_GCM_SHA256",
    ),
    (
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        "TLS_CHACHA20_POLY1305_SHA256",
    ),
];

/// `ciphersuites TLS_AES_128_GCM_SHA256:…`, in the listed order. Names rustls lacks (the CCM
/// suites) are skipped as OpenSSL skips unknown names; an empty result is an error.
pub fn tls13_suites(
    spec: &str,
    available: &[SupportedCipherSuite],
) -> Result<Vec<SupportedCipherSuite>, String> {
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    for name in spec.split(':').filter(|t| !t.is_empty()) {
        let Some((cs, _)) = TLS13_NAMES.iter().find(|(_, n)| *n == name) else {
            continue;
        };
        if let Some(s) = available.iter().find(|s| s.suite() == *cs)
            && !out.iter().any(|o| o.suite() == *cs)
        {
            out.push(*s);
        }
    }
    if out.is_empty() {
        return Err(format!("unable to set TLS 1.3 cipher suites to '{spec}'"));
    }
    Ok(out)
}

/// `curves X25519:P-256`: OpenSSL's names (NIST and SECG spellings) for the groups rustls has.
pub fn kx_groups(
    spec: &str,
    available: &[&'static dyn SupportedKxGroup],
) -> Result<Vec<&'static dyn SupportedKxGroup>, String> {
    let err = || format!("unable to set SSL curves list to '{spec}'");
    let mut out: Vec<&'static dyn SupportedKxGroup> = Vec::new();
    for name in spec.split(':') {
        let group = match name {
            "X25519" | "x25519" => rustls::NamedGroup::X25519,
            "P-256" | "prime256v1" | "secp256r1" => rustls::NamedGroup::secp256r1,
            "P-384" | "secp384r1" => rustls::NamedGroup::secp384r1,
            _ => return Err(err()),
        };
        let g = available
            .iter()
            .find(|g| g.name() == group)
            .ok_or_else(err)?;
        if !out.iter().any(|o| o.name() == group) {
            out.push(*g);
        }
    }
    Ok(out)
}

/// `ssl-min-ver`/`ssl-max-ver` → the rustls versions. HAProxy 2.6 defaults to TLSv1.2..TLSv1.3
/// on binds. A range rustls cannot serve is an error rather than a silent downgrade; a minimum of
/// TLSv1.1 is narrowed to TLSv1.2 because `no-tlsv10` alone is folded into that minimum by the
/// config parser.
pub fn versions(
    min: Option<TlsVersion>,
    max: Option<TlsVersion>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let min = min.unwrap_or(TlsVersion::Tls12);
    let max = max.unwrap_or(TlsVersion::Tls13);
    if min > max {
        return Err("all SSL/TLS versions are disabled".to_string());
    }
    for (v, word) in [(min, "ssl-min-ver"), (max, "ssl-max-ver")] {
        if matches!(v, TlsVersion::Ssl3 | TlsVersion::Tls10)
            || (word == "ssl-max-ver" && v == TlsVersion::Tls11)
        {
            return Err(format!(
                "'{word} {}' : not supported (only TLSv1.2 and TLSv1.3 are available)",
                version_name(v)
            ));
        }
    }
    let mut out = Vec::new();
    if min <= TlsVersion::Tls13 && max >= TlsVersion::Tls13 {
        out.push(&rustls::version::TLS13);
    }
    if min <= TlsVersion::Tls12 && max >= TlsVersion::Tls12 {
        out.push(&rustls::version::TLS12);
    }
    Ok(out)
}

/// OpenSSL's name of a negotiated suite (`ssl_fc_cipher`).
pub fn openssl_name(cs: CipherSuite) -> &'static str {
    TLS12_NAMES
        .iter()
        .map(|(c, n, _)| (*c, *n))
        .chain(TLS13_NAMES.iter().copied())
        .find(|(c, _)| *c == cs)
        .map_or("", |(_, n)| n)
}

pub fn version_name(v: TlsVersion) -> &'static str {
    match v {
        TlsVersion::Ssl3 => "SSLv3",
        TlsVersion::Tls10 => "TLSv1.0",
        TlsVersion::Tls11 => "TLSv1.1",
        TlsVersion::Tls12 => "TLSv1.2",
        TlsVersion::Tls13 => "TLSv1.3",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<SupportedCipherSuite> {
        crate::tls::default_provider().cipher_suites
    }

    fn names(v: &[SupportedCipherSuite]) -> Vec<&'static str> {
        v.iter()
            .map(|s| {
                TLS12_NAMES
                    .iter()
                    .find(|(c, _, _)| *c == s.suite())
                    .map(|(_, n, _)| *n)
                    .or_else(|| {
                        TLS13_NAMES
                            .iter()
                            .find(|(c, _)| *c == s.suite())
                            .map(|(_, n)| *n)
                    })
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn ecdhe_aesgcm_then_chacha() {
        let got = tls12_suites("ECDHE+AESGCM:ECDHE+CHACHA20", &all()).unwrap();
        assert_eq!(
            names(&got),
            [
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305",
            ]
        );
    }

    #[test]
    fn bang_kills_for_good_minus_does_not() {
        let got = tls12_suites("!aRSA:HIGH", &all()).unwrap();
        assert_eq!(
            names(&got),
            [
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
            ]
        );
        let got = tls12_suites("-aRSA:HIGH", &all()).unwrap();
        assert_eq!(got.len(), 6);
    }

    #[test]
    fn plus_moves_to_end_and_exact_names() {
        let got = tls12_suites(
            "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256:+CHACHA20:@STRENGTH",
            &all(),
        )
        .unwrap();
        assert_eq!(
            names(&got),
            [
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-CHACHA20-POLY1305"
            ]
        );
    }

    #[test]
    fn unusable_cipher_strings_are_errors() {
        for spec in [
            "FOO",
            "AES128-SHA:DHE-RSA-AES256-SHA",
            "HIGH:!ECDHE",
            "ECDHE+3DES",
        ] {
            assert_eq!(
                tls12_suites(spec, &all()).unwrap_err(),
                format!("unable to set SSL cipher list to '{spec}'")
            );
        }
        // Unknown words beside usable ones are ignored, as OpenSSL does.
        assert_eq!(tls12_suites("FOO:ECDHE+AES128", &all()).unwrap().len(), 2);
    }

    #[test]
    fn tls13_names() {
        let got = tls13_suites(
            "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_CCM_SHA256:TLS_AES_128_GCM_SHA256",
            &all(),
        )
        .unwrap();
        assert_eq!(
            names(&got),
            ["TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"]
        );
        assert_eq!(
            tls13_suites("FOO", &all()).unwrap_err(),
            "unable to set TLS 1.3 cipher suites to 'FOO'"
        );
    }

    #[test]
    fn curves() {
        let avail = crate::tls::default_provider().kx_groups;
        // The defaults: OpenSSL 3.0's classical groups that rustls has, no post-quantum hybrid.
        assert_eq!(
            avail.iter().map(|g| g.name()).collect::<Vec<_>>(),
            [
                rustls::NamedGroup::X25519,
                rustls::NamedGroup::secp256r1,
                rustls::NamedGroup::secp384r1
            ]
        );
        let got = kx_groups("P-256:X25519", &avail).unwrap();
        assert_eq!(
            got.iter().map(|g| g.name()).collect::<Vec<_>>(),
            [rustls::NamedGroup::secp256r1, rustls::NamedGroup::X25519]
        );
        assert_eq!(
            kx_groups("X25519:P-521", &avail).unwrap_err(),
            "unable to set SSL curves list to 'X25519:P-521'"
        );
    }

    #[test]
    fn version_ranges() {
        use TlsVersion::*;
        let v = |a, b| versions(a, b).map(|v| v.iter().map(|p| p.version).collect::<Vec<_>>());
        let both = vec![
            rustls::ProtocolVersion::TLSv1_3,
            rustls::ProtocolVersion::TLSv1_2,
        ];
        assert_eq!(v(None, None).unwrap(), both);
        assert_eq!(v(Some(Tls11), None).unwrap(), both);
        assert_eq!(
            v(Some(Tls13), None).unwrap(),
            [rustls::ProtocolVersion::TLSv1_3]
        );
        assert_eq!(
            v(None, Some(Tls12)).unwrap(),
            [rustls::ProtocolVersion::TLSv1_2]
        );
        assert_eq!(
            v(Some(Tls13), Some(Tls12)).unwrap_err(),
            "all SSL/TLS versions are disabled"
        );
        assert_eq!(
            v(Some(Tls10), None).unwrap_err(),
            "'ssl-min-ver TLSv1.0' : not supported (only TLSv1.2 and TLSv1.3 are available)"
        );
        assert_eq!(
            v(Some(Ssl3), Some(Tls11)).unwrap_err(),
            "'ssl-min-ver SSLv3' : not supported (only TLSv1.2 and TLSv1.3 are available)"
        );
        assert_eq!(
            v(None, Some(Tls11)).unwrap_err(),
            "all SSL/TLS versions are disabled"
        );
    }
}
