//! TLS for lockjaw's own connections (`--auth` with a `[tls]` table): a
//! rustls client configuration that trusts the file's CA and presents its
//! client certificate, and a TLS stream to a dialled address (often a
//! worker's proxy on 127.0.0.1) that verifies the configured
//! `server_name`, never the dialled address.

use crate::auth::{Pem, SecretPem, Tls};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// The rustls configuration of `t` (ring as the crypto provider).
pub fn client_config(t: &Tls) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(t.ca.pem.as_bytes()) {
        let c = c.map_err(|e| format!("{}: {e}", t.ca.path.display()))?;
        roots
            .add(c)
            .map_err(|e| format!("{}: {e}", t.ca.path.display()))?;
    }
    // ring, not aws-lc-rs: no cmake and a far shorter build (Cargo.toml).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    Ok(Arc::new(with_identity(builder, t.identity.as_ref())?))
}

/// The client configuration that presents `identity` (a certificate
/// chain and its key), or none.
pub(crate) fn with_identity(
    builder: rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>,
    identity: Option<&(Pem, SecretPem)>,
) -> Result<rustls::ClientConfig, String> {
    let Some((cert, key)) = identity else {
        return Ok(builder.with_no_client_auth());
    };
    let chain = CertificateDer::pem_slice_iter(cert.pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", cert.path.display()))?;
    // The key's parse error names the file, never its contents.
    let k = PrivateKeyDer::from_pem_slice(key.pem.expose().as_bytes())
        .map_err(|_| format!("{}: not a PEM private key", key.path.display()))?;
    builder
        .with_client_auth_cert(chain, k)
        .map_err(|e| format!("client certificate {}: {e}", cert.path.display()))
}

/// The name the server's certificate must carry.
pub fn server_name(t: &Tls) -> Result<ServerName<'static>, String> {
    ServerName::try_from(t.server_name.clone())
        .map_err(|e| format!("server_name {:?}: {e}", t.server_name))
}

/// A TCP connection to `addr`, then a TLS handshake that verifies
/// `t.server_name`. Errors keep their `io::ErrorKind` (a refused
/// connection stays refused).
pub async fn connect(addr: &str, t: &Tls) -> std::io::Result<TlsStream<TcpStream>> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let config = client_config(t).map_err(invalid)?;
    let name = server_name(t).map_err(invalid)?;
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("TLS to {addr} as {}: {e}", t.server_name))
        })
}
