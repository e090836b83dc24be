//! The X.509 values `show ssl cert <file>` prints, rendered in OpenSSL's forms as HAProxy 2.6
//! shows them (compared with its output: dates as `ASN1_TIME_print`, names as
//! `X509_NAME_oneline`, serial and SHA-1 in upper-case hex).

use portcullis_runtime_api::ssl::CertDetails;
use rustls_pki_types::CertificateDer;
use x509_parser::prelude::*;
use x509_parser::public_key::PublicKey;

fn hex_upper(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// OpenSSL keeps an ASN1_INTEGER as its magnitude, so HAProxy never prints the DER sign byte
/// (`00C7…` is shown as `C7…`).
fn serial_magnitude(der: &[u8]) -> &[u8] {
    let first = der
        .iter()
        .position(|&b| b != 0)
        .unwrap_or(der.len().saturating_sub(1));
    der.get(first..).unwrap_or(der)
}

/// `Nov  3 09:07:02 2026 GMT` from seconds since the epoch (UTC).
pub fn asn1_time(ts: i64) -> String {
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = ts.div_euclid(86400);
    let secs = ts.rem_euclid(86400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let mon = usize::try_from(m - 1)
        .ok()
        .and_then(|i| MON.get(i))
        .unwrap_or(&"???");
    format!(
        "{mon} {d:2} {:02}:{:02}:{:02} {y} GMT",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// `/C=FR/O=Acme/CN=x`: OpenSSL's short names, dotted OIDs for unknown attributes.
pub fn oneline(name: &X509Name<'_>) -> String {
    let mut out = String::new();
    for rdn in name.iter() {
        for attr in rdn.iter() {
            let id = attr.attr_type().to_id_string();
            let sn = short_name(&id).map_or(id.clone(), str::to_string);
            let val = attr
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|_| String::from_utf8_lossy(attr.as_slice()).into_owned());
            out.push('/');
            out.push_str(&sn);
            out.push('=');
            out.push_str(&val);
        }
    }
    out
}

/// OpenSSL's short name of a distinguished-name attribute.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.15" => "businessCategory",
        "2.5.4.17" => "postalCode",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "2.5.4.97" => "organizationIdentifier",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.3.6.1.4.1.311.60.2.1.3" => "jurisdictionC",
        _ => return None,
    })
}

/// `RSA2048`, `EC256`…; `None` for key types HAProxy 2.6 cannot name (Ed25519, Ed448).
fn algorithm(cert: &X509Certificate<'_>) -> Option<String> {
    let spki = cert.public_key();
    match spki.parsed().ok()? {
        PublicKey::RSA(rsa) => Some(format!("RSA{}", rsa.key_size())),
        PublicKey::EC(_) => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())?;
            let bits = match curve.to_id_string().as_str() {
                "1.2.840.10045.3.1.7" => 256,
                "1.3.132.0.34" => 384,
                "1.3.132.0.35" => 521,
                "1.3.132.0.10" => 256,
                _ => return None,
            };
            Some(format!("EC{bits}"))
        }
        PublicKey::DSA(y) => Some(format!("DSA{}", y.len() * 8)),
        _ => None,
    }
}

fn san(cert: &X509Certificate<'_>) -> String {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return String::new();
    };
    san.value
        .general_names
        .iter()
        .map(|g| match g {
            GeneralName::DNSName(n) => format!("DNS:{n}"),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The details of a file's certificates (leaf first); `None` if the leaf does not parse.
pub fn details(filename: &str, used: bool, certs: &[CertificateDer<'_>]) -> Option<CertDetails> {
    let leaf_der = certs.first()?;
    let (_, leaf) = X509Certificate::from_der(leaf_der).ok()?;
    let sha1 = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, leaf_der);
    let chain = certs
        .get(1..)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| X509Certificate::from_der(c).ok())
        .map(|(_, c)| (oneline(c.subject()), oneline(c.issuer())))
        .collect();
    Some(CertDetails {
        filename: filename.to_string(),
        used,
        serial: hex_upper(serial_magnitude(leaf.raw_serial())),
        not_before: asn1_time(leaf.validity().not_before.timestamp()),
        not_after: asn1_time(leaf.validity().not_after.timestamp()),
        san: san(&leaf),
        algorithm: algorithm(&leaf),
        sha1: hex_upper(sha1.as_ref()),
        subject: oneline(leaf.subject()),
        issuer: oneline(leaf.issuer()),
        chain,
        empty: false,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn serial_drops_der_sign_byte() {
        assert_eq!(super::serial_magnitude(&[0x00, 0xC7, 0x01]), &[0xC7, 0x01]);
        assert_eq!(super::serial_magnitude(&[0x4F, 0xE9]), &[0x4F, 0xE9]);
        assert_eq!(super::serial_magnitude(&[0x00]), &[0x00]);
    }

    use super::*;

    #[test]
    fn dates_as_openssl_prints_them() {
        assert_eq!(asn1_time(0), "Jan  1 00:00:00 1970 GMT");
        // 2026-11-30 09:07:02 and 2026-12-05 09:07:35 UTC, as HAProxy showed them.
        assert_eq!(asn1_time(1_796_029_622), "Nov 30 09:07:02 2026 GMT");
        assert_eq!(asn1_time(1_796_461_655), "Dec  5 09:07:35 2026 GMT");
        assert_eq!(asn1_time(951_782_400), "Feb 29 00:00:00 2000 GMT");
    }
}
