//! What a TLS handshake settled (SNI, ALPN, protocol, cipher, resumption): facts the sample
//! fetches (`ssl_fc_*`) and the log read. A leaf, apart from the connection that produces it.

/// What the handshake settled, for `ssl_fc_*` and the logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsInfo {
    pub sni: Option<String>,
    pub alpn: Option<String>,
    /// `TLSv1.3`, `TLSv1.2`.
    pub protocol: &'static str,
    /// OpenSSL's name of the cipher (`TLS_AES_256_GCM_SHA384`, `ECDHE-RSA-AES128-GCM-SHA256`).
    pub cipher: &'static str,
    pub resumed: bool,
}
