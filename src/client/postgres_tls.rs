//! TLS to PostgreSQL (`--auth` with a `[postgres]` table): libpq's
//! `sslmode` over tokio-rustls (ring), as a `MakeTlsConnect` for
//! tokio-postgres. No crate of the kind fits rustls 0.23 on ring without
//! pulling another crypto backend, and the connector is small.
//!
//! The modes, as libpq documents them: `disable` speaks plain text;
//! `prefer` tries TLS and falls back; `require` insists on TLS and
//! verifies nothing, unless a CA is given, when it verifies the chain as
//! `verify-ca` does (libpq: a root certificate file makes `require` act
//! as `verify-ca`); `verify-ca` checks that the server's chain ends in the
//! CA; `verify-full` also that the certificate names the server.
//!
//! The name verified is the server's host as the user gave it (the
//! `--postgres-url` host or the `--endpoints` host), never the dialled
//! address: workers dial their proxies on 127.0.0.1 (libpq's `host`
//! against `hostaddr`). `cert` and `key` present a client certificate
//! (`hostssl ... cert` in `pg_hba.conf`).

use crate::auth::{Auth, SslMode};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// How lockjaw's connections to one PostgreSQL server speak TLS.
#[derive(Clone)]
pub struct PgTls {
    mode: tokio_postgres::config::SslMode,
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
}

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgTls({:?} as {:?})", self.mode, self.name)
    }
}

/// What the server's certificate is checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Nothing,
    Chain,
    ChainAndName,
}

/// libpq's rule: what `mode` verifies, given whether a CA was given.
pub fn check_of(mode: SslMode, has_ca: bool) -> Check {
    match mode {
        SslMode::VerifyFull => Check::ChainAndName,
        SslMode::VerifyCa => Check::Chain,
        SslMode::Disable | SslMode::Prefer | SslMode::Require if has_ca => Check::Chain,
        SslMode::Disable | SslMode::Prefer | SslMode::Require => Check::Nothing,
    }
}

/// The TLS of `auth`'s `[postgres]` table for the server whose host is
/// `host` (`HOST` or `HOST:PORT`, as the user named it); `None` without
/// one or with `sslmode = "disable"`.
pub fn for_host(auth: &Auth, host: &str) -> Result<Option<PgTls>, String> {
    let Some(p) = &auth.postgres else {
        return Ok(None);
    };
    let mode = match p.sslmode {
        SslMode::Disable => return Ok(None),
        SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
        _ => tokio_postgres::config::SslMode::Require,
    };
    let bare = host_of(host);
    let name = ServerName::try_from(bare.to_string())
        .map_err(|e| format!("PostgreSQL host {bare:?} as a TLS name: {e}"))?;
    // ring, not aws-lc-rs, as everywhere in lockjaw (Cargo.toml).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    if let Some(ca) = &p.ca {
        for c in CertificateDer::pem_slice_iter(ca.pem.as_bytes()) {
            let c = c.map_err(|e| format!("{}: {e}", ca.path.display()))?;
            roots
                .add(c)
                .map_err(|e| format!("{}: {e}", ca.path.display()))?;
        }
    }
    let verifier = Arc::new(Verifier {
        check: check_of(p.sslmode, p.ca.is_some()),
        roots: Arc::new(roots),
        algs: provider.signature_verification_algorithms,
    });
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = super::tls::with_identity(builder, p.identity.as_ref())?;
    Ok(Some(PgTls {
        mode,
        config: Arc::new(config),
        name,
    }))
}

/// The host of `HOST`, `HOST:PORT` or `[V6]:PORT`.
fn host_of(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.parse::<u16>().is_ok() => h,
        _ => s,
    }
}

/// Connect with `cfg` (its `sslmode` replaced by `tls`'s), the
/// connection's task spawned on the current runtime.
pub async fn connect(
    cfg: &tokio_postgres::Config,
    tls: Option<&PgTls>,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut cfg = cfg.clone();
    let Some(tls) = tls else {
        cfg.ssl_mode(tokio_postgres::config::SslMode::Disable);
        let (client, conn) = cfg.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        return Ok(client);
    };
    cfg.ssl_mode(tls.mode);
    let (client, conn) = cfg.connect(tls.clone()).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// The server certificate check of one [`Check`].
#[derive(Debug)]
struct Verifier {
    check: Check,
    roots: Arc<RootCertStore>,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.check == Check::Nothing {
            return Ok(ServerCertVerified::assertion());
        }
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algs.all,
        )?;
        if self.check == Check::ChainAndName {
            rustls::client::verify_server_name(&cert, name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

impl<S> MakeTlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Stream<S>;
    type TlsConnect = PgTls;
    type Error = io::Error;

    /// `domain` is the dialled host (often a proxy's 127.0.0.1): the name
    /// verified is the server's own, fixed in `self`.
    fn make_tls_connect(&mut self, _domain: &str) -> io::Result<PgTls> {
        Ok(self.clone())
    }
}

impl<S> TlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Stream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Stream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let name = self.name.clone();
            tokio_rustls::TlsConnector::from(self.config)
                .connect(name, stream)
                .await
                .map(Stream)
        })
    }
}

/// A TLS stream to PostgreSQL. No channel binding: SCRAM over it runs
/// without `-PLUS` (tokio-postgres' default `channel_binding=prefer`).
pub struct Stream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Stream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Stream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for Stream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::{check_of, host_of, Check};
    use crate::auth::SslMode;

    #[test]
    fn the_modes_check_what_libpq_checks() {
        assert_eq!(check_of(SslMode::Require, false), Check::Nothing);
        assert_eq!(check_of(SslMode::Prefer, false), Check::Nothing);
        // A CA given: require verifies the chain, as libpq with a root
        // certificate file.
        assert_eq!(check_of(SslMode::Require, true), Check::Chain);
        assert_eq!(check_of(SslMode::VerifyCa, true), Check::Chain);
        assert_eq!(check_of(SslMode::VerifyFull, true), Check::ChainAndName);
    }

    #[test]
    fn the_name_is_the_host_without_its_port() {
        assert_eq!(host_of("db.internal:5432"), "db.internal");
        assert_eq!(host_of("db.internal"), "db.internal");
        assert_eq!(host_of("[::1]:5432"), "::1");
        assert_eq!(host_of("10.0.0.1:5432"), "10.0.0.1");
    }
}
