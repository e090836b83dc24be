//! TLS termination setup: a `bind … ssl crt …` line turned into a `rustls::ServerConfig`.
//!
//! Crypto provider: rustls' `ring` (aws-lc-rs needs cmake and a C toolchain setup this project's
//! machines don't carry). Reads certificate files; opens no sockets.

pub mod ciphers;
pub mod client;
pub mod pem;
pub mod sni;
pub mod stream;

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::ServerSessionMemoryCache;

use crate::config::model::BindSsl;

pub use sni::SniResolver;

/// HAProxy's `tune.ssl.cachesize` default (entries).
pub const SESSION_CACHE_SIZE: usize = 20000;

/// Why a bind's TLS setup failed. HAProxy reports certificate problems while parsing the bind
/// line (`'bind X' in section 'frontend' : <msg>`) and settings problems after it
/// (`Proxy 'f': <msg> for bind 'X' at [file:line].`); the variant says which wrapping applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsError {
    Cert(String),
    Setting(String),
}

impl TlsError {
    pub fn message(&self) -> &str {
        match self {
            TlsError::Cert(m) | TlsError::Setting(m) => m,
        }
    }
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// Loads every `crt` of the bind (files and directories, in order) into an SNI resolver.
pub fn load_certs(ssl: &BindSsl, provider: &CryptoProvider) -> Result<SniResolver, TlsError> {
    let mut res = SniResolver::new();
    for crt in &ssl.crts {
        for b in pem::load_crt(crt, provider).map_err(TlsError::Cert)? {
            let names = b
                .key
                .end_entity_cert()
                .map(|c| pem::cert_names(c))
                .unwrap_or_default();
            res.add(b.key, &names);
        }
    }
    Ok(res)
}

/// The provider restricted to the bind's ciphers, ciphersuites and curves.
pub fn provider_for(ssl: &BindSsl) -> Result<CryptoProvider, TlsError> {
    let mut p = rustls::crypto::ring::default_provider();
    let all = p.cipher_suites.clone();
    let tls13: Vec<_> = match &ssl.ciphersuites {
        Some(s) => ciphers::tls13_suites(s, &all).map_err(TlsError::Setting)?,
        None => all
            .iter()
            .copied()
            .filter(|s| matches!(s, rustls::SupportedCipherSuite::Tls13(_)))
            .collect(),
    };
    let tls12: Vec<_> = match &ssl.ciphers {
        Some(s) => ciphers::tls12_suites(s, &all).map_err(TlsError::Setting)?,
        None => all
            .iter()
            .copied()
            .filter(|s| matches!(s, rustls::SupportedCipherSuite::Tls12(_)))
            .collect(),
    };
    p.cipher_suites = tls13.into_iter().chain(tls12).collect();
    if let Some(c) = &ssl.curves {
        p.kx_groups = ciphers::kx_groups(c, &p.kx_groups).map_err(TlsError::Setting)?;
    }
    Ok(p)
}

/// Builds the server config for one `bind … ssl` line.
pub fn server_config(ssl: &BindSsl) -> Result<ServerConfig, TlsError> {
    let provider = provider_for(ssl)?;
    let resolver = load_certs(ssl, &provider)?;
    if resolver.is_empty() {
        return Err(TlsError::Setting(
            "no SSL certificate specified".to_string(),
        ));
    }
    let versions =
        ciphers::versions(ssl.options.min_ver, ssl.options.max_ver).map_err(TlsError::Setting)?;
    let mut cfg = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Setting(format!("unable to set SSL/TLS versions: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    // HAProxy sets SSL_OP_CIPHER_SERVER_PREFERENCE unless `prefer-client-ciphers`.
    cfg.ignore_client_order = true;
    cfg.alpn_protocols = ssl.alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    cfg.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
    if !ssl.options.no_tls_tickets {
        cfg.ticketer = rustls::crypto::ring::Ticketer::new()
            .map_err(|e| TlsError::Setting(format!("unable to set up TLS tickets: {e}")))?;
    }
    Ok(cfg)
}

/// Validates a bind's TLS settings and certificates for `-c`: the error text is HAProxy's
/// (see [`TlsError`] for the prefix each kind takes).
pub fn check_bind(ssl: &BindSsl) -> Result<(), String> {
    server_config(ssl)
        .map(|_| ())
        .map_err(|e| e.message().to_string())
}

#[cfg(test)]
mod tests;
