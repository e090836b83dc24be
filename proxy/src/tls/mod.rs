//! TLS termination setup: a `bind … ssl crt …` line turned into a `rustls::ServerConfig`.
//!
//! Crypto provider: rustls' `aws-lc-rs` (built by its cc builder: no cmake, no nasm on Linux);
//! its X25519 and P-256 code makes a full handshake ~15% cheaper than `ring`'s. Reads certificate
//! files; opens no sockets.

pub mod cafile;
pub mod certinfo;
pub mod ciphers;
pub mod client;
pub mod crtlist;
pub mod info;
pub mod pem;
pub mod sni;
pub mod store;
pub mod stream;

use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;
use rustls::server::ServerSessionMemoryCache;
use rustls::{CipherSuiteCommon, ServerConfig, SupportedCipherSuite, Tls13CipherSuite};

use crate::config::model::{BindSsl, CrtSource};

pub use sni::SniResolver;
pub use store::{BindCerts, CertStore, CertUse};

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

/// The settings error a bind with no certificate at all gets (e.g. a crt-list of comments).
pub const NO_CERT: &str = "no SSL certificate specified";

impl TlsError {
    /// HAProxy's start-up alert for a settings error: `Proxy 'p': <msg> for bind '<addr>' at
    /// [<file:line>].` (the missing-certificate one ends with ` (use 'crt').`).
    pub fn bind_alert(&self, proxy: &str, addr: &str, loc: &str) -> String {
        let hint = if self.message() == NO_CERT {
            " (use 'crt')"
        } else {
            ""
        };
        format!(
            "Proxy '{proxy}': {} for bind '{addr}' at [{loc}]{hint}.",
            self.message()
        )
    }

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

/// The bind's certificate sources in line order (`crt` and `crt-list` arguments).
fn sources(ssl: &BindSsl) -> Vec<CrtSource> {
    if !ssl.sources.is_empty() {
        return ssl.sources.clone();
    }
    let mut v: Vec<CrtSource> = ssl.crts.iter().cloned().map(CrtSource::Crt).collect();
    v.extend(ssl.crt_list.iter().cloned().map(CrtSource::List));
    v
}

fn read_crt_list(path: &str) -> Result<crtlist::CrtList, TlsError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        TlsError::Cert(format!(
            "'crt-list' : cannot open file '{path}' : {}",
            pem::errno_text(&e)
        ))
    })?;
    crtlist::parse(path, &text).map_err(|m| TlsError::Cert(format!("'crt-list' : {m}")))
}

/// HAProxy's warnings about the bind's crt-lists (`-c` prints them), located in the list.
pub fn bind_warnings(ssl: &BindSsl) -> Vec<String> {
    sources(ssl)
        .iter()
        .filter_map(|s| match s {
            CrtSource::List(p) => read_crt_list(p).ok(),
            CrtSource::Crt(_) => None,
        })
        .flat_map(|l| l.warnings)
        .map(|w| format!("'crt-list' : {w}"))
        .collect()
}

/// Loads every certificate of the bind (`crt` files and directories, `crt-list` lines, in line
/// order) into `store`, each file once, and registers the bind's uses.
pub fn load_into(
    ssl: &BindSsl,
    provider: &CryptoProvider,
    store: &CertStore,
) -> Result<Arc<BindCerts>, TlsError> {
    let mut uses = Vec::new();
    let mut load =
        |path: &str, filters: Vec<String>, list: Option<(String, usize)>| -> Result<(), TlsError> {
            if store.get(path).is_none() {
                let in_list = list.is_some();
                let b = pem::load_bundle(path, provider).map_err(|m| {
                    TlsError::Cert(if in_list {
                        format!("'crt-list' : {m}")
                    } else {
                        m
                    })
                })?;
                store.insert(path, b.key);
            }
            uses.push(CertUse {
                path: path.to_string(),
                filters,
                list,
            });
            Ok(())
        };
    for src in sources(ssl) {
        match src {
            CrtSource::Crt(crt) => {
                for p in pem::crt_files(&crt).map_err(TlsError::Cert)? {
                    load(&p, Vec::new(), None)?;
                }
            }
            CrtSource::List(list) => {
                let lines = read_crt_list(&list)?.lines;
                for l in &lines {
                    crtlist::check_opts(&list, l, ssl)
                        .map_err(|m| TlsError::Cert(format!("'crt-list' : {m}")))?;
                    load(&l.crt, l.filters.clone(), Some((list.clone(), l.line)))?;
                }
                store.add_list(&list, &lines);
            }
        }
    }
    Ok(store.register(uses))
}

/// Loads the bind's certificates into an SNI resolver of its own (no shared store).
pub fn load_certs(ssl: &BindSsl, provider: &CryptoProvider) -> Result<SniResolver, TlsError> {
    let store = CertStore::new();
    let b = load_into(ssl, provider, &store)?;
    Ok((*b.resolver()).clone())
}

/// The crypto provider every TLS endpoint (binds, servers, `set ssl cert`) starts from.
/// aws-lc-rs also lists the post-quantum hybrid X25519MLKEM768; HAProxy 2.6 on OpenSSL 3.0 has
/// no such group, so the defaults keep the classical ones (X25519, P-256, P-384).
pub fn default_provider() -> CryptoProvider {
    let mut p = rustls::crypto::aws_lc_rs::default_provider();
    p.cipher_suites = suites().to_vec();
    p.kx_groups.retain(|g| {
        matches!(
            g.name(),
            rustls::NamedGroup::X25519
                | rustls::NamedGroup::secp256r1
                | rustls::NamedGroup::secp384r1
        )
    });
    p
}

/// aws-lc-rs' suites, the TLS 1.3 ones with ring's HKDF: ring keys each HMAC once and copies
/// the padded state per use, where aws-lc-rs' HKDF re-keys HMAC on every expansion (two more
/// SHA-384 blocks each, a tenth of a full handshake's CPU on CPUs without SHA-512 instructions).
fn suites() -> &'static [SupportedCipherSuite] {
    static SUITES: OnceLock<Vec<SupportedCipherSuite>> = OnceLock::new();
    SUITES.get_or_init(|| {
        let ring = rustls::crypto::ring::default_provider().cipher_suites;
        let ring_hkdf = |suite: rustls::CipherSuite| {
            ring.iter().find_map(|r| match r {
                SupportedCipherSuite::Tls13(r) if r.common.suite == suite => Some(r.hkdf_provider),
                _ => None,
            })
        };
        rustls::crypto::aws_lc_rs::default_provider()
            .cipher_suites
            .into_iter()
            .map(|s| match s {
                SupportedCipherSuite::Tls13(t) => match ring_hkdf(t.common.suite) {
                    // Leaked once per process (OnceLock): rustls wants `&'static` suites.
                    Some(hkdf_provider) => {
                        SupportedCipherSuite::Tls13(Box::leak(Box::new(Tls13CipherSuite {
                            common: CipherSuiteCommon {
                                suite: t.common.suite,
                                hash_provider: t.common.hash_provider,
                                confidentiality_limit: t.common.confidentiality_limit,
                            },
                            hkdf_provider,
                            aead_alg: t.aead_alg,
                            quic: t.quic,
                        })))
                    }
                    None => s,
                },
                SupportedCipherSuite::Tls12(_) => s,
            })
            .collect()
    })
}

/// The provider restricted to the bind's ciphers, ciphersuites and curves.
pub fn provider_for(ssl: &BindSsl) -> Result<CryptoProvider, TlsError> {
    let mut p = default_provider();
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

/// Builds the server config for one `bind … ssl` line, with certificates of its own.
pub fn server_config(ssl: &BindSsl) -> Result<ServerConfig, TlsError> {
    server_config_in(ssl, &CertStore::new())
}

/// Builds the server config for one `bind … ssl` line; its certificates live in `store`, where
/// the runtime API can replace them.
pub fn server_config_in(ssl: &BindSsl, store: &CertStore) -> Result<ServerConfig, TlsError> {
    let provider = provider_for(ssl)?;
    let resolver = load_into(ssl, &provider, store)?;
    if resolver.resolver().is_empty() {
        return Err(TlsError::Setting(NO_CERT.to_string()));
    }
    let versions =
        ciphers::versions(ssl.options.min_ver, ssl.options.max_ver).map_err(TlsError::Setting)?;
    let mut cfg = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Setting(format!("unable to set SSL/TLS versions: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(if ssl.strict_sni {
            Arc::new(store::StrictSni(resolver))
        } else {
            resolver
        });
    // HAProxy sets SSL_OP_CIPHER_SERVER_PREFERENCE unless `prefer-client-ciphers`.
    cfg.ignore_client_order = !ssl.options.prefer_client_ciphers;
    cfg.alpn_protocols = ssl.alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    cfg.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
    if !ssl.options.no_tls_tickets {
        cfg.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()
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
