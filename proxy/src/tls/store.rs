//! The certificate store behind every `bind … ssl`: each certificate file is loaded once (keyed
//! by its path as written, as HAProxy's ckch store), each bind reads its SNI table through an
//! `ArcSwap`, and the runtime API's transaction (`set ssl cert` / `commit` / `abort`; one at a
//! time, as HAProxy 2.6) replaces a file for NEW handshakes on every bind that uses it, without
//! a reload. Handshakes in progress and established connections keep the key they picked.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use portcullis_runtime_api::ssl::{
    AbortCertError, CertDetails, CertList, CommitCertError, SetCertError, SetCertOk,
};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::{CertifiedKey, SigningKey};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::certinfo;
use super::pem::cert_names;
use super::sni::SniResolver;

/// One use of a certificate file by a bind (HAProxy's ckch instance).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertUse {
    pub path: String,
    /// crt-list SNI filters; empty: the certificate's own names.
    pub filters: Vec<String>,
}

/// A bind's certificates: what it uses, and the SNI table built from the store's current files.
#[derive(Debug)]
pub struct BindCerts {
    uses: Vec<CertUse>,
    current: ArcSwap<SniResolver>,
}

impl BindCerts {
    pub fn uses(&self) -> &[CertUse] {
        &self.uses
    }

    /// The SNI table in force now.
    pub fn resolver(&self) -> Arc<SniResolver> {
        self.current.load_full()
    }
}

/// A bind with `strict-sni`: only certificates the client's SNI names.
#[derive(Debug)]
pub struct StrictSni(pub Arc<BindCerts>);

impl ResolvesServerCert for StrictSni {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0
            .current
            .load()
            .pick_named(client_hello.server_name(), client_hello.signature_schemes())
    }
}

impl ResolvesServerCert for BindCerts {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .load()
            .pick(client_hello.server_name(), client_hello.signature_schemes())
    }
}

fn build(uses: &[CertUse], files: &BTreeMap<String, Arc<CertifiedKey>>) -> SniResolver {
    let mut res = SniResolver::new();
    for u in uses {
        let Some(key) = files.get(&u.path) else {
            continue;
        };
        let names = if u.filters.is_empty() {
            key.end_entity_cert()
                .map(|c| cert_names(c))
                .unwrap_or_default()
        } else {
            u.filters.clone()
        };
        res.add(Arc::clone(key), &names);
    }
    res
}

/// A `set ssl cert` payload waiting for `commit`.
struct Txn {
    path: String,
    certs: Vec<CertificateDer<'static>>,
    signer: Option<Arc<dyn SigningKey>>,
}

#[derive(Default)]
struct Inner {
    files: BTreeMap<String, Arc<CertifiedKey>>,
    binds: Vec<Arc<BindCerts>>,
    txn: Option<Txn>,
}

/// Every certificate file of the process and the binds using them.
#[derive(Default)]
pub struct CertStore {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for CertStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertStore").finish_non_exhaustive()
    }
}

impl CertStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The file already loaded under `path`, if any (a file is loaded once for all its uses).
    pub fn get(&self, path: &str) -> Option<Arc<CertifiedKey>> {
        self.lock().files.get(path).cloned()
    }

    /// Records a file loaded at start (the first load of a path wins).
    pub fn insert(&self, path: &str, key: Arc<CertifiedKey>) {
        self.lock().files.entry(path.to_string()).or_insert(key);
    }

    /// Registers a bind's uses (every path already inserted) and returns its resolver.
    pub fn register(&self, uses: Vec<CertUse>) -> Arc<BindCerts> {
        let mut g = self.lock();
        let res = build(&uses, &g.files);
        let b = Arc::new(BindCerts {
            uses,
            current: ArcSwap::from_pointee(res),
        });
        g.binds.push(Arc::clone(&b));
        b
    }

    /// `show ssl cert`: the transaction's file and every file, in HAProxy's (byte) order.
    pub fn list(&self) -> CertList {
        let g = self.lock();
        CertList {
            transaction: g.txn.as_ref().map(|t| t.path.clone()),
            files: g.files.keys().cloned().collect(),
        }
    }

    /// `show ssl cert <file>` / `show ssl cert *<file>` (the transaction's copy).
    pub fn details(&self, name: &str) -> Option<CertDetails> {
        let g = self.lock();
        if let Some(path) = name.strip_prefix('*') {
            let t = g.txn.as_ref().filter(|t| t.path == path)?;
            return certinfo::details(name, false, &t.certs);
        }
        let key = g.files.get(name)?;
        certinfo::details(name, true, &key.cert)
    }

    /// `set ssl cert <file> <<payload`: parses the payload into the (one) transaction.
    pub fn set(&self, path: &str, payload: &str) -> Result<SetCertOk, SetCertError> {
        let mut g = self.lock();
        if let Some(t) = &g.txn
            && t.path != path
        {
            // HAProxy 2.6.12 silently applies the payload to the open transaction's file; we
            // refuse instead (its message for this case, never reached in 2.6).
            return Err(SetCertError::OtherTransaction(t.path.clone()));
        }
        if !g.files.contains_key(path) {
            return Err(SetCertError::NotReferenced);
        }
        let bytes = payload.as_bytes();
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(bytes)
            .collect::<Result<_, _>>()
            .unwrap_or_default();
        if certs.is_empty() {
            return Err(SetCertError::Load(format!(
                "unable to load certificate from file '{path}'."
            )));
        }
        let provider = super::default_provider();
        let signer = PrivateKeyDer::from_pem_slice(bytes)
            .ok()
            .and_then(|k| provider.key_provider.load_private_key(k).ok());
        let created = g.txn.is_none();
        g.txn = Some(Txn {
            path: path.to_string(),
            certs,
            signer,
        });
        Ok(if created {
            SetCertOk::Created(path.to_string())
        } else {
            SetCertOk::Updated(path.to_string())
        })
    }

    /// `commit ssl cert <file>`: swaps the file on every bind using it; returns how many uses
    /// were rebuilt (HAProxy prints one dot each).
    pub fn commit(&self, path: &str) -> Result<usize, CommitCertError> {
        let mut g = self.lock();
        let Some(t) = &g.txn else {
            return Err(CommitCertError::NoTransaction);
        };
        if t.path != path {
            return Err(CommitCertError::OtherTransaction(t.path.clone()));
        }
        let Some(signer) = t.signer.clone() else {
            return Err(CommitCertError::Incomplete);
        };
        let ck = CertifiedKey::new(t.certs.clone(), signer);
        match ck.keys_match() {
            Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
            Err(_) => {
                return Err(CommitCertError::Load(format!(
                    "inconsistencies between private key and certificate loaded '{path}'."
                )));
            }
        }
        g.txn = None;
        g.files.insert(path.to_string(), Arc::new(ck));
        let mut n = 0;
        for b in &g.binds {
            let uses = b.uses.iter().filter(|u| u.path == path).count();
            if uses > 0 {
                b.current.store(Arc::new(build(&b.uses, &g.files)));
                n += uses;
            }
        }
        Ok(n)
    }

    /// `abort ssl cert <file>`.
    pub fn abort(&self, path: &str) -> Result<(), AbortCertError> {
        let mut g = self.lock();
        match &g.txn {
            None => Err(AbortCertError::NoTransaction),
            Some(t) if t.path != path => Err(AbortCertError::OtherTransaction(t.path.clone())),
            Some(_) => {
                g.txn = None;
                Ok(())
            }
        }
    }
}
