//! Shared by the webhook integration tests: a test CA and the serving certificates it signs, the
//! real HTTPS server on 127.0.0.1:0, and clients that verify that server against the CA.
//!
//! Two clients on purpose: reqwest (an ordinary HTTPS client, as a user would have) and a small
//! HTTP/1.1-over-rustls connection that exposes what reqwest hides: exactly one TCP connection
//! reused across requests, the negotiated TLS version and the certificate the server presented.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use kubevirt_operator::admission::{Admission, routes};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::macs::LiveMacs;
use kubevirt_operator::tls::{CertSlot, install_crypto_provider, keypair, server};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A throwaway certificate authority (ECDSA P-256, like the operator's own).
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A serving certificate and its key, both PEM, as the webhook's `--cert-file/--key-file` hold them.
#[derive(Clone)]
pub struct ServingPair {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
}

impl TestCa {
    pub fn new(common_name: &str) -> Self {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A serving certificate for 127.0.0.1 and localhost; `common_name` tells certificates apart.
    pub fn issue(&self, common_name: &str) -> ServingPair {
        self.issue_for(common_name, &["127.0.0.1", "localhost"])
    }

    /// A certificate for the names (or IP addresses) `sans`.
    pub fn issue_for(&self, common_name: &str, sans: &[&str]) -> ServingPair {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).expect("SANs");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        let key = KeyPair::generate().expect("serving key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        ServingPair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
        }
    }

    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert_der()).expect("CA is a valid root");
        roots
    }

    /// rustls client config trusting only this CA, limited to `versions`.
    pub fn client_config(
        &self,
        versions: &[&'static SupportedProtocolVersion],
    ) -> Arc<ClientConfig> {
        install_crypto_provider();
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(versions)
                .expect("protocol versions")
                .with_root_certificates(self.roots())
                .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // Full handshakes only: a resumed session would not show the server's current certificate.
        config.resumption = rustls::client::Resumption::disabled();
        Arc::new(config)
    }

    /// A reqwest client that trusts only this CA (no system roots) and so verifies the server.
    pub fn reqwest_client(&self) -> reqwest::Client {
        install_crypto_provider();
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(self.cert_pem().as_bytes()).expect("CA PEM"),
            )
            .https_only(true)
            .http1_only()
            .no_proxy()
            .build()
            .expect("client")
    }
}

impl ServingPair {
    pub fn certified_key(&self) -> Arc<rustls::sign::CertifiedKey> {
        keypair::certified_key(self.cert_pem.as_bytes(), self.key_pem.as_bytes())
            .expect("a valid pair")
    }
}

/// The real webhook server (built-in templates, default medium) on an ephemeral port.
pub struct Server {
    pub addr: SocketAddr,
    pub slot: Arc<CertSlot>,
    // Dropping the sender starts the server's graceful shutdown.
    _shutdown: oneshot::Sender<()>,
}

impl Server {
    pub async fn start(pair: &ServingPair) -> Server {
        install_crypto_provider();
        let slot = CertSlot::new();
        slot.store(pair.certified_key());
        Self::start_with_slot(slot).await
    }

    /// The server with `catalog` (e.g. MachineClasses besides the built-ins).
    pub async fn start_with_catalog(pair: &ServingPair, catalog: Catalog) -> Server {
        install_crypto_provider();
        let slot = CertSlot::new();
        slot.store(pair.certified_key());
        Self::start_with(slot, catalog).await
    }

    pub async fn start_with_slot(slot: Arc<CertSlot>) -> Server {
        Self::start_with(slot, Catalog::default()).await
    }

    /// The server giving interfaces MAC addresses from `macs` and refusing those it holds.
    pub async fn start_with_macs(pair: &ServingPair, macs: LiveMacs) -> Server {
        install_crypto_provider();
        let slot = CertSlot::new();
        slot.store(pair.certified_key());
        let admission = Admission::new(Catalog::default())
            .expect("schema compiles")
            .with_macs(macs);
        Self::start_admission(slot, admission).await
    }

    async fn start_with(slot: Arc<CertSlot>, catalog: Catalog) -> Server {
        let admission = Admission::new(catalog).expect("schema compiles");
        Self::start_admission(slot, admission).await
    }

    async fn start_admission(slot: Arc<CertSlot>, admission: Admission) -> Server {
        install_crypto_provider();
        let admission = Arc::new(admission);
        let listener = TcpListener::bind((LOCALHOST, 0)).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel::<()>();
        let serving_slot = slot.clone();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            server::serve(listener, serving_slot, routes::router(admission), shutdown)
                .await
                .expect("server runs");
        });
        Server {
            addr,
            slot,
            _shutdown: tx,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

/// One HTTP/1.1 response, body read in full.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// A single TLS connection speaking HTTP/1.1 keep-alive: every request goes over this one TCP
/// connection, so a test can prove reuse, and it can see the server's certificate and version.
pub struct HttpsConn {
    stream: TlsStream<TcpStream>,
    buffered: Vec<u8>,
}

impl HttpsConn {
    pub async fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> std::io::Result<Self> {
        let tcp = TcpStream::connect(addr).await?;
        // Without it Nagle's algorithm holds back small writes and every request pays ~40 ms.
        tcp.set_nodelay(true)?;
        let stream = TlsConnector::from(config)
            .connect(ServerName::IpAddress(addr.ip().into()), tcp)
            .await?;
        Ok(HttpsConn {
            stream,
            buffered: Vec::new(),
        })
    }

    /// The leaf certificate the server presented in this connection's handshake.
    pub fn peer_certificate(&self) -> CertificateDer<'static> {
        self.stream
            .get_ref()
            .1
            .peer_certificates()
            .expect("server sent certificates")[0]
            .clone()
            .into_owned()
    }

    pub fn protocol_version(&self) -> Option<rustls::ProtocolVersion> {
        self.stream.get_ref().1.protocol_version()
    }

    pub async fn post_json(&mut self, path: &str, body: &[u8]) -> std::io::Result<HttpResponse> {
        self.request("POST", path, body).await
    }

    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> std::io::Result<HttpResponse> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let mut message = head.into_bytes();
        message.extend_from_slice(body);
        self.stream.write_all(&message).await?;
        self.stream.flush().await?;
        self.read_response().await
    }

    async fn read_response(&mut self) -> std::io::Result<HttpResponse> {
        let header_end = loop {
            if let Some(i) = find(&self.buffered, b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.buffered[..header_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid_data(format!("bad status line {status_line:?}")))?;
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .ok_or_else(|| invalid_data(format!("no content-length in {head:?}")))?;
        while self.buffered.len() < header_end + length {
            self.fill().await?;
        }
        let body = self.buffered[header_end..header_end + length].to_vec();
        self.buffered.drain(..header_end + length);
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }

    /// Sends bytes as they are, for clients that misbehave on purpose.
    pub async fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// Reads until the server closes the connection; returns what it sent before closing.
    pub async fn read_until_closed(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buffered);
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return out,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
        }
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "server closed the connection",
            ));
        }
        self.buffered.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid_data(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

/// A minimal valid CREATE review, for "the server still serves" checks.
pub fn valid_review(uid: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "vitistack.io", "version": "v1alpha1", "kind": "Machine"},
            "resource": {"group": "vitistack.io", "version": "v1alpha1", "resource": "machines"},
            "name": "vm",
            "namespace": "default",
            "operation": "CREATE",
            "object": {
                "apiVersion": "vitistack.io/v1alpha1",
                "kind": "Machine",
                "metadata": {"name": "vm", "namespace": "default"},
                "spec": {"template": "small"}
            }
        }
    })
}

/// Sends [`valid_review`] to the validating webhook with reqwest and asserts it is allowed.
pub async fn assert_serves(client: &reqwest::Client, server: &Server, uid: &str) {
    let response = client
        .post(server.url(kubevirt_operator::admission::VALIDATE_PATH))
        .json(&valid_review(uid))
        .send()
        .await
        .unwrap_or_else(|e| panic!("valid request {uid} failed: {e:?}"));
    assert_eq!(response.status(), 200, "valid request {uid}");
    let body: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(body["response"]["uid"], uid);
    assert_eq!(body["response"]["allowed"], true, "{body}");
}

/// `kubevirt-operator webhook` as a child process serving a pair issued by `ca`, on an ephemeral
/// port that it logs (JSON) and that is read back here.
pub struct WebhookProcess {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    /// Where `/healthz` and `/readyz` answer (plain HTTP).
    pub probes: SocketAddr,
    /// Where `/metrics` answers (plain HTTP).
    pub metrics: SocketAddr,
    _dir: tempfile::TempDir,
}

impl WebhookProcess {
    pub fn start(ca: &TestCa) -> WebhookProcess {
        Self::start_with(ca, &[])
    }

    /// With `extra` arguments after the defaults (e.g. `--drain-period 2s`).
    pub fn start_with(ca: &TestCa, extra: &[&str]) -> WebhookProcess {
        Self::start_serving(&ca.issue("webhook process"), extra)
    }

    /// Serving `pair`, with `extra` arguments after the defaults.
    pub fn start_serving(pair: &ServingPair, extra: &[&str]) -> WebhookProcess {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir().expect("temp dir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, &pair.cert_pem).expect("write cert");
        std::fs::write(&key, &pair.key_pem).expect("write key");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
            .args(["webhook", "--cert-file"])
            .arg(&cert)
            .arg("--key-file")
            .arg(&key)
            .args(["--listen", "127.0.0.1:0"])
            .args(["--metrics-bind-address", "127.0.0.1:0"])
            .args(["--health-probe-bind-address", "127.0.0.1:0"])
            .args(extra)
            .env("LOG_FORMAT", "json")
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("webhook starts");
        let stderr = child.stderr.take().expect("stderr");
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (probes_tx, probes_rx) = std::sync::mpsc::channel();
        let (metrics_tx, metrics_rx) = std::sync::mpsc::channel();
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let Ok(log) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                let field = |name: &str| log[name].as_str().unwrap_or_default().to_owned();
                if log["message"] == "serving admission webhooks over HTTPS" {
                    let _ = addr_tx.send(field("address"));
                } else if log["message"] == "serving metrics and probes over HTTP" {
                    let _ = probes_tx.send(field("probes"));
                    let _ = metrics_tx.send(field("metrics"));
                }
            }
        });
        let logged = |rx: std::sync::mpsc::Receiver<String>, what: &str| -> SocketAddr {
            rx.recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("the webhook logs the address of its {what}"))
                .parse()
                .expect("a socket address")
        };
        WebhookProcess {
            child,
            addr: logged(addr_rx, "webhooks"),
            probes: logged(probes_rx, "probes"),
            metrics: logged(metrics_rx, "metrics"),
            _dir: dir,
        }
    }

    pub fn sigterm(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// Waits up to 30 s for the process to exit; panics with `what` if it does not.
    pub fn wait_for_exit(&mut self, what: &str) -> std::process::ExitStatus {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "{what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
