//! HTTPS for the HTTP face (`--http-tls-cert FILE --http-tls-key FILE`): the user's PEM certificate chain and private key read into a rustls server configuration (the ring provider, TLS 1.2 and 1.3, HTTP/1.1), each problem named with its file, and the DNS names the certificate is for (which requests may then name as Host).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why the certificate or key cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot read the TLS {what} {path}: {source}")]
    Unreadable {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the TLS certificate file {0} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)"
    )]
    NoCertificate(PathBuf),
    #[error("the TLS certificate file {path} holds no usable certificate: {message}")]
    BadCertificate { path: PathBuf, message: String },
    #[error("the TLS key file {path} holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {message}")]
    BadKey { path: PathBuf, message: String },
    #[error("the TLS key {key} does not fit the certificate {cert}: {message}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        message: String,
    },
}

/// What the HTTP face serves HTTPS with.
#[derive(Debug, Clone)]
pub struct TlsSetup {
    pub config: Arc<rustls::ServerConfig>,
    /// The DNS names of the leaf certificate's subjectAltName. A client reached this server
    /// under one of them only if it accepted the certificate for it, so a page whose own
    /// host name merely resolves here (DNS rebinding) never gets a request through: these
    /// names may stand in `Host` and `Origin` beside the bound address.
    pub names: Vec<String>,
}

/// The server configuration for `cert` (a PEM chain, leaf first) and `key` (its PEM
/// private key).
pub fn server_config(cert: &Path, key: &Path) -> Result<TlsSetup, TlsError> {
    let cert_pem = std::fs::read(cert).map_err(|source| TlsError::Unreadable {
        what: "certificate",
        path: cert.to_path_buf(),
        source,
    })?;
    let key_pem = std::fs::read(key).map_err(|source| TlsError::Unreadable {
        what: "key",
        path: key.to_path_buf(),
        source,
    })?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::BadCertificate {
            path: cert.to_path_buf(),
            message: error.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(cert.to_path_buf()));
    }
    let private_key =
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|error| TlsError::BadKey {
            path: key.to_path_buf(),
            message: error.to_string(),
        })?;
    let names = webpki::EndEntityCert::try_from(&chain[0])
        .map_err(|error| TlsError::BadCertificate {
            path: cert.to_path_buf(),
            message: format!("{error:?}"),
        })?
        .valid_dns_names()
        .map(str::to_ascii_lowercase)
        .collect();
    let mismatch = |message: String| TlsError::Mismatch {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        message,
    };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|error| mismatch(error.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, private_key)
    .map_err(|error| mismatch(error.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsSetup {
        config: Arc::new(config),
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_empty_and_garbled_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        let error = server_config(&cert, &key).unwrap_err().to_string();
        assert!(
            error.starts_with("cannot read the TLS certificate ") && error.contains("cert.pem"),
            "{error}"
        );
        std::fs::write(&cert, "not a certificate\n").unwrap();
        let error = server_config(&cert, &key).unwrap_err().to_string();
        assert!(
            error.contains("cannot read the TLS key ") && error.contains("key.pem"),
            "{error}"
        );
        std::fs::write(&key, "not a key\n").unwrap();
        let error = server_config(&cert, &key).unwrap_err().to_string();
        assert!(
            error.contains("holds no PEM certificate") && error.contains("cert.pem"),
            "{error}"
        );
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let error = server_config(&cert, &key).unwrap_err().to_string();
        assert!(
            error.contains("key.pem") && error.contains("private key"),
            "{error}"
        );
        // A well-formed key (PKCS#8 framing) under a certificate whose DER is garbage.
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let error = server_config(&cert, &key).unwrap_err().to_string();
        assert!(
            error.contains("cert.pem") && error.contains("no usable certificate"),
            "{error}"
        );
    }
}
