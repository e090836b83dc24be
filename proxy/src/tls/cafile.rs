//! CA files (HAProxy's `cafile_entry` tree): each `ca-file` of a server is loaded once, keyed by
//! its path as written, and its verifier reads the file's current certificates, so that the
//! runtime API's transaction (`new|set|commit|abort|del|show ssl ca-file`, one at a time as in
//! HAProxy 2.6) changes what the NEXT handshakes verify against, without a reload. HAProxy also
//! holds `@system-ca` (loaded for its HTTP client); it is listed here the same way.
//!
//! HAProxy 2.6 rebuilds only the binds' contexts on `commit ssl ca-file` (servers keep the store
//! they started with); portcullis applies it to servers too: that is what an operator rotating
//! a backend CA expects, and what later HAProxy versions do.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use arc_swap::ArcSwap;
use portcullis_runtime_api::reply::Reply;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error, SignatureScheme};
use rustls_pki_types::pem::PemObject;

/// One CA file: its certificates now, and a generation that moves at each commit.
#[derive(Debug)]
pub struct CaFile {
    pub path: String,
    certs: ArcSwap<Vec<CertificateDer<'static>>>,
    epoch: AtomicU64,
    /// Made by `new ssl ca-file` and never set: `Status: Empty`.
    empty: std::sync::atomic::AtomicBool,
}

impl CaFile {
    fn new(path: &str, certs: Vec<CertificateDer<'static>>, empty: bool) -> CaFile {
        CaFile {
            path: path.to_string(),
            certs: ArcSwap::from_pointee(certs),
            epoch: AtomicU64::new(0),
            empty: std::sync::atomic::AtomicBool::new(empty),
        }
    }
    pub fn certs(&self) -> Arc<Vec<CertificateDer<'static>>> {
        self.certs.load_full()
    }
    pub fn generation(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }
}

/// Certificates of a PEM text; `None` when there is none or one does not parse.
pub fn parse_pem(text: &[u8]) -> Option<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(text)
        .collect::<Result<_, _>>()
        .ok()?;
    (!certs.is_empty()).then_some(certs)
}

#[derive(Default)]
struct Inner {
    files: BTreeMap<String, Arc<CaFile>>,
    /// The open transaction: the file's path and the payload's certificates.
    txn: Option<(String, Vec<CertificateDer<'static>>)>,
}

/// Every CA file of the process.
#[derive(Default)]
pub struct CaStore {
    inner: Mutex<Inner>,
}

static STORE: OnceLock<CaStore> = OnceLock::new();

/// The process' CA files, `@system-ca` included (the system's `*.pem` certificates, from
/// `$SSL_CERT_DIR` or OpenSSL's default directory, as HAProxy loads them).
pub fn store() -> &'static CaStore {
    STORE.get_or_init(|| {
        let s = CaStore::default();
        let dir = std::env::var("SSL_CERT_DIR").unwrap_or_else(|_| "/usr/lib/ssl/certs".into());
        s.lock().files.insert(
            "@system-ca".into(),
            Arc::new(CaFile::new("@system-ca", system_certs(&dir), false)),
        );
        s
    })
}

/// The first certificate of each `*.pem` file of `dir`, duplicates once.
fn system_certs(dir: &str) -> Vec<CertificateDer<'static>> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<std::path::PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pem"))
        .collect();
    names.sort();
    let mut out: Vec<CertificateDer<'static>> = Vec::new();
    for p in names {
        let Ok(text) = std::fs::read(&p) else {
            continue;
        };
        if let Some(c) = parse_pem(&text).and_then(|v| v.into_iter().next())
            && !out.contains(&c)
        {
            out.push(c);
        }
    }
    out
}

impl CaStore {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The file of `path`, read on first use (the configuration's `ca-file`).
    pub fn load(&self, path: &str) -> Result<Arc<CaFile>, String> {
        if let Some(f) = self.lock().files.get(path) {
            return Ok(Arc::clone(f));
        }
        let text =
            std::fs::read(path).map_err(|e| format!("unable to load CA file '{path}' : {e}."))?;
        let certs = parse_pem(&text)
            .ok_or_else(|| format!("unable to load CA file '{path}' : no certificate found."))?;
        let f = Arc::new(CaFile::new(path, certs, false));
        Ok(Arc::clone(
            self.lock().files.entry(path.to_string()).or_insert(f),
        ))
    }

    /// `<verb> ssl ca-file <args…>` with HAProxy 2.6's replies (the level is checked by the
    /// caller). `args` are the words after `ca-file`.
    pub fn command(&self, verb: &str, args: &[String], payload: Option<&str>, out: &mut Reply) {
        let file = args.first().map(String::as_str).filter(|f| !f.is_empty());
        let mut g = self.lock();
        match verb {
            "new" => {
                let Some(f) = file else {
                    out.err("'new ssl ca-file' expects a filename\n");
                    return;
                };
                if g.files.contains_key(f) {
                    out.err(&format!("CA file '{f}' already exists!\n"));
                    return;
                }
                g.files
                    .insert(f.to_string(), Arc::new(CaFile::new(f, Vec::new(), true)));
                out.notice(&format!("New CA file created '{f}'!\n"));
            }
            "set" => {
                let (Some(f), Some(p)) = (file, payload) else {
                    out.err("'set ssl ca-file expects a filename and CAs as a payload\n");
                    return;
                };
                if let Some((t, _)) = &g.txn
                    && t != f
                {
                    out.err(&format!("The ongoing transaction is about '{t}' but you are trying to set '{f}'\nCan't update {f}!\n"));
                    return;
                }
                if !g.files.contains_key(f) {
                    out.err(&format!("Can't replace a CA file which is not referenced by the configuration!\nCan't update {f}!\n"));
                    return;
                }
                let Some(certs) = parse_pem(p.as_bytes()) else {
                    out.err(&format!("Invalid payload\nCan't update {f}!\n"));
                    return;
                };
                let created = g.txn.is_none();
                g.txn = Some((f.to_string(), certs));
                out.notice(&if created {
                    format!("transaction created for CA {f}!\n")
                } else {
                    format!("transaction updated for CA {f}!\n")
                });
            }
            "commit" => {
                let Some(f) = file else {
                    out.err("'commit ssl ca-file expects a filename\n");
                    return;
                };
                match g.txn.take() {
                    None => out.err(&format!("No ongoing transaction! !\nCan't commit {f}!\n")),
                    Some((t, c)) if t != f => {
                        out.err(&format!("The ongoing transaction is about '{t}' but you are trying to set '{f}'\nCan't commit {f}!\n"));
                        g.txn = Some((t, c));
                    }
                    Some((t, certs)) => {
                        if let Some(entry) = g.files.get(&t) {
                            entry.certs.store(Arc::new(certs));
                            entry.empty.store(false, Ordering::Relaxed);
                            entry.epoch.fetch_add(1, Ordering::AcqRel);
                        }
                        // No bind instance is rebuilt (no dot): servers read the file live.
                        let _ = write!(out, "Committing {t}\nSuccess!\n");
                    }
                }
            }
            "abort" => {
                let Some(f) = file else {
                    out.err("'abort ssl ca-file' expects a filename\n");
                    return;
                };
                match &g.txn {
                    None => out.err("No ongoing transaction!\n"),
                    Some((t, _)) if t != f => out.err(&format!("The ongoing transaction is about '{t}' but you are trying to abort a transaction for '{f}'\n")),
                    Some(_) => {
                        g.txn = None;
                        out.notice(&format!("Transaction aborted for certificate '{f}'!\n"));
                    }
                }
            }
            "del" => {
                let Some(f) = file else {
                    out.err("'del ssl ca-file' expects a CA file name\n");
                    return;
                };
                // Servers keep the file they hold (as HAProxy's contexts keep their store).
                if g.files.remove(f).is_none() {
                    out.err(&format!(
                        "Can't remove the CA file: CA file '{f}' doesn't exist!\n\n"
                    ));
                    return;
                }
                out.notice(&format!("CA file '{f}' deleted!\n"));
            }
            _ => show(&g, file, out),
        }
    }
}

fn show(g: &Inner, file: Option<&str>, out: &mut Reply) {
    let Some(name) = file else {
        if let Some((t, c)) = &g.txn {
            let _ = writeln!(out, "# transaction\n*{t} - {} certificate(s)", c.len());
        }
        out.push_str("# filename\n");
        for (p, f) in &g.files {
            let _ = writeln!(out, "{p} - {} certificate(s)", f.certs().len());
        }
        return;
    };
    const NOT_FOUND: &str = "Can't display the CA file : Not found!\n";
    let (name, index) = match name.split_once(':') {
        Some((n, i)) => match i.parse::<usize>() {
            Ok(i) if i > 0 => (n, Some(i)),
            _ => {
                out.err(&format!("wrong CA index after colons in '{name}'!"));
                return;
            }
        },
        None => (name, None),
    };
    let (certs, empty, shown) = match name.strip_prefix('*') {
        Some(p) => match &g.txn {
            Some((t, c)) if t == p => (Arc::new(c.clone()), false, name.to_string()),
            _ => {
                out.err(NOT_FOUND);
                return;
            }
        },
        None => match g.files.get(name) {
            Some(f) => (f.certs(), f.empty.load(Ordering::Relaxed), name.to_string()),
            None => {
                out.err(NOT_FOUND);
                return;
            }
        },
    };
    // HAProxy 2.6 prints nothing at all for a file made by `new ssl ca-file` and never set.
    if empty {
        return;
    }
    let _ = writeln!(out, "Filename: {shown}");
    // Servers' files are not bind instances: HAProxy calls them unused.
    out.push_str("Status: Unused\n");
    let start = index.map_or(0, |i| i - 1);
    for (i, c) in certs.iter().enumerate().skip(start) {
        let _ = write!(out, " \nCertificate #{}:\n", i + 1);
        if let Some(d) = super::certinfo::details(&shown, false, std::slice::from_ref(c)) {
            let _ = writeln!(out, "Serial: {}", d.serial);
            let _ = writeln!(out, "notBefore: {}", d.not_before);
            let _ = writeln!(out, "notAfter: {}", d.not_after);
            let _ = writeln!(out, "Subject Alternative Name: {}", d.san);
            let _ = writeln!(out, "Algorithm: {}", d.algorithm.unwrap_or_default());
            let _ = writeln!(out, "SHA1 FingerPrint: {}", d.sha1);
            let _ = writeln!(out, "Subject: {}", d.subject);
            let _ = writeln!(out, "Issuer: {}", d.issuer);
        }
        if index.is_some() {
            break;
        }
    }
}

/// `verify required` against a CA file: the verifier is rebuilt from the file's certificates
/// on the first handshake after a commit.
#[derive(Debug)]
pub struct LiveCa {
    file: Arc<CaFile>,
    provider: Arc<CryptoProvider>,
    cache: Mutex<(u64, Arc<WebPkiServerVerifier>)>,
}

fn build(
    certs: &[CertificateDer<'static>],
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots.add(c.clone()).map_err(|e| e.to_string())?;
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
        .build()
        .map_err(|e| e.to_string())
}

impl LiveCa {
    pub fn new(file: Arc<CaFile>, provider: Arc<CryptoProvider>) -> Result<LiveCa, String> {
        let now = file.generation();
        let v = build(&file.certs(), &provider)
            .map_err(|e| format!("unable to load CA file '{}' : {e}.", file.path))?;
        Ok(LiveCa {
            file,
            provider,
            cache: Mutex::new((now, v)),
        })
    }

    pub fn file(&self) -> &Arc<CaFile> {
        &self.file
    }

    fn current(&self) -> Arc<WebPkiServerVerifier> {
        let now = self.file.generation();
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if c.0 != now {
            // A committed file that does not build a verifier (no usable root) keeps the old.
            if let Ok(v) = build(&self.file.certs(), &self.provider) {
                *c = (now, v);
            }
        }
        Arc::clone(&c.1)
    }
}

impl ServerCertVerifier for LiveCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        self.current()
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}

/// Sessions towards a server verified against a CA file: forgotten when the file is committed,
/// so that no handshake resumes what the old CA allowed.
#[derive(Debug)]
pub struct CaSessions {
    file: Arc<CaFile>,
    inner: Mutex<(u64, Arc<rustls::client::ClientSessionMemoryCache>)>,
}

/// rustls' default number of remembered sessions.
const SESSIONS: usize = 256;

impl CaSessions {
    pub fn new(file: Arc<CaFile>) -> CaSessions {
        let now = file.generation();
        CaSessions {
            file,
            inner: Mutex::new((
                now,
                Arc::new(rustls::client::ClientSessionMemoryCache::new(SESSIONS)),
            )),
        }
    }
    fn cache(&self) -> Arc<rustls::client::ClientSessionMemoryCache> {
        let now = self.file.generation();
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if c.0 != now {
            *c = (
                now,
                Arc::new(rustls::client::ClientSessionMemoryCache::new(SESSIONS)),
            );
        }
        Arc::clone(&c.1)
    }
}

impl rustls::client::ClientSessionStore for CaSessions {
    fn set_kx_hint(&self, n: ServerName<'static>, g: rustls::NamedGroup) {
        self.cache().set_kx_hint(n, g)
    }
    fn kx_hint(&self, n: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.cache().kx_hint(n)
    }
    fn set_tls12_session(
        &self,
        n: ServerName<'static>,
        v: rustls::client::Tls12ClientSessionValue,
    ) {
        self.cache().set_tls12_session(n, v)
    }
    fn tls12_session(&self, n: &ServerName<'_>) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.cache().tls12_session(n)
    }
    fn remove_tls12_session(&self, n: &ServerName<'static>) {
        self.cache().remove_tls12_session(n)
    }
    fn insert_tls13_ticket(
        &self,
        n: ServerName<'static>,
        v: rustls::client::Tls13ClientSessionValue,
    ) {
        self.cache().insert_tls13_ticket(n, v)
    }
    fn take_tls13_ticket(
        &self,
        n: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        self.cache().take_tls13_ticket(n)
    }
}
