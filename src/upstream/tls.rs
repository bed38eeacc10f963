//! The certificates robotsguard uses towards an origin over TLS: the CAs its certificate is
//! checked against (a private CA, instead of the system's roots) and the client certificate it
//! presents to origins that require one (mTLS). Read when a snapshot is built (at start and on
//! every reload), checked whole here so that nothing malformed reaches pingora's TLS code.

use std::path::Path;
use std::sync::Arc;

use pingora::protocols::tls::CaType;
use pingora::utils::tls::{CertKey, WrappedX509};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::UpstreamTls;

/// An origin's upstream TLS material, ready for its peers.
#[derive(Clone, Default)]
pub struct UpstreamTlsMaterial {
    /// The CAs to trust instead of the system's roots.
    pub ca: Option<Arc<CaType>>,
    /// The client certificate chain and key.
    pub client: Option<Arc<CertKey>>,
}

impl std::fmt::Debug for UpstreamTlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTlsMaterial")
            .field("ca", &self.ca.as_ref().map(|ca| ca.len()))
            .field("client", &self.client.is_some())
            .finish()
    }
}

/// The certificates of a PEM file, each checked to parse as X.509 (pingora's own parsing would
/// panic on one that does not).
fn certificates(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let iter = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    for (index, cert) in iter.enumerate() {
        let der =
            cert.map_err(|e| format!("`{}`: certificate {}: {e}", path.display(), index + 1))?;
        x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| {
            format!(
                "`{}`: certificate {} is not X.509: {e}",
                path.display(),
                index + 1
            )
        })?;
        out.push(der.as_ref().to_vec());
    }
    if out.is_empty() {
        return Err(format!("`{}` holds no PEM certificate", path.display()));
    }
    Ok(out)
}

message_error! {
    /// Why an upstream's TLS files could not be used: which file, and what is wrong with it.
    UpstreamTlsError
}

/// Reads what `tls` names. Errors say which file and what is wrong with it.
pub fn load(tls: &UpstreamTls) -> Result<UpstreamTlsMaterial, UpstreamTlsError> {
    load_text(tls).map_err(UpstreamTlsError)
}

/// [`load`], its error as text.
fn load_text(tls: &UpstreamTls) -> Result<UpstreamTlsMaterial, String> {
    let ca = match &tls.ca {
        Some(path) => {
            let certs = certificates(path)?;
            let wrapped: Vec<WrappedX509> = certs
                .into_iter()
                .map(|der| WrappedX509::new(der, pingora::utils::tls::parse_x509))
                .collect();
            Some(Arc::from(wrapped.into_boxed_slice()))
        }
        None => None,
    };
    let client = match &tls.client_cert {
        Some((cert, key)) => {
            let chain = certificates(cert)?;
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("`{}`: no usable private key: {e}", key.display()))?;
            let key_bytes = key_der.secret_der().to_vec();
            // pingora converts the bytes back with `try_into().unwrap()`: make sure it can.
            PrivateKeyDer::try_from(key_bytes.clone())
                .map_err(|e| format!("`{}`: unsupported private key: {e}", key.display()))?;
            Some(Arc::new(CertKey::new(chain, key_bytes)))
        }
        None => None,
    };
    Ok(UpstreamTlsMaterial { ca, client })
}
