//! Dialing gRPC endpoints: `http://` URLs in plain text, `https://` URLs over TLS whose client
//! settings come from the process environment, the same for every binary:
//! `TOOLPLANE_TLS_CA_FILE` (PEM CA certificates to trust; the system's roots are not used),
//! `TOOLPLANE_TLS_CLIENT_CERT_FILE` and `TOOLPLANE_TLS_CLIENT_KEY_FILE` (the certificate to
//! present to servers that require one: mutual TLS).
//!
//! The files are **reloaded without a restart**: every new connection checks whether they
//! changed (a `stat` each, next to a TLS handshake) and loads them again if so, so a rotated
//! client certificate or CA is used from the next connection on, while open connections keep
//! theirs. A set that fails to load (a half-written file) is logged and counted
//! (`tp_net_tls_reload_failures_total`) and the previous one stays in use.
//!
//! tonic's own TLS takes its settings once, so `https://` channels are dialed here: tonic is
//! given the address as `http://` (it adds no TLS of its own) with the `https://` URL as the
//! requests' origin, and [`TlsConnector`] makes the TCP connection and the TLS handshake.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock, RwLock};
use std::task::{Context, Poll};
use std::time::SystemTime;

use http::Uri;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};

use crate::tls::{TlsError, certificates, provider};

/// The client's TLS files (paths; any may be unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTlsFiles {
    /// PEM CA certificates to trust.
    pub ca_file: Option<PathBuf>,
    /// PEM certificate chain to present (with `key_file`).
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

impl ClientTlsFiles {
    /// From `TOOLPLANE_TLS_*`; both client files or neither.
    pub fn from_env() -> Result<ClientTlsFiles, String> {
        let path = |var: &str| {
            std::env::var_os(var)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
        };
        let files = ClientTlsFiles {
            ca_file: path("TOOLPLANE_TLS_CA_FILE"),
            cert_file: path("TOOLPLANE_TLS_CLIENT_CERT_FILE"),
            key_file: path("TOOLPLANE_TLS_CLIENT_KEY_FILE"),
        };
        if files.cert_file.is_some() != files.key_file.is_some() {
            return Err(
                "TOOLPLANE_TLS_CLIENT_CERT_FILE and TOOLPLANE_TLS_CLIENT_KEY_FILE: set both or neither"
                    .into(),
            );
        }
        Ok(files)
    }

    fn paths(&self) -> [Option<&Path>; 3] {
        [&self.ca_file, &self.cert_file, &self.key_file].map(Option::as_deref)
    }
}

/// The process's client TLS settings ([`ReloadingClientTls::shared`]).
static SHARED: OnceLock<Result<Arc<ReloadingClientTls>, String>> = OnceLock::new();

/// What the files looked like when they were last loaded.
type Stamp = [Option<(SystemTime, u64)>; 3];

fn stamp(files: &ClientTlsFiles) -> Stamp {
    files.paths().map(|path| {
        let meta = std::fs::metadata(path?).ok()?;
        Some((
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            meta.len(),
        ))
    })
}

fn client_config(files: &ClientTlsFiles) -> Result<ClientConfig, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &files.ca_file {
        for cert in certificates(ca)? {
            roots.add(cert).map_err(|e| TlsError::File {
                path: ca.clone(),
                message: e.to_string(),
            })?;
        }
    }
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?
        .with_root_certificates(roots);
    let mut config = match (&files.cert_file, &files.key_file) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert)?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::File {
                path: key.clone(),
                message: e.to_string(),
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsError::Rustls(e.to_string()))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// A client TLS configuration, loaded again when its files change.
#[derive(Debug)]
pub struct ReloadingClientTls {
    files: ClientTlsFiles,
    current: RwLock<(Stamp, Arc<ClientConfig>)>,
}

impl ReloadingClientTls {
    /// Loads `files` (an error names the file at fault).
    pub fn load(files: ClientTlsFiles) -> Result<Arc<ReloadingClientTls>, TlsError> {
        if files.cert_file.is_some() != files.key_file.is_some() {
            return Err(TlsError::Rustls(
                "a client certificate needs its key and a key its certificate".into(),
            ));
        }
        let loaded = stamp(&files);
        let config = client_config(&files)?;
        Ok(Arc::new(ReloadingClientTls {
            files,
            current: RwLock::new((loaded, Arc::new(config))),
        }))
    }

    /// The process's configuration: what [`ReloadingClientTls::configure`] set (a CLI
    /// profile's files), else `TOOLPLANE_TLS_*` (read once; the files' contents are reloaded
    /// when they change).
    pub fn shared() -> Result<Arc<ReloadingClientTls>, String> {
        SHARED
            .get_or_init(|| {
                let files = ClientTlsFiles::from_env()?;
                ReloadingClientTls::load(files).map_err(|e| format!("TOOLPLANE_TLS_*: {e}"))
            })
            .clone()
    }

    /// Makes `files` the process's configuration, before any `https://` dial (a CLI profile
    /// names its own files). `Err` when a dial already took the environment's.
    pub fn configure(files: ClientTlsFiles, what: &str) -> Result<(), String> {
        let loaded = ReloadingClientTls::load(files).map_err(|e| format!("{what}: {e}"));
        SHARED
            .set(loaded)
            .map_err(|_| "the TLS client settings were already in use".to_owned())
    }

    /// The configuration for the next handshake: the files' current contents when they
    /// changed and load, else the last good set.
    pub fn config(&self) -> Arc<ClientConfig> {
        let now = stamp(&self.files);
        {
            let current = self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if current.0 == now {
                return Arc::clone(&current.1);
            }
        }
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.0 != now {
            match client_config(&self.files) {
                Ok(config) => {
                    tracing::info!("client TLS files changed; reloaded");
                    metrics::counter!("tp_net_tls_reloads_total").increment(1);
                    *current = (now, Arc::new(config));
                }
                Err(error) => {
                    // Not retried until the files change again (the stamp is taken).
                    tracing::warn!(%error, "client TLS files changed but cannot be loaded; keeping the previous set");
                    metrics::counter!("tp_net_tls_reload_failures_total").increment(1);
                    current.0 = now;
                }
            }
        }
        Arc::clone(&current.1)
    }
}

/// Makes TCP connections and TLS handshakes (with the current client configuration) for
/// tonic channels to one server.
#[derive(Debug, Clone)]
pub struct TlsConnector {
    tls: Arc<ReloadingClientTls>,
    server_name: ServerName<'static>,
}

impl TlsConnector {
    /// A connector presenting `tls`'s certificate to `server_name` (checked against the
    /// server's certificate).
    pub fn new(tls: Arc<ReloadingClientTls>, server_name: ServerName<'static>) -> TlsConnector {
        TlsConnector { tls, server_name }
    }
}

impl tower::Service<Uri> for TlsConnector {
    type Response = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;
    type Error = std::io::Error;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connector = self.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let config = connector.tls.config();
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(connector.server_name, tcp)
                .await?;
            Ok(TokioIo::new(stream))
        })
    }
}

/// How to reach one gRPC URL: its tonic endpoint (configure it with [`Dial::map`]) and, for
/// `https://` URLs, the TLS connector.
#[derive(Debug, Clone)]
pub struct Dial {
    endpoint: Endpoint,
    tls: Option<TlsConnector>,
}

/// A [`Dial`] for `url` (`http://` or `https://`, with the process's client TLS settings).
pub fn dial(url: &str) -> Result<Dial, String> {
    if url.starts_with("https://") {
        return dial_with(url, ReloadingClientTls::shared()?);
    }
    let endpoint =
        Endpoint::from_shared(url.to_owned()).map_err(|e| format!("bad address {url:?}: {e}"))?;
    Ok(Dial {
        endpoint,
        tls: None,
    })
}

/// A [`Dial`] for the `https://` URL `url` with the client TLS settings `tls`.
pub fn dial_with(url: &str, tls: Arc<ReloadingClientTls>) -> Result<Dial, String> {
    let bad = |e: &dyn std::fmt::Display| format!("bad address {url:?}: {e}");
    let uri: Uri = url.parse().map_err(|e| bad(&e))?;
    if uri.scheme_str() != Some("https") {
        return Err(bad(&"not an https:// URL"));
    }
    let host = uri.host().ok_or_else(|| bad(&"no host"))?;
    let port = uri.port_u16().unwrap_or(443);
    let name = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let server_name = ServerName::try_from(name).map_err(|e| bad(&e))?;
    // tonic dials the plain address (and adds no TLS); requests name the https origin.
    let endpoint = Endpoint::from_shared(format!("http://{host}:{port}"))
        .map_err(|e| bad(&e))?
        .origin(uri);
    Ok(Dial {
        endpoint,
        tls: Some(TlsConnector::new(tls, server_name)),
    })
}

impl Dial {
    /// The endpoint configured by `f` (timeouts, keep-alive, …).
    #[must_use]
    pub fn map(self, f: impl FnOnce(Endpoint) -> Endpoint) -> Dial {
        Dial {
            endpoint: f(self.endpoint),
            tls: self.tls,
        }
    }

    /// A channel that connects on first use.
    pub fn connect_lazy(self) -> Channel {
        match self.tls {
            Some(tls) => self.endpoint.connect_with_connector_lazy(tls),
            None => self.endpoint.connect_lazy(),
        }
    }

    /// A channel, connected now.
    pub async fn connect(self) -> Result<Channel, tonic::transport::Error> {
        match self.tls {
            Some(tls) => self.endpoint.connect_with_connector(tls).await,
            None => self.endpoint.connect().await,
        }
    }
}
