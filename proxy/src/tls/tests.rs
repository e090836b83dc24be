use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, PKCS_ECDSA_P256_SHA256,
    PKCS_ECDSA_P384_SHA384, PKCS_ED25519, SignatureAlgorithm,
};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, ServerConnection};

use super::*;
use crate::config::model::{CrtSource, SslOptions, TlsVersion};

struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!("portcullis-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
    fn write(&self, name: &str, body: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, body).unwrap();
        p
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Made {
    cert_pem: String,
    key_pem: String,
    der: CertificateDer<'static>,
}

fn make(alg: &'static SignatureAlgorithm, sans: &[&str], cn: Option<&str>) -> Made {
    let key = KeyPair::generate_for(alg).unwrap();
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    if let Some(cn) = cn {
        params.distinguished_name.push(DnType::CommonName, cn);
    }
    let cert = params.self_signed(&key).unwrap();
    Made {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        der: cert.der().clone(),
    }
}

fn bundle(m: &Made) -> String {
    format!("{}{}", m.cert_pem, m.key_pem)
}

fn ssl(crts: &[&str]) -> BindSsl {
    BindSsl {
        crts: crts.iter().map(|s| s.to_string()).collect(),
        ..BindSsl::default()
    }
}

fn provider() -> rustls::crypto::CryptoProvider {
    super::default_provider()
}

fn leaf(k: &Arc<rustls::sign::CertifiedKey>) -> CertificateDer<'static> {
    k.cert[0].clone()
}

#[test]
fn bundle_with_chain_keeps_file_order() {
    let t = Tmp::new("chain");
    let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384).unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let leaf_cert = CertificateParams::new(vec!["a.example".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    // Key first, then leaf and chain: HAProxy accepts any section order.
    let p = t.write(
        "a.pem",
        &format!("{}{}{}", key.serialize_pem(), leaf_cert.pem(), ca.pem()),
    );
    let b = pem::load_bundle(&p, &provider()).unwrap();
    assert_eq!(b.key.cert.len(), 2);
    assert_eq!(&b.key.cert[0], leaf_cert.der());
    assert_eq!(&b.key.cert[1], ca.der());
    // rcgen's default subject CN is indexed too.
    assert_eq!(
        pem::cert_names(leaf_cert.der()),
        ["a.example", "rcgen self signed cert"]
    );
}

#[test]
fn key_types_ecdsa_ed25519() {
    let t = Tmp::new("keys");
    for (i, alg) in [
        &PKCS_ECDSA_P256_SHA256,
        &PKCS_ECDSA_P384_SHA384,
        &PKCS_ED25519,
    ]
    .into_iter()
    .enumerate()
    {
        let m = make(alg, &["k.example"], None);
        let p = t.write(&format!("{i}.pem"), &bundle(&m));
        let b = pem::load_bundle(&p, &provider()).unwrap();
        assert_eq!(leaf(&b.key), m.der);
    }
}

/// RSA (PKCS#1 "RSA PRIVATE KEY") and SEC1 ("EC PRIVATE KEY") bundles made by the openssl CLI.
#[test]
fn openssl_made_pkcs1_and_sec1_bundles() {
    let t = Tmp::new("openssl");
    let run = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !run(&["version"]) {
        eprintln!("openssl CLI absent: PKCS#1/SEC1 bundles not covered");
        return;
    }
    let rsa_key = t.path("rsa.key");
    let ec_key = t.path("ec.key");
    assert!(run(&["genrsa", "-traditional", "-out", &rsa_key, "2048"]));
    assert!(run(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        &ec_key
    ]));
    for (key, marker) in [(&rsa_key, "RSA PRIVATE KEY"), (&ec_key, "EC PRIVATE KEY")] {
        let crt = format!("{key}.crt");
        assert!(run(&[
            "req",
            "-x509",
            "-new",
            "-key",
            key,
            "-out",
            &crt,
            "-days",
            "2",
            "-subj",
            "/CN=o.example"
        ]));
        let key_pem = std::fs::read_to_string(key).unwrap();
        assert!(key_pem.contains(marker), "{key_pem}");
        let crt_pem = std::fs::read_to_string(&crt).unwrap();
        let p = t.write("bundle.pem", &format!("{crt_pem}{key_pem}"));
        let b = pem::load_bundle(&p, &provider()).unwrap();
        // No SAN: the CN names the certificate.
        assert_eq!(pem::cert_names(&leaf(&b.key)), ["o.example"]);
    }
}

#[test]
fn key_in_side_file_and_error_texts() {
    let t = Tmp::new("errs");
    let m = make(&PKCS_ECDSA_P256_SHA256, &["a.example"], None);
    let other = make(&PKCS_ECDSA_P256_SHA256, &["b.example"], None);

    let p = t.write("side.pem", &m.cert_pem);
    assert_eq!(
        pem::load_bundle(&p, &provider()).unwrap_err(),
        format!("No Private Key found in '{p}.key'.")
    );
    t.write("side.pem.key", &m.key_pem);
    assert_eq!(leaf(&pem::load_bundle(&p, &provider()).unwrap().key), m.der);

    let p = t.write("nocert.pem", &m.key_pem);
    assert_eq!(
        pem::load_bundle(&p, &provider()).unwrap_err(),
        format!("unable to load certificate from file '{p}'.")
    );
    let p = t.write("junk.pem", "garbage\n");
    assert_eq!(
        pem::load_bundle(&p, &provider()).unwrap_err(),
        format!("unable to load certificate from file '{p}'.")
    );
    // A key that does not load sends HAProxy to the side file too.
    let bad_key = m
        .key_pem
        .replacen("\n", "\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n", 1);
    let p = t.write("badkey.pem", &format!("{}{bad_key}", m.cert_pem));
    assert_eq!(
        pem::load_bundle(&p, &provider()).unwrap_err(),
        format!("No Private Key found in '{p}.key'.")
    );
    let p = t.write("mism.pem", &format!("{}{}", m.cert_pem, other.key_pem));
    assert_eq!(
        pem::load_bundle(&p, &provider()).unwrap_err(),
        format!("inconsistencies between private key and certificate loaded '{p}'.")
    );
    let p = t.path("missing.pem");
    assert_eq!(
        check_bind(&ssl(&[&p])).unwrap_err(),
        format!("unable to stat SSL certificate from file '{p}' : No such file or directory.")
    );
    let empty = Tmp::new("emptydir");
    assert_eq!(
        server_config(&ssl(&[empty.0.to_str().unwrap()])).unwrap_err(),
        TlsError::Setting("no SSL certificate specified".to_string())
    );
}

#[test]
fn directory_loading_skips_like_haproxy() {
    let t = Tmp::new("dir");
    let b = make(&PKCS_ECDSA_P256_SHA256, &["b.example"], None);
    let a = make(&PKCS_ED25519, &["a.example"], None);
    t.write("b.pem", &bundle(&b));
    t.write("a.pem", &bundle(&a));
    for junk in [
        ".hidden",
        "a.pem.key",
        "a.pem.ocsp",
        "a.pem.issuer",
        "a.pem.sctl",
    ] {
        t.write(junk, "not pem\n");
    }
    std::fs::create_dir(t.0.join("sub")).unwrap();
    let got = pem::load_crt(t.0.to_str().unwrap(), &provider()).unwrap();
    assert_eq!(
        got.iter().map(|b| leaf(&b.key)).collect::<Vec<_>>(),
        [a.der.clone(), b.der.clone()]
    );
    // Any other file must be a bundle, as in HAProxy.
    let p = t.write("readme.txt", "hello\n");
    assert_eq!(
        pem::load_crt(t.0.to_str().unwrap(), &provider()).unwrap_err(),
        format!("unable to load certificate from file '{p}'.")
    );
}

#[test]
fn sni_exact_wildcard_default() {
    let t = Tmp::new("sni");
    let first = make(&PKCS_ECDSA_P256_SHA256, &["first.example"], None);
    let wild = make(&PKCS_ECDSA_P256_SHA256, &["*.example.com"], None);
    let exact = make(
        &PKCS_ECDSA_P256_SHA256,
        &["www.example.com", "Other.Example"],
        None,
    );
    let cn = make(&PKCS_ECDSA_P256_SHA256, &[], Some("cn.example"));
    let both = make(
        &PKCS_ECDSA_P256_SHA256,
        &["san.example"],
        Some("cn2.example"),
    );
    let f = [
        t.write("1.pem", &bundle(&first)),
        t.write("2.pem", &bundle(&wild)),
        t.write("3.pem", &bundle(&exact)),
        t.write("4.pem", &bundle(&cn)),
        t.write("5.pem", &bundle(&both)),
    ];
    let res = load_certs(
        &ssl(&f.iter().map(String::as_str).collect::<Vec<_>>()),
        &provider(),
    )
    .unwrap();
    let pick = |sni: Option<&str>| leaf(&res.pick(sni, &[]).unwrap());
    assert_eq!(pick(Some("www.example.com")), exact.der);
    assert_eq!(pick(Some("WWW.Example.com.")), exact.der);
    assert_eq!(pick(Some("other.example")), exact.der);
    assert_eq!(pick(Some("api.example.com")), wild.der);
    // A wildcard covers exactly one label.
    assert_eq!(pick(Some("a.b.example.com")), first.der);
    assert_eq!(pick(Some("example.com")), first.der);
    assert_eq!(pick(Some("cn.example")), cn.der);
    // The CN counts even beside SANs, as in HAProxy 2.6.
    assert_eq!(pick(Some("san.example")), both.der);
    assert_eq!(pick(Some("cn2.example")), both.der);
    assert_eq!(pick(Some("unknown.test")), first.der);
    assert_eq!(pick(None), first.der);
}

#[test]
fn sni_prefers_a_key_the_client_can_use() {
    let t = Tmp::new("sigalg");
    let ec = make(&PKCS_ECDSA_P256_SHA256, &["dual.example"], None);
    let ed = make(&PKCS_ED25519, &["dual.example"], None);
    let f = [
        t.write("ec.pem", &bundle(&ec)),
        t.write("ed.pem", &bundle(&ed)),
    ];
    let res = load_certs(&ssl(&[&f[0], &f[1]]), &provider()).unwrap();
    let ed_only = [rustls::SignatureScheme::ED25519];
    assert_eq!(
        leaf(&res.pick(Some("dual.example"), &ed_only).unwrap()),
        ed.der
    );
    let ec_only = [rustls::SignatureScheme::ECDSA_NISTP256_SHA256];
    assert_eq!(
        leaf(&res.pick(Some("dual.example"), &ec_only).unwrap()),
        ec.der
    );
}

fn handshake(
    server_cfg: ServerConfig,
    roots: &[&CertificateDer<'static>],
    sni: &str,
    alpn: &[&str],
    client_versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<(ClientConnection, ServerConnection), rustls::Error> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add((*r).clone()).unwrap();
    }
    let mut ccfg =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(client_versions)
            .unwrap()
            .with_root_certificates(store)
            .with_no_client_auth();
    ccfg.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    let mut client = ClientConnection::new(
        Arc::new(ccfg),
        ServerName::try_from(sni.to_string()).unwrap(),
    )
    .unwrap();
    let mut server = ServerConnection::new(Arc::new(server_cfg)).unwrap();
    for _ in 0..20 {
        let mut buf = Vec::new();
        client.write_tls(&mut buf).unwrap();
        server.read_tls(&mut buf.as_slice()).unwrap();
        let s = server.process_new_packets();
        let mut buf = Vec::new();
        server.write_tls(&mut buf).unwrap();
        client.read_tls(&mut buf.as_slice()).unwrap();
        s?;
        client.process_new_packets()?;
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok((client, server));
        }
    }
    panic!("handshake did not finish");
}

#[test]
fn in_memory_handshake_picks_cert_alpn_version() {
    let t = Tmp::new("hs");
    let a = make(&PKCS_ECDSA_P256_SHA256, &["a.example"], None);
    let b = make(&PKCS_ED25519, &["*.b.example"], None);
    let f = [t.write("a.pem", &bundle(&a)), t.write("b.pem", &bundle(&b))];
    let mut bind = ssl(&[&f[0], &f[1]]);
    bind.alpn = vec!["h2".to_string(), "http/1.1".to_string()];
    let all = rustls::ALL_VERSIONS;

    let (c, s) = handshake(
        server_config(&bind).unwrap(),
        &[&a.der, &b.der],
        "x.b.example",
        &["http/1.1", "h2"],
        all,
    )
    .unwrap();
    assert_eq!(c.peer_certificates().unwrap()[0], b.der);
    assert_eq!(s.server_name(), Some("x.b.example"));
    // Server order wins, as with HAProxy's ALPN selection.
    assert_eq!(c.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));

    // ssl-max-ver TLSv1.2 + a cipher string restricted to ECDSA/CHACHA20.
    bind.options = SslOptions {
        max_ver: Some(TlsVersion::Tls12),
        no_tls_tickets: true,
        ..SslOptions::default()
    };
    bind.ciphers = Some("ECDHE+CHACHA20:!aRSA".to_string());
    let (c, _) = handshake(
        server_config(&bind).unwrap(),
        &[&a.der, &b.der],
        "a.example",
        &["http/1.1"],
        all,
    )
    .unwrap();
    assert_eq!(c.peer_certificates().unwrap()[0], a.der);
    assert_eq!(c.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
    assert_eq!(
        c.negotiated_cipher_suite().map(|s| s.suite()),
        Some(rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256)
    );

    // ssl-min-ver TLSv1.3 refuses a TLS 1.2-only client.
    bind.options = SslOptions {
        min_ver: Some(TlsVersion::Tls13),
        ..SslOptions::default()
    };
    bind.ciphers = None;
    let err = handshake(
        server_config(&bind).unwrap(),
        &[&a.der],
        "a.example",
        &[],
        &[&rustls::version::TLS12],
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            err,
            rustls::Error::PeerIncompatible(_) | rustls::Error::AlertReceived(_)
        ),
        "{err:?}"
    );
}

#[test]
fn settings_errors_and_tickets() {
    let t = Tmp::new("set");
    let a = make(&PKCS_ECDSA_P256_SHA256, &["a.example"], None);
    let f = t.write("a.pem", &bundle(&a));
    let mut bind = ssl(&[&f]);
    assert!(server_config(&bind).unwrap().ticketer.enabled());
    bind.options.no_tls_tickets = true;
    let cfg = server_config(&bind).unwrap();
    assert!(!cfg.ticketer.enabled());
    assert!(cfg.ignore_client_order);
    // `prefer-client-ciphers`: the client's order wins.
    bind.options.prefer_client_ciphers = true;
    assert!(!server_config(&bind).unwrap().ignore_client_order);
    bind.options.prefer_client_ciphers = false;

    bind.ciphers = Some("FOO".to_string());
    assert_eq!(
        server_config(&bind).unwrap_err(),
        TlsError::Setting("unable to set SSL cipher list to 'FOO'".to_string())
    );
    bind.ciphers = None;
    bind.curves = Some("X448".to_string());
    assert_eq!(
        check_bind(&bind).unwrap_err(),
        "unable to set SSL curves list to 'X448'"
    );
    bind.curves = None;
    bind.options.min_ver = Some(TlsVersion::Tls10);
    assert_eq!(
        check_bind(&bind).unwrap_err(),
        "'ssl-min-ver TLSv1.0' : not supported (only TLSv1.2 and TLSv1.3 are available)"
    );
    bind.options.min_ver = Some(TlsVersion::Tls13);
    bind.options.max_ver = Some(TlsVersion::Tls12);
    assert_eq!(
        check_bind(&bind).unwrap_err(),
        "all SSL/TLS versions are disabled"
    );
}

fn pick_der(r: &SniResolver, sni: &str) -> CertificateDer<'static> {
    leaf(&r.pick(Some(sni), &[]).unwrap())
}

#[test]
fn crt_list_filters_select_by_sni() {
    let t = Tmp::new("crtlist");
    let def = make(&PKCS_ECDSA_P256_SHA256, &["default.local"], None);
    let a = make(
        &PKCS_ECDSA_P256_SHA256,
        &["a.example.com", "a2.example.com"],
        None,
    );
    let wild = make(&PKCS_ECDSA_P256_SHA256, &["*.example.com"], None);
    let b = make(&PKCS_ECDSA_P256_SHA256, &["b.example.com"], None);
    let pd = t.write("default.pem", &bundle(&def));
    let pa = t.write("a.pem", &bundle(&a));
    let pw = t.write("wild.pem", &bundle(&wild));
    let pb = t.write("b.pem", &bundle(&b));
    let list = t.write(
        "list.txt",
        &format!(
            "# the first line is the default\n{pd}\n\n{pa} [alpn h2] a.example.com\n{pw} *.example.com !secure.example.com\n{pb}\n"
        ),
    );
    let mut s = ssl(&[]);
    s.alpn = vec!["h2".into()];
    s.sources = vec![CrtSource::List(list.clone())];
    let r = load_certs(&s, &provider()).unwrap();
    assert_eq!(pick_der(&r, "default.local"), def.der);
    assert_eq!(pick_der(&r, "a.example.com"), a.der);
    // The filter replaces the certificate's own names: a2 falls to the wildcard.
    assert_eq!(pick_der(&r, "a2.example.com"), wild.der);
    assert_eq!(pick_der(&r, "x.example.com"), wild.der);
    // A negative filter keeps the name off the wildcards: default certificate.
    assert_eq!(pick_der(&r, "secure.example.com"), def.der);
    assert_eq!(pick_der(&r, "b.example.com"), b.der);
    assert_eq!(pick_der(&r, "other.org"), def.der);

    // `crt` before `crt-list` on the line: its certificate is the default.
    s.sources = vec![CrtSource::Crt(pb.clone()), CrtSource::List(list.clone())];
    let r = load_certs(&s, &provider()).unwrap();
    assert_eq!(pick_der(&r, "other.org"), b.der);

    // A per-certificate ALPN that differs from the bind's is refused at load (and so at -c).
    s.alpn = vec!["h2".into(), "http/1.1".into()];
    let e = load_certs(&s, &provider()).unwrap_err();
    assert_eq!(
        e,
        TlsError::Cert(format!(
            "'crt-list' : parsing [{list}:4]: 'alpn h2' is not supported per certificate (rustls sets it once per bind); use the bind line's value or move the certificate to its own bind"
        ))
    );
    // Errors from the list's certificates name the line's file, as HAProxy's.
    let bad = t.write("bad.txt", "nope.pem\n");
    s.sources = vec![CrtSource::List(bad)];
    assert_eq!(
        load_certs(&s, &provider()).unwrap_err(),
        TlsError::Cert(
            "'crt-list' : unable to stat SSL certificate from file 'nope.pem' : No such file or directory."
                .into()
        )
    );
    let warn = t.write("warn.txt", &format!("{pa} zz.example.com [alpn h2]\n"));
    s.sources = vec![CrtSource::List(warn.clone())];
    assert_eq!(
        bind_warnings(&s),
        vec![format!(
            "'crt-list' : parsing [{warn}:1]: malformated line, filters can't be between filename and options!"
        )]
    );
}

#[test]
fn store_transaction_swaps_certificates_on_every_bind() {
    use portcullis_runtime_api::ssl::{AbortCertError, CommitCertError, SetCertError, SetCertOk};
    let t = Tmp::new("store");
    let a = make(
        &PKCS_ECDSA_P256_SHA256,
        &["a.example.com"],
        Some("a.example.com"),
    );
    let b = make(&PKCS_ECDSA_P256_SHA256, &["b.example.com"], None);
    let a2 = make(&PKCS_ECDSA_P384_SHA384, &["a2.example.com"], Some("a2"));
    let pa = t.write("a.pem", &bundle(&a));
    let pb = t.write("b.pem", &bundle(&b));
    let list = t.write("l.txt", &format!("{pb}\n{pa} a.example.com\n"));
    let store = CertStore::new();
    let mut s1 = ssl(&[]);
    s1.sources = vec![CrtSource::List(list)];
    let bind1 = load_into(&s1, &provider(), &store).unwrap();
    let bind2 = load_into(&ssl(&[&pa]), &provider(), &store).unwrap();
    let l = store.list();
    assert_eq!(l.transaction, None);
    let mut want = vec![pa.clone(), pb.clone()];
    want.sort();
    assert_eq!(l.files, want);

    assert_eq!(
        store.set("nope.pem", &bundle(&a2)),
        Err(SetCertError::NotReferenced)
    );
    assert_eq!(
        store.set(&pa, "garbage\n"),
        Err(SetCertError::Load(format!(
            "unable to load certificate from file '{pa}'."
        )))
    );
    assert_eq!(store.commit(&pa), Err(CommitCertError::NoTransaction));
    assert_eq!(store.abort(&pa), Err(AbortCertError::NoTransaction));
    // Certificate only: accepted by set, refused by commit (HAProxy 2.6 does the same).
    assert_eq!(
        store.set(&pa, &a2.cert_pem),
        Ok(SetCertOk::Created(pa.clone()))
    );
    assert_eq!(store.commit(&pa), Err(CommitCertError::Incomplete));
    assert_eq!(
        store.set(&pa, &bundle(&a2)),
        Ok(SetCertOk::Updated(pa.clone()))
    );
    assert_eq!(
        store.set(&pb, &bundle(&a2)),
        Err(SetCertError::OtherTransaction(pa.clone()))
    );
    assert_eq!(
        store.commit(&pb),
        Err(CommitCertError::OtherTransaction(pa.clone()))
    );
    assert_eq!(store.list().transaction, Some(pa.clone()));
    let d = store.details(&format!("*{pa}")).unwrap();
    assert_eq!(d.subject, "/CN=a2");
    assert_eq!(d.algorithm.as_deref(), Some("EC384"));
    assert!(!d.used);
    assert_eq!(store.details(&pa).unwrap().subject, "/CN=a.example.com");
    assert_eq!(store.details(&pa).unwrap().san, "DNS:a.example.com");
    // Nothing changed before the commit.
    assert_eq!(pick_der(&bind1.resolver(), "a.example.com"), a.der);
    let before = bind2.resolver();
    assert_eq!(store.commit(&pa), Ok(2));
    assert_eq!(store.list().transaction, None);
    // The crt-list line keeps its filter; the `crt` bind takes the new certificate's names.
    assert_eq!(pick_der(&bind1.resolver(), "a.example.com"), a2.der);
    assert_eq!(pick_der(&bind1.resolver(), "a2.example.com"), b.der);
    assert_eq!(pick_der(&bind2.resolver(), "a2.example.com"), a2.der);
    // A table taken before the commit (a handshake in progress) still holds the old key.
    assert_eq!(pick_der(&before, "a.example.com"), a.der);
    // Abort discards.
    assert_eq!(
        store.set(&pb, &bundle(&a)),
        Ok(SetCertOk::Created(pb.clone()))
    );
    assert_eq!(
        store.abort(&pa),
        Err(AbortCertError::OtherTransaction(pb.clone()))
    );
    assert_eq!(store.abort(&pb), Ok(()));
    assert_eq!(pick_der(&bind1.resolver(), "b.example.com"), b.der);
    // A key that does not match its certificate is refused at commit.
    let mismatch = format!("{}{}", a.cert_pem, b.key_pem);
    assert!(store.set(&pb, &mismatch).is_ok());
    assert_eq!(
        store.commit(&pb),
        Err(CommitCertError::Load(format!(
            "inconsistencies between private key and certificate loaded '{pb}'."
        )))
    );
}

#[test]
fn default_provider_keeps_aws_lc_suites_in_order() {
    let want: Vec<_> = rustls::crypto::aws_lc_rs::default_provider()
        .cipher_suites
        .iter()
        .map(|s| s.suite())
        .collect();
    let got: Vec<_> = super::default_provider()
        .cipher_suites
        .iter()
        .map(|s| s.suite())
        .collect();
    assert_eq!(got, want);
    assert_eq!(got[0], rustls::CipherSuite::TLS13_AES_256_GCM_SHA384);
}

/// `strict-sni`: a name no certificate carries, or no SNI at all, fails the handshake instead of
/// getting the default certificate.
#[test]
fn strict_sni_refuses_unnamed_handshakes() {
    let t = Tmp::new("strict");
    let a = make(&PKCS_ECDSA_P256_SHA256, &["a.example"], None);
    let f = t.write("a.pem", &bundle(&a));
    let mut bind = ssl(&[&f]);
    let all = rustls::ALL_VERSIONS;
    // Without strict-sni another name gets the default (and the client then rejects it).
    assert!(
        handshake(
            server_config(&bind).unwrap(),
            &[&a.der],
            "a.example",
            &[],
            all
        )
        .is_ok()
    );
    bind.strict_sni = true;
    assert!(
        handshake(
            server_config(&bind).unwrap(),
            &[&a.der],
            "a.example",
            &[],
            all
        )
        .is_ok()
    );
    let r = load_certs(&bind, &crate::tls::default_provider()).unwrap();
    assert!(r.pick_named(Some("other.example"), &[]).is_none());
    assert!(r.pick_named(None, &[]).is_none());
    assert!(r.pick(None, &[]).is_some());
    let err = handshake(
        server_config(&bind).unwrap(),
        &[&a.der],
        "other.example",
        &[],
        all,
    );
    assert!(err.is_err());
}
