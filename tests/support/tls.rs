//! TLS on the client side of the tests, and certificates: a rustls client that accepts any
//! certificate (the tests compare the DER the server presented instead), and rcgen bundles.
#![allow(dead_code)] // each test binary uses a different subset

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};

/// The crypto provider every test side uses (ring, as the proxy's client side).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts any certificate: the tests compare the DER itself.
#[derive(Debug)]
pub struct AnyCert;

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client configuration trusting any certificate ([`AnyCert`]), offering `alpn` (none when
/// empty).
pub fn any_cert_client(alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert))
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(cfg)
}

pub type Tls = StreamOwned<ClientConnection, TcpStream>;

/// A completed handshake with `to` for SNI `sni` (no ALPN, reads time out after 5 s): the
/// connection and the leaf certificate the server presented, DER.
pub fn handshake(to: SocketAddr, sni: &str) -> (Tls, Vec<u8>) {
    let name = ServerName::try_from(sni.to_string()).expect("server name");
    let conn = ClientConnection::new(any_cert_client(&[]), name).expect("client connection");
    let tcp = TcpStream::connect(to).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).expect("handshake");
    }
    let der = s.conn.peer_certificates().expect("a certificate")[0].to_vec();
    (s, der)
}

/// A fresh ECDSA P-256 key and the parameters of a certificate `CN=<cn>` for the DNS `sans`
/// (no SAN when empty).
pub fn params(cn: &str, sans: &[&str]) -> (rcgen::CertificateParams, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut p =
        rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("params");
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    (p, key)
}

/// The PEM bundle HAProxy reads for a `crt`: the certificate, then its key.
pub fn bundle_pem(cert: &rcgen::Certificate, key: &rcgen::KeyPair) -> String {
    format!("{}{}", cert.pem(), key.serialize_pem())
}
