//! The client side of TLS reloads its files without a restart: a server that takes only
//! certificates from one CA refuses the client until the client's certificate files are
//! replaced with one that CA signed; the next connection presents it. A broken replacement is
//! refused and the previous certificate stays in use. Real sockets, certificates made here.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions panic on setup failures by design"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tower::Service as _;
use tp_net::dial::{ClientTlsFiles, ReloadingClientTls, TlsConnector};

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let pem = params.self_signed(&key).unwrap().pem();
    Ca {
        issuer: Issuer::new(params, key),
        pem,
    }
}

/// A leaf signed by `ca`: (certificate PEM, key PEM).
fn leaf(ca: &Ca, name: &str, server: bool) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// Writes `contents` to `path` the way certificate managers do: beside it, then renamed.
fn replace(path: &Path, contents: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A TLS server on loopback taking only client certificates `client_ca` signed; it writes
/// "ok" to every client that completes the handshake.
async fn server(server_ca: &Ca, client_ca: &Ca, dir: &Path) -> String {
    let (cert, key) = leaf(server_ca, "server", true);
    let files = tp_net::tls::TlsFiles {
        cert_file: dir.join("server.pem"),
        key_file: dir.join("server.key"),
        client_ca_file: dir.join("client-ca.pem"),
    };
    std::fs::write(&files.cert_file, cert).unwrap();
    std::fs::write(&files.key_file, key).unwrap();
    std::fs::write(&files.client_ca_file, &client_ca.pem).unwrap();
    let tls = tp_net::tls::ReloadingTls::load(files, &[b"h2"]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = tls.acceptor();
            tokio::spawn(async move {
                if let Ok(mut stream) = acceptor.accept(tcp).await {
                    let _ = stream.write_all(b"ok").await;
                    let _ = stream.shutdown().await;
                }
            });
        }
    });
    addr
}

/// Connects through `connector` and reads the server's greeting.
async fn greeting(connector: &mut TlsConnector, addr: &str) -> Result<String, String> {
    let uri: http::Uri = format!("http://{addr}").parse().unwrap();
    let io = connector.call(uri).await.map_err(|e| e.to_string())?;
    let mut stream = io.into_inner();
    let mut out = Vec::new();
    stream
        .read_to_end(&mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn a_replaced_client_certificate_is_presented_on_the_next_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (server_ca, old_ca, new_ca) = (ca("server CA"), ca("old client CA"), ca("new client CA"));
    let addr = server(&server_ca, &new_ca, dir.path()).await;

    // The client starts with a certificate the server does not take.
    let path = |name: &str| -> PathBuf { dir.path().join(name) };
    std::fs::write(path("trust.pem"), &server_ca.pem).unwrap();
    let (cert, key) = leaf(&old_ca, "client", false);
    replace(&path("client.pem"), &cert);
    replace(&path("client.key"), &key);
    let tls = ReloadingClientTls::load(ClientTlsFiles {
        ca_file: Some(path("trust.pem")),
        cert_file: Some(path("client.pem")),
        key_file: Some(path("client.key")),
    })
    .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut connector = TlsConnector::new(Arc::clone(&tls), name);
    let refused = greeting(&mut connector, &addr).await;
    assert!(refused.is_err(), "{refused:?}");

    // Rotated on disk: the next connection presents the new certificate.
    let (cert, key) = leaf(&new_ca, "client", false);
    replace(&path("client.key"), &key);
    replace(&path("client.pem"), &cert);
    assert_eq!(greeting(&mut connector, &addr).await.as_deref(), Ok("ok"));

    // A broken replacement is not loaded; the last good certificate stays in use.
    replace(&path("client.pem"), "-----BEGIN CERTIFICATE-----\nbroken\n");
    assert_eq!(greeting(&mut connector, &addr).await.as_deref(), Ok("ok"));
    // Fixed again (a fresh certificate): loaded.
    let (cert, key) = leaf(&new_ca, "client-2", false);
    replace(&path("client.key"), &key);
    replace(&path("client.pem"), &cert);
    assert_eq!(greeting(&mut connector, &addr).await.as_deref(), Ok("ok"));

    // The trusted CA is reloaded too: trusting another CA, the server is refused.
    replace(&path("trust.pem"), &old_ca.pem);
    assert!(greeting(&mut connector, &addr).await.is_err());
}

#[test]
fn client_files_come_in_pairs() {
    // Only the pair check is exercised here (the variables are the process's own).
    let files = ClientTlsFiles {
        ca_file: None,
        cert_file: Some(PathBuf::from("cert.pem")),
        key_file: None,
    };
    assert!(ReloadingClientTls::load(files).is_err());
}
