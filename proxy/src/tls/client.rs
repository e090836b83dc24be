//! TLS towards servers: `server … ssl [verify none|required] [ca-file <f>] [sni <expr>]` and
//! `check-ssl`, turned into a rustls `ClientConfig` per server.
//!
//! HAProxy without `verifyhost` checks the chain but not the name unless `sni` is set (the SNI
//! is then what the name must match); rustls' verifier always checks the name, so a verifier
//! wrapper forgives a name mismatch when no name was asked for.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, Error, SignatureScheme};

use crate::config::model::{Global, Server};
use crate::http::sample::SampleExpr;

/// A server's TLS settings, ready for connections and checks.
#[derive(Debug)]
pub struct ServerTls {
    pub config: Arc<ClientConfig>,
    /// `sni <expr>`, evaluated per connection; without it no SNI is sent.
    pub sni: Option<SampleExpr>,
    /// Traffic goes over TLS (`ssl`).
    pub traffic: bool,
    /// Health checks go over TLS (`check-ssl`, or `ssl` without a check port/addr override).
    pub checks: bool,
}

/// Builds the TLS settings of a server, or None when neither its traffic nor its checks use TLS.
pub fn server_tls(global: &Global, s: &Server) -> Result<Option<ServerTls>, String> {
    let o = &s.opts;
    let checks = o.check_ssl || (o.ssl && o.check_port.is_none() && o.check_addr.is_none());
    if !o.ssl && !checks {
        return Ok(None);
    }
    // `ssl-default-server-ciphers|ciphersuites|options` shape every server's handshake.
    let defaults = crate::config::model::BindSsl {
        ciphers: global.ssl_default_server_ciphers.clone(),
        ciphersuites: global.ssl_default_server_ciphersuites.clone(),
        ..Default::default()
    };
    let provider = Arc::new(super::provider_for(&defaults).map_err(|e| e.to_string())?);
    let opts = &global.ssl_default_server_options;
    let versions = super::ciphers::versions(opts.min_ver, opts.max_ver)?;
    let verify_none = if o.verify_set {
        o.verify_none
    } else {
        global.ssl_server_verify_none
    };
    let mut sessions = None;
    let verifier: Arc<dyn ServerCertVerifier> = if verify_none {
        Arc::new(NoVerify(Arc::clone(&provider)))
    } else {
        let ca = o.ca_file.as_deref().ok_or_else(|| {
            format!(
                "'server {}' : verify is enabled but no CA file specified.",
                s.name
            )
        })?;
        // Shared with the runtime API (`set/commit ssl ca-file`): read live on each handshake.
        let file = super::cafile::store().load(ca)?;
        sessions = Some(Arc::new(super::cafile::CaSessions::new(Arc::clone(&file))));
        let inner = Arc::new(super::cafile::LiveCa::new(file, Arc::clone(&provider))?);
        Arc::new(NameOptional {
            inner,
            check_name: o.sni.is_some(),
        })
    };
    // `crt`: loaded as a bind's certificate is, offered whenever the server asks for one.
    let client_cert = match &o.crt {
        Some(path) => Some(
            super::pem::load_bundle(path, &provider)
                .map_err(|e| format!("'server {}' : {e}", s.name))?,
        ),
        None => None,
    };
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("unable to set SSL/TLS versions: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match client_cert {
        Some(b) => {
            builder.with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(b.key)))
        }
        None => builder.with_no_client_auth(),
    };
    // `alpn`: offered on the traffic's handshakes (and the checks', unless `check-alpn`).
    if let Some(alpn) = o.alpn.as_ref().filter(|_| o.ssl) {
        config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    }
    if let Some(store) = sessions {
        config.resumption = rustls::client::Resumption::store(store);
    }
    let sni = match &o.sni {
        Some(e) => Some(
            crate::http::sample::parse_sample(e)
                .map_err(|m| format!("'server {}' : 'sni' : {m}", s.name))?,
        ),
        None => None,
    };
    Ok(Some(ServerTls {
        config: Arc::new(config),
        sni,
        traffic: o.ssl,
        checks,
    }))
}

/// The name a connection presents: the SNI if one is configured and valid, else the server's
/// IP address (rustls then sends no SNI extension, as HAProxy without `sni`).
pub fn server_name(sni: Option<&str>, ip: std::net::IpAddr) -> ServerName<'static> {
    sni.and_then(|n| ServerName::try_from(n.to_string()).ok())
        .unwrap_or(ServerName::IpAddress(ip.into()))
}

/// `verify none`: any certificate; handshake signatures are still checked.
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify required`: the chain must lead to the CA file; the name only when `sni` is set.
#[derive(Debug)]
struct NameOptional {
    inner: Arc<super::cafile::LiveCa>,
    check_name: bool,
}

impl ServerCertVerifier for NameOptional {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
