//! `show|set|commit|abort ssl cert`: the values the proxy hands over and HAProxy 2.6's reply
//! texts (captured from HAProxy 2.6.12, see `testdata/haproxy-2.6/ssl-cert-replies.txt`).

use std::fmt::Write as _;

/// `show ssl cert`: the file of the open transaction and every loaded file, in byte order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertList {
    pub transaction: Option<String>,
    pub files: Vec<String>,
}

/// One certificate file as `show ssl cert <file>` prints it. The proxy renders the X.509 values
/// (see the field docs for HAProxy's formats); this crate lays them out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertDetails {
    /// As asked: `*<file>` for the transaction's copy.
    pub filename: String,
    /// `Used` (referenced by a bind) or `Unused` (a transaction's copy).
    pub used: bool,
    /// Upper-case hex of the serial's DER content bytes.
    pub serial: String,
    /// `Nov  3 09:07:02 2026 GMT` (OpenSSL's `ASN1_TIME_print`).
    pub not_before: String,
    pub not_after: String,
    /// `DNS:<name>` for each DNS entry, other kinds empty, joined with `, `.
    pub san: String,
    /// `RSA2048`, `EC256`…; `None` where HAProxy 2.6 cannot name the key (Ed25519): it then
    /// stops the block after `Algorithm: ` and jumps to the OCSP line.
    pub algorithm: Option<String>,
    /// Upper-case hex SHA-1 of the leaf's DER.
    pub sha1: String,
    /// `/C=FR/O=Acme/CN=x` (OpenSSL's one-line form).
    pub subject: String,
    pub issuer: String,
    /// (subject, issuer) of each chain certificate, in file order.
    pub chain: Vec<(String, String)>,
    /// Created by `new ssl cert` and not committed yet: `Status: Empty` and nothing else.
    pub empty: bool,
}

/// What `set ssl cert` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetCertOk {
    /// A transaction was opened for this file.
    Created(String),
    /// The open transaction for this file got the new payload.
    Updated(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetCertError {
    /// No bind uses this file.
    NotReferenced,
    /// Another file's transaction is open (its name).
    OtherTransaction(String),
    /// The payload does not load; HAProxy's loader message (ends with `.`).
    Load(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitCertError {
    NoTransaction,
    OtherTransaction(String),
    /// The transaction lacks a certificate or a key.
    Incomplete,
    /// Certificate and key do not match, or another loader message.
    Load(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortCertError {
    NoTransaction,
    OtherTransaction(String),
}

pub fn format_list(l: &CertList, out: &mut String) {
    if let Some(t) = &l.transaction {
        let _ = writeln!(out, "# transaction\n*{t}");
    }
    out.push_str("# filename\n");
    for f in &l.files {
        out.push_str(f);
        out.push('\n');
    }
}

pub fn format_details(d: &CertDetails, out: &mut String) {
    let _ = writeln!(out, "Filename: {}", d.filename);
    if d.empty {
        out.push_str("Status: Empty\nOCSP Response Key: \n");
        return;
    }
    let _ = writeln!(out, "Status: {}", if d.used { "Used" } else { "Unused" });
    let _ = writeln!(out, "Serial: {}", d.serial);
    let _ = writeln!(out, "notBefore: {}", d.not_before);
    let _ = writeln!(out, "notAfter: {}", d.not_after);
    let _ = writeln!(out, "Subject Alternative Name: {}", d.san);
    out.push_str("Algorithm: ");
    if let Some(a) = &d.algorithm {
        let _ = writeln!(out, "{a}");
        let _ = writeln!(out, "SHA1 FingerPrint: {}", d.sha1);
        let _ = writeln!(out, "Subject: {}", d.subject);
        let _ = writeln!(out, "Issuer: {}", d.issuer);
        for (s, i) in &d.chain {
            let _ = writeln!(out, "Chain Subject: {s}");
            let _ = writeln!(out, "Chain Issuer: {i}");
        }
    }
    out.push_str("OCSP Response Key: \n");
}

/// `new ssl cert <file>`'s answer.
pub fn new_reply(file: &str, r: &Result<(), String>, out: &mut crate::reply::Reply) {
    match r {
        Ok(()) => {
            let _ = writeln!(out.text, "New empty certificate store '{file}'!");
        }
        Err(e) => out.err(e),
    }
}

pub const SHOW_NOT_FOUND: &str =
    "Can't display the certificate: Not found or the certificate is a bundle!\n";

pub fn set_reply(file: &str, r: &Result<SetCertOk, SetCertError>, out: &mut String) {
    match r {
        Ok(SetCertOk::Created(f)) => {
            let _ = writeln!(out, "Transaction created for certificate {f}!");
        }
        Ok(SetCertOk::Updated(f)) => {
            let _ = writeln!(out, "Transaction updated for certificate {f}!");
        }
        Err(SetCertError::NotReferenced) => {
            let _ = writeln!(
                out,
                "Can't replace a certificate which is not referenced by the configuration!\nCan't update {file}!"
            );
        }
        Err(SetCertError::OtherTransaction(t)) => {
            let _ = writeln!(
                out,
                "The ongoing transaction is about '{t}' but you are trying to set '{file}'\nCan't update {file}!"
            );
        }
        Err(SetCertError::Load(m)) => {
            let _ = writeln!(out, "{m}\nCan't load the payload\nCan't update {file}!");
        }
    }
}

/// `instances`: the uses rebuilt (one dot each, as HAProxy prints while it works).
pub fn commit_reply(file: &str, r: &Result<usize, CommitCertError>, out: &mut String) {
    match r {
        Ok(n) => {
            let _ = writeln!(out, "Committing {file}{}\nSuccess!", ".".repeat(*n));
        }
        Err(e) => {
            match e {
                CommitCertError::NoTransaction => out.push_str("No ongoing transaction! !\n"),
                CommitCertError::OtherTransaction(t) => {
                    let _ = writeln!(
                        out,
                        "The ongoing transaction is about '{t}' but you are trying to set '{file}'"
                    );
                }
                CommitCertError::Incomplete => out.push_str(
                    "The transaction must contain at least a certificate and a private key!\n",
                ),
                CommitCertError::Load(m) => {
                    out.push_str(m);
                    out.push('\n');
                }
            }
            let _ = writeln!(out, "Can't commit {file}!");
        }
    }
}

pub fn abort_reply(file: &str, r: &Result<(), AbortCertError>, out: &mut String) {
    match r {
        Ok(()) => {
            let _ = writeln!(out, "Transaction aborted for certificate '{file}'!");
        }
        Err(AbortCertError::NoTransaction) => out.push_str("No ongoing transaction!\n"),
        Err(AbortCertError::OtherTransaction(t)) => {
            let _ = writeln!(
                out,
                "The ongoing transaction is about '{t}' but you are trying to abort a transaction for '{file}'"
            );
        }
    }
}

/// A received line that opens a payload (`… <<`): the command part, without the marker.
/// HAProxy 2.6 reads the payload up to the first empty line.
pub fn payload_command(line: &str) -> Option<&str> {
    line.strip_suffix("<<")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s<F: FnOnce(&mut String)>(f: F) -> String {
        let mut o = String::new();
        f(&mut o);
        o
    }

    #[test]
    fn list_with_and_without_transaction() {
        let mut l = CertList {
            transaction: None,
            files: vec!["a.pem".into(), "b.pem".into()],
        };
        assert_eq!(s(|o| format_list(&l, o)), "# filename\na.pem\nb.pem\n");
        l.transaction = Some("a.pem".into());
        assert_eq!(
            s(|o| format_list(&l, o)),
            "# transaction\n*a.pem\n# filename\na.pem\nb.pem\n"
        );
    }

    #[test]
    fn details_block_as_haproxy() {
        let mut d = CertDetails {
            filename: "*a.pem".into(),
            used: false,
            serial: "4FE9".into(),
            not_before: "Nov 30 09:07:28 2026 GMT".into(),
            not_after: "Dec  5 09:07:28 2026 GMT".into(),
            san: "DNS:r.example.com, ".into(),
            algorithm: Some("RSA2048".into()),
            sha1: "A341".into(),
            subject: "/C=FR/O=Acme/CN=r.example.com".into(),
            issuer: "/C=FR/O=Test CA/CN=Test Root".into(),
            chain: vec![(
                "/C=FR/O=Test CA/CN=Test Root".into(),
                "/C=FR/O=Test CA/CN=Test Root".into(),
            )],
            empty: false,
        };
        let e = CertDetails {
            filename: "/tmp/b.pem".into(),
            empty: true,
            ..Default::default()
        };
        assert_eq!(
            s(|o| format_details(&e, o)),
            "Filename: /tmp/b.pem\nStatus: Empty\nOCSP Response Key: \n"
        );
        assert_eq!(
            s(|o| format_details(&d, o)),
            "Filename: *a.pem\nStatus: Unused\nSerial: 4FE9\nnotBefore: Nov 30 09:07:28 2026 GMT\nnotAfter: Dec  5 09:07:28 2026 GMT\nSubject Alternative Name: DNS:r.example.com, \nAlgorithm: RSA2048\nSHA1 FingerPrint: A341\nSubject: /C=FR/O=Acme/CN=r.example.com\nIssuer: /C=FR/O=Test CA/CN=Test Root\nChain Subject: /C=FR/O=Test CA/CN=Test Root\nChain Issuer: /C=FR/O=Test CA/CN=Test Root\nOCSP Response Key: \n"
        );
        d.algorithm = None;
        assert!(s(|o| format_details(&d, o)).ends_with(
            "Subject Alternative Name: DNS:r.example.com, \nAlgorithm: OCSP Response Key: \n"
        ));
    }

    #[test]
    fn transaction_replies() {
        assert_eq!(
            s(|o| set_reply("a.pem", &Ok(SetCertOk::Created("a.pem".into())), o)),
            "Transaction created for certificate a.pem!\n"
        );
        assert_eq!(
            s(|o| set_reply("a.pem", &Ok(SetCertOk::Updated("a.pem".into())), o)),
            "Transaction updated for certificate a.pem!\n"
        );
        assert_eq!(
            s(|o| set_reply("nope.pem", &Err(SetCertError::NotReferenced), o)),
            "Can't replace a certificate which is not referenced by the configuration!\nCan't update nope.pem!\n"
        );
        assert_eq!(
            s(|o| set_reply(
                "a.pem",
                &Err(SetCertError::Load(
                    "unable to load certificate from file 'a.pem'.".into()
                )),
                o
            )),
            "unable to load certificate from file 'a.pem'.\nCan't load the payload\nCan't update a.pem!\n"
        );
        assert_eq!(
            s(|o| commit_reply("a.pem", &Ok(3), o)),
            "Committing a.pem...\nSuccess!\n"
        );
        assert_eq!(
            s(|o| commit_reply("a.pem", &Err(CommitCertError::NoTransaction), o)),
            "No ongoing transaction! !\nCan't commit a.pem!\n"
        );
        assert_eq!(
            s(|o| commit_reply(
                "b.pem",
                &Err(CommitCertError::OtherTransaction("a.pem".into())),
                o
            )),
            "The ongoing transaction is about 'a.pem' but you are trying to set 'b.pem'\nCan't commit b.pem!\n"
        );
        assert_eq!(
            s(|o| commit_reply("a.pem", &Err(CommitCertError::Incomplete), o)),
            "The transaction must contain at least a certificate and a private key!\nCan't commit a.pem!\n"
        );
        assert_eq!(
            s(|o| abort_reply("a.pem", &Ok(()), o)),
            "Transaction aborted for certificate 'a.pem'!\n"
        );
        assert_eq!(
            s(|o| abort_reply("a.pem", &Err(AbortCertError::NoTransaction), o)),
            "No ongoing transaction!\n"
        );
        assert_eq!(
            s(|o| abort_reply(
                "b.pem",
                &Err(AbortCertError::OtherTransaction("a.pem".into())),
                o
            )),
            "The ongoing transaction is about 'a.pem' but you are trying to abort a transaction for 'b.pem'\n"
        );
    }

    #[test]
    fn payload_marker() {
        assert_eq!(
            payload_command("set ssl cert a.pem <<"),
            Some("set ssl cert a.pem ")
        );
        assert_eq!(payload_command("set ssl cert a.pem"), None);
    }
}
