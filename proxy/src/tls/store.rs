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
    /// The crt-list line it comes from (list path, line number), for `add|del ssl crt-list`.
    pub list: Option<(String, usize)>,
}

/// A bind's certificates: what it uses, and the SNI table built from the store's current files.
#[derive(Debug)]
pub struct BindCerts {
    uses: Mutex<Vec<CertUse>>,
    current: ArcSwap<SniResolver>,
}

impl BindCerts {
    pub fn uses(&self) -> Vec<CertUse> {
        self.uses.lock().unwrap_or_else(|p| p.into_inner()).clone()
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

/// One line of a crt-list, as `show ssl crt-list` prints it.
#[derive(Clone, Debug)]
struct ListLine {
    crt: String,
    line: usize,
    opts: Vec<(String, Option<String>)>,
    filters: Vec<String>,
}

#[derive(Default)]
struct Inner {
    files: BTreeMap<String, Arc<CertifiedKey>>,
    /// Files created by `new ssl cert`, empty until a commit fills them.
    empty: std::collections::BTreeSet<String>,
    binds: Vec<Arc<BindCerts>>,
    txn: Option<Txn>,
    /// Every crt-list of the configuration, by path, with its lines in order.
    lists: BTreeMap<String, Vec<ListLine>>,
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
            uses: Mutex::new(uses),
            current: ArcSwap::from_pointee(res),
        });
        g.binds.push(Arc::clone(&b));
        b
    }

    /// `show ssl cert`: the transaction's file and every file, in HAProxy's (byte) order.
    pub fn list(&self) -> CertList {
        let g = self.lock();
        let mut files: Vec<String> = g.files.keys().chain(&g.empty).cloned().collect();
        files.sort();
        CertList {
            transaction: g.txn.as_ref().map(|t| t.path.clone()),
            files,
        }
    }

    /// `show ssl cert <file>` / `show ssl cert *<file>` (the transaction's copy).
    pub fn details(&self, name: &str) -> Option<CertDetails> {
        let g = self.lock();
        if let Some(path) = name.strip_prefix('*') {
            let t = g.txn.as_ref().filter(|t| t.path == path)?;
            return certinfo::details(name, false, &t.certs);
        }
        if g.empty.contains(name) {
            return Some(CertDetails {
                filename: name.to_string(),
                empty: true,
                ..Default::default()
            });
        }
        let key = g.files.get(name)?;
        certinfo::details(name, true, &key.cert)
    }

    /// `new ssl cert <file>`: an empty entry, for `set ssl cert` + `commit ssl cert` to fill
    /// and `add ssl crt-list` to use.
    pub fn new_cert(&self, path: &str) -> Result<(), String> {
        let mut g = self.lock();
        if g.files.contains_key(path) || g.empty.contains(path) {
            return Err(format!("Certificate '{path}' already exists!\n"));
        }
        g.empty.insert(path.to_string());
        Ok(())
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
        if !g.files.contains_key(path) && !g.empty.contains(path) {
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
        g.empty.remove(path);
        g.files.insert(path.to_string(), Arc::new(ck));
        let mut n = 0;
        for b in &g.binds {
            let uses = b.uses();
            let k = uses.iter().filter(|u| u.path == path).count();
            if k > 0 {
                b.current.store(Arc::new(build(&uses, &g.files)));
                n += k;
            }
        }
        Ok(n)
    }

    /// Records a crt-list's lines (once per path, as HAProxy shares a list between binds).
    pub fn add_list(&self, path: &str, lines: &[super::crtlist::CrtListLine]) {
        self.lock()
            .lists
            .entry(path.to_string())
            .or_insert_with(|| {
                lines
                    .iter()
                    .map(|l| ListLine {
                        crt: l.crt.clone(),
                        line: l.line,
                        opts: l.opts.clone(),
                        filters: l.filters.clone(),
                    })
                    .collect()
            });
    }

    /// `add|del|show ssl crt-list <args…>` with HAProxy 2.6's replies (level checked by the
    /// caller). A line added serves its names on the next handshake of every bind using the
    /// list; per-line SSL options are refused, as at start (rustls settles them per bind).
    pub fn crt_list_command(
        &self,
        verb: &str,
        args: &[String],
        payload: Option<&str>,
        out: &mut portcullis_runtime_api::reply::Reply,
    ) {
        let arg = |i: usize| args.get(i).map(String::as_str).filter(|a| !a.is_empty());
        let mut g = self.lock();
        match verb {
            "add" => {
                let (Some(list), true) = (arg(0), payload.is_some() || arg(1).is_some()) else {
                    out.err("'add ssl crtlist' expects a filename and a certificate name\n");
                    return;
                };
                let list = list.trim_end_matches('/');
                let fail = |out: &mut portcullis_runtime_api::reply::Reply, m: &str| {
                    out.err(&format!("Can't edit the crt-list: {m}\n"))
                };
                let Some(lines) = g.lists.get(list) else {
                    fail(out, &format!("crt-list '{list}' does not exist!"));
                    return;
                };
                let next = lines.iter().map(|l| l.line).max().unwrap_or(0) + 1;
                let mut entry = match payload {
                    Some(p) => {
                        let p = p.strip_suffix('\n').unwrap_or(p);
                        if p.contains('\n') {
                            fail(out, "only one line of payload is supported!");
                            return;
                        }
                        match super::crtlist::parse("CLI", p) {
                            Ok(l) => match l.lines.into_iter().next() {
                                Some(l) => ListLine {
                                    crt: l.crt,
                                    line: next,
                                    opts: l.opts,
                                    filters: l.filters,
                                },
                                None => {
                                    fail(
                                        out,
                                        "'add ssl crtlist' should contain the certificate name in the payload",
                                    );
                                    return;
                                }
                            },
                            Err(e) => {
                                fail(out, &e);
                                return;
                            }
                        }
                    }
                    // HAProxy 2.6 takes only the certificate from the command line.
                    None => ListLine {
                        crt: arg(1).unwrap_or_default().to_string(),
                        line: next,
                        opts: Vec::new(),
                        filters: Vec::new(),
                    },
                };
                if g.empty.contains(&entry.crt) {
                    fail(out, &format!("certificate '{}' is empty!", entry.crt));
                    return;
                }
                if !g.files.contains_key(&entry.crt) {
                    fail(out, &format!("certificate '{}' does not exist!", entry.crt));
                    return;
                }
                if !entry.opts.is_empty() {
                    fail(
                        out,
                        "per-certificate SSL options are not supported by portcullis!",
                    );
                    return;
                }
                entry.line = next;
                let use_ = CertUse {
                    path: entry.crt.clone(),
                    filters: entry.filters.clone(),
                    list: Some((list.to_string(), next)),
                };
                let crt = entry.crt.clone();
                if let Some(l) = g.lists.get_mut(list) {
                    l.push(entry);
                }
                let mut text = format!("Inserting certificate '{crt}' in crt-list '{list}'");
                for b in &g.binds {
                    let mut uses = b.uses.lock().unwrap_or_else(|p| p.into_inner());
                    let lists_it = uses
                        .iter()
                        .any(|u| u.list.as_ref().is_some_and(|(p, _)| p == list));
                    if lists_it {
                        uses.push(use_.clone());
                        b.current.store(Arc::new(build(&uses, &g.files)));
                        text.push('.');
                    }
                }
                text.push_str("\nSuccess!\n");
                out.push_str(&text);
            }
            "del" => {
                let (Some(list), Some(cert)) = (arg(0), arg(1)) else {
                    out.err("'del ssl crtlist' expects a filename and a certificate name\n");
                    return;
                };
                let fail = |out: &mut portcullis_runtime_api::reply::Reply, m: &str| {
                    out.err(&format!("Can't delete the entry: {m}\n"))
                };
                let (cert, linenum) = match cert.split_once(':') {
                    Some((c, n)) => match n.parse::<usize>() {
                        Ok(n) => (c, n),
                        Err(_) => {
                            fail(out, &format!("wrong line number after colons in '{cert}'!"));
                            return;
                        }
                    },
                    None => (cert, 0),
                };
                let list = list.trim_end_matches('/');
                let Some(lines) = g.lists.get(list) else {
                    fail(out, &format!("crt-list '{list}' does not exist!"));
                    return;
                };
                if !g.files.contains_key(cert) {
                    fail(out, &format!("certificate '{cert}' does not exist!"));
                    return;
                }
                let found: Vec<usize> = lines
                    .iter()
                    .filter(|l| l.crt == cert)
                    .map(|l| l.line)
                    .collect();
                let nums = found
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                if found.is_empty() {
                    fail(
                        out,
                        &format!("certificate '{cert}' can't be found in crt-list '{list}'!"),
                    );
                    return;
                }
                let Some(&line) = found.iter().find(|&&n| linenum == 0 || n == linenum) else {
                    fail(
                        out,
                        &format!(
                            "found a certificate '{cert}' but the line number is incorrect, please specify a correct line number preceded by colons ({nums})!"
                        ),
                    );
                    return;
                };
                if linenum == 0 && found.len() > 1 {
                    fail(
                        out,
                        &format!(
                            "found the certificate '{cert}' in several entries, please specify a line number preceded by colons ({nums})!"
                        ),
                    );
                    return;
                }
                // The first certificate of a bind is its default (HAProxy refuses to remove it).
                let key = (list.to_string(), line);
                let is_default = g.binds.iter().any(|b| {
                    b.uses
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .first()
                        .is_some_and(|u| u.list.as_ref() == Some(&key))
                });
                if is_default {
                    fail(
                        out,
                        &format!(
                            "certificate '{cert}' cannot be deleted, it is used as default certificate by the following frontends:\n"
                        ),
                    );
                    return;
                }
                if let Some(l) = g.lists.get_mut(list) {
                    l.retain(|l| l.line != line);
                }
                for b in &g.binds {
                    let mut uses = b.uses.lock().unwrap_or_else(|p| p.into_inner());
                    let before = uses.len();
                    uses.retain(|u| u.list.as_ref() != Some(&key));
                    if uses.len() != before {
                        b.current.store(Arc::new(build(&uses, &g.files)));
                    }
                }
                out.notice(&format!("Entry '{cert}' deleted in crtlist '{list}'!\n"));
            }
            _ => {
                let numbered = arg(0) == Some("-n");
                let name = if numbered { arg(1) } else { arg(0) };
                let Some(name) = name else {
                    if numbered {
                        out.err("'show ssl crt-list -n' expects a filename or a directory\n");
                        return;
                    }
                    for l in g.lists.keys() {
                        out.push_str(l);
                        out.push('\n');
                    }
                    return;
                };
                let Some(lines) = g.lists.get(name.trim_end_matches('/')) else {
                    out.err("didn't find the specified filename\n");
                    return;
                };
                let mut text = format!("# {name}\n");
                for l in lines {
                    text.push_str(&l.crt);
                    if numbered {
                        text.push_str(&format!(":{}", l.line));
                    }
                    if !l.opts.is_empty() {
                        let o: Vec<String> = l
                            .opts
                            .iter()
                            .map(|(k, v)| match v {
                                Some(v) => format!("{k} {v}"),
                                None => k.clone(),
                            })
                            .collect();
                        text.push_str(&format!(" [{}]", o.join(" ")));
                    }
                    for f in &l.filters {
                        text.push(' ');
                        text.push_str(f);
                    }
                    text.push('\n');
                }
                out.push_str(&text);
            }
        }
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
