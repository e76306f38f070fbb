//! TLS for Toolplane's listeners (rustls, aws-lc-rs): a certificate chain and key from PEM
//! files, optionally a client CA (then every client must present a certificate it signed:
//! mutual TLS), and **reloading without a restart** — the files are checked every few seconds
//! and a changed set is loaded for the next handshakes, while open connections keep theirs. A
//! set that fails to load (a half-written file during a rotation) is logged and counted
//! (`tp_net_tls_reload_failures_total`), and the previous one stays in use. The client side
//! (dialing `https://` endpoints, with a reloaded client certificate) is [`crate::dial`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

/// How often listeners look for changed TLS files.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The files of a TLS listener. Empty `cert_file` means plain TCP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM CA certificates; when set, clients must present a certificate one of them signed.
    pub client_ca_file: PathBuf,
}

impl TlsFiles {
    /// Whether TLS is configured at all; both files or neither.
    pub fn enabled(&self, section: &str) -> Result<bool, String> {
        let cert = !self.cert_file.as_os_str().is_empty();
        let key = !self.key_file.as_os_str().is_empty();
        let ca = !self.client_ca_file.as_os_str().is_empty();
        match (cert, key) {
            (true, true) => Ok(true),
            (false, false) if !ca => Ok(false),
            (false, false) => Err(format!(
                "{section}.client_ca_file: needs {section}.cert_file and {section}.key_file"
            )),
            _ => Err(format!(
                "{section}.cert_file and {section}.key_file: set both or neither"
            )),
        }
    }
}

/// Why a TLS configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or parsed.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// rustls refused the set (a key that does not match the certificate, say).
    #[error("TLS configuration refused: {0}")]
    Rustls(String),
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_owned(),
        message: message.to_string(),
    }
}

/// The process's crypto provider (aws-lc-rs, the one the rest of the tree uses).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// PEM certificates from `path` (at least one).
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "holds no PEM certificate"));
    }
    Ok(certs)
}

fn server_config(files: &TlsFiles, alpn: &[&[u8]]) -> Result<ServerConfig, TlsError> {
    let certs = certificates(&files.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&files.key_file)
        .map_err(|e| file_error(&files.key_file, e))?;
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = if files.client_ca_file.as_os_str().is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates(&files.client_ca_file)? {
            roots
                .add(cert)
                .map_err(|e| file_error(&files.client_ca_file, e))?;
        }
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Rustls(e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// What the files looked like when they were last loaded.
type Stamp = Vec<Option<(SystemTime, u64)>>;

fn stamp(files: &TlsFiles) -> Stamp {
    [&files.cert_file, &files.key_file, &files.client_ca_file]
        .iter()
        .map(|path| {
            std::fs::metadata(path)
                .ok()
                .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
        })
        .collect()
}

/// A listener's TLS configuration, reloaded when its files change.
#[derive(Debug)]
pub struct ReloadingTls {
    files: TlsFiles,
    alpn: Vec<Vec<u8>>,
    current: RwLock<Arc<ServerConfig>>,
    loaded: Mutex<Stamp>,
}

impl ReloadingTls {
    /// Loads `files` (an error names the file at fault); `alpn` lists the protocols offered
    /// (`h2` for gRPC, `http/1.1` for the edge).
    pub fn load(files: TlsFiles, alpn: &[&[u8]]) -> Result<Arc<ReloadingTls>, TlsError> {
        let loaded = stamp(&files);
        let config = server_config(&files, alpn)?;
        Ok(Arc::new(ReloadingTls {
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            files,
            current: RwLock::new(Arc::new(config)),
            loaded: Mutex::new(loaded),
        }))
    }

    /// The acceptor for the next handshake.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let config = self
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        tokio_rustls::TlsAcceptor::from(config)
    }

    /// Loads the files again if they changed since the last load: `Ok(true)` when a new set
    /// is in use, `Ok(false)` when nothing changed; on error the old set stays.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let now = stamp(&self.files);
        {
            let loaded = self
                .loaded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *loaded == now {
                return Ok(false);
            }
        }
        let alpn: Vec<&[u8]> = self.alpn.iter().map(Vec::as_slice).collect();
        let config = server_config(&self.files, &alpn)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(config);
        *self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = now;
        Ok(true)
    }

    /// Checks the files every `every` for as long as the process runs.
    pub fn spawn_reloader(self: &Arc<Self>, every: Duration) {
        let tls = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let Some(tls) = tls.upgrade() else { return };
                match tls.reload_if_changed() {
                    Ok(true) => {
                        tracing::info!(cert = %tls.files.cert_file.display(), "TLS certificate reloaded");
                        metrics::counter!("tp_net_tls_reloads_total").increment(1);
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(%error, "TLS files changed but cannot be loaded; keeping the previous certificate");
                        metrics::counter!("tp_net_tls_reload_failures_total").increment(1);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_files_or_neither_and_a_client_ca_needs_them() {
        let files = |cert: &str, key: &str, ca: &str| TlsFiles {
            cert_file: cert.into(),
            key_file: key.into(),
            client_ca_file: ca.into(),
        };
        assert_eq!(files("", "", "").enabled("tls"), Ok(false));
        assert_eq!(files("c.pem", "k.pem", "").enabled("tls"), Ok(true));
        assert_eq!(files("c.pem", "k.pem", "ca.pem").enabled("tls"), Ok(true));
        for bad in [
            files("c.pem", "", ""),
            files("", "k.pem", ""),
            files("", "", "ca.pem"),
        ] {
            let error = bad.enabled("tls").unwrap_err();
            assert!(error.starts_with("tls."), "{error}");
        }
    }

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = std::env::temp_dir().join(format!("tp-net-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let error = certificates(&empty).unwrap_err().to_string();
        assert!(
            error.contains("empty.pem") && error.contains("no PEM"),
            "{error}"
        );
        let missing = TlsFiles {
            cert_file: dir.join("missing.pem"),
            key_file: dir.join("missing.key"),
            client_ca_file: PathBuf::new(),
        };
        let error = ReloadingTls::load(missing, &[b"h2"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing.pem"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
