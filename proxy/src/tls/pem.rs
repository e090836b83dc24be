//! `crt <file|dir>`: PEM bundles as HAProxy reads them (certificate, chain and key in one file,
//! the key optionally in `<file>.key`), with HAProxy's error texts.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// One loaded bundle: the leaf first, then the chain in file order.
#[derive(Debug)]
pub struct Bundle {
    pub path: String,
    pub key: Arc<CertifiedKey>,
}

pub(crate) fn errno_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
        None => e.to_string(),
    }
}

/// Files HAProxy skips in a `crt <dir>`: hidden ones and the extra files it loads beside a
/// bundle (`.key`, `.ocsp`, `.issuer`, `.sctl`).
pub fn skipped_in_dir(name: &str) -> bool {
    name.starts_with('.')
        || [".key", ".ocsp", ".issuer", ".sctl"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

/// The files of `crt <path>`: the file itself, or every bundle of a directory in name order.
pub fn crt_files(path: &str) -> Result<Vec<String>, String> {
    let meta = std::fs::metadata(path).map_err(|e| {
        format!(
            "unable to stat SSL certificate from file '{path}' : {}.",
            errno_text(&e)
        )
    })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_string()]);
    }
    let rd = std::fs::read_dir(path)
        .map_err(|e| format!("unable to scan directory '{path}' : {}.", errno_text(&e)))?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| !t.is_dir()).unwrap_or(false))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !skipped_in_dir(n))
        .collect();
    names.sort();
    let base = path.trim_end_matches('/');
    Ok(names.iter().map(|n| format!("{base}/{n}")).collect())
}

/// Loads `crt <path>`: one bundle, or every bundle of a directory in name order.
pub fn load_crt(path: &str, provider: &CryptoProvider) -> Result<Vec<Bundle>, String> {
    crt_files(path)?
        .iter()
        .map(|p| load_bundle(p, provider))
        .collect()
}

/// Loads one PEM bundle file.
pub fn load_bundle(path: &str, provider: &CryptoProvider) -> Result<Bundle, String> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "unable to stat SSL certificate from file '{path}' : {}.",
            errno_text(&e)
        )
    })?;
    let no_cert = || format!("unable to load certificate from file '{path}'.");
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|_| no_cert())?;
    if certs.is_empty() {
        return Err(no_cert());
    }
    // As HAProxy 2.6: a key missing from the bundle, or one that does not load, is looked for in
    // `<path>.key`, and only that file is named when both fail.
    let load_key = |pem: &[u8]| {
        PrivateKeyDer::from_pem_slice(pem)
            .ok()
            .and_then(|k| provider.key_provider.load_private_key(k).ok())
    };
    let key_path = format!("{path}.key");
    let signer = load_key(&bytes)
        .or_else(|| std::fs::read(&key_path).ok().and_then(|b| load_key(&b)))
        .ok_or_else(|| format!("No Private Key found in '{key_path}'."))?;
    let ck = CertifiedKey::new(certs, signer);
    match ck.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(_) => {
            return Err(format!(
                "inconsistencies between private key and certificate loaded '{path}'."
            ));
        }
    }
    Ok(Bundle {
        path: path.to_string(),
        key: Arc::new(ck),
    })
}

/// DNS names a certificate answers SNI for: its SAN DNS entries and its CNs (HAProxy 2.6 indexes
/// the CN even when SANs are present; checked with `openssl s_client -servername`).
pub fn cert_names(der: &[u8]) -> Vec<String> {
    use x509_parser::prelude::*;
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for gn in &san.value.general_names {
            if let GeneralName::DNSName(n) = gn {
                out.push(n.to_ascii_lowercase());
            }
        }
    }
    for cn in cert.subject().iter_common_name() {
        if let Ok(cn) = cn.as_str() {
            let cn = cn.to_ascii_lowercase();
            if !out.contains(&cn) {
                out.push(cn);
            }
        }
    }
    out
}
