//! One HTTP/1.1-over-rustls connection that shows what reqwest hides: its reuse, the TLS
//! version and the server's certificate.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

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
