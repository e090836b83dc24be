//! Certificate choice by SNI: exact name, then a `*.domain` wildcard covering one label, else the
//! first certificate loaded (HAProxy's default certificate). A crt-list's negative filter
//! (`!name`) makes that name skip the wildcards and fall to the default unless some certificate
//! names it exactly (HAProxy 2.6 behaves so). Among several certificates for one
//! name (RSA and ECDSA), the first whose key can sign with a scheme the client offers wins.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rustls::SignatureScheme;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

#[derive(Clone, Debug, Default)]
pub struct SniResolver {
    /// Every certificate in load order; the first is the default.
    all: Vec<Arc<CertifiedKey>>,
    exact: HashMap<String, Vec<usize>>,
    /// Keyed by the part after `*.`.
    wildcard: HashMap<String, Vec<usize>>,
    /// Names of `!name` filters.
    negative: HashSet<String>,
}

impl SniResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a certificate under `names`: `*.x` entries are wildcards, `!x` negative filters
    /// (`!*.x` means nothing, as in HAProxy).
    pub fn add(&mut self, key: Arc<CertifiedKey>, names: &[String]) {
        let idx = self.all.len();
        self.all.push(key);
        for n in names {
            if let Some(neg) = n.strip_prefix('!') {
                if !neg.starts_with('*') && !neg.is_empty() {
                    self.negative.insert(neg.to_ascii_lowercase());
                }
                continue;
            }
            let (map, k) = match n.strip_prefix("*.") {
                Some(rest) => (&mut self.wildcard, rest),
                None => (&mut self.exact, n.as_str()),
            };
            let v = map.entry(k.to_ascii_lowercase()).or_default();
            if !v.contains(&idx) {
                v.push(idx);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// The certificate for `sni` given the client's signature schemes (pure; used by `resolve`).
    pub fn pick(
        &self,
        sni: Option<&str>,
        schemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.pick_as(sni, schemes, false)
    }

    /// [`pick`](Self::pick) for `strict-sni`: no certificate (the handshake fails) when the
    /// client sent no SNI or no certificate names it, instead of the default one.
    pub fn pick_named(
        &self,
        sni: Option<&str>,
        schemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.pick_as(sni, schemes, true)
    }

    fn pick_as(
        &self,
        sni: Option<&str>,
        schemes: &[SignatureScheme],
        strict: bool,
    ) -> Option<Arc<CertifiedKey>> {
        let fits = |i: &usize| {
            self.all
                .get(*i)
                .filter(|k| schemes.is_empty() || k.key.choose_scheme(schemes).is_some())
        };
        let pick_in = |v: &Vec<usize>| {
            v.iter()
                .find_map(fits)
                .or_else(|| v.first().and_then(|i| self.all.get(*i)))
        };
        if let Some(name) = sni.map(|s| s.trim_end_matches('.').to_ascii_lowercase()) {
            if let Some(v) = self.exact.get(&name) {
                return pick_in(v).cloned();
            }
            if self.negative.contains(&name) {
                return self.all.first().filter(|_| !strict).cloned();
            }
            if let Some((_, parent)) = name.split_once('.')
                && let Some(v) = self.wildcard.get(parent)
            {
                return pick_in(v).cloned();
            }
        }
        self.all.first().filter(|_| !strict).cloned()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pick(client_hello.server_name(), client_hello.signature_schemes())
    }
}
