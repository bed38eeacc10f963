//! Reading TLS certificate and key files, with errors that say which file and what is wrong:
//! checked before serving, so a missing or mismatched file stops `serve` (and fails `validate`)
//! instead of killing a listener after start.

use std::path::Path;

use pingora::tls::{install_default_crypto_provider, load_certs_and_key_files, ServerConfig};

/// Why a certificate and key pair cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFileError(pub String);

impl std::fmt::Display for TlsFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsFileError {}

/// Checks that `cert` holds a PEM certificate chain, `key` a PEM private key, and that the key is
/// the certificate's.
pub fn check_pair(cert: &Path, key: &Path) -> Result<(), TlsFileError> {
    for (what, path) in [("certificate", cert), ("private key", key)] {
        if let Err(e) = std::fs::File::open(path) {
            return Err(TlsFileError(format!(
                "cannot read the TLS {what} `{}`: {e}",
                path.display()
            )));
        }
    }
    let (Some(cert_text), Some(key_text)) = (cert.to_str(), key.to_str()) else {
        return Err(TlsFileError(format!(
            "TLS file paths must be UTF-8: `{}`, `{}`",
            cert.display(),
            key.display()
        )));
    };
    let loaded = load_certs_and_key_files(cert_text, key_text).map_err(|e| {
        TlsFileError(format!(
            "cannot parse the TLS certificate `{cert_text}` or key `{key_text}`: {e}"
        ))
    })?;
    let Some((certs, key_der)) = loaded else {
        return Err(TlsFileError(format!(
            "`{key_text}` holds no PEM private key (PKCS#1, PKCS#8 or SEC1)"
        )));
    };
    if certs.is_empty() {
        return Err(TlsFileError(format!(
            "`{cert_text}` holds no PEM certificate"
        )));
    }
    install_default_crypto_provider();
    ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| {
            TlsFileError(format!(
                "the TLS key `{key_text}` does not fit the certificate `{cert_text}`: {e}"
            ))
        })?;
    Ok(())
}
