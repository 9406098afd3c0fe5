//! HTTP/2 frames written and read by hand, for what a client library will not do on purpose:
//! reset streams as fast as it opens them, or show the server's GOAWAY.

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const ACK: u8 = 0x1;
pub const CANCEL: u32 = 0x8;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// A POST to `path` (HPACK, no Huffman, nothing indexed by us), with its body's type and length.
pub fn post_headers(path: &str, content_length: usize) -> Vec<u8> {
    let literal = |out: &mut Vec<u8>, value: &[u8]| {
        out.push(value.len() as u8);
        out.extend(value);
    };
    // :method POST, :scheme https (static table entries 3 and 7).
    let mut block = vec![0x83, 0x87];
    // :path (name 4), content-type (31) and content-length (28), values literal.
    block.push(0x04);
    literal(&mut block, path.as_bytes());
    block.extend([0x0f, 31 - 15]);
    literal(&mut block, b"application/json");
    block.extend([0x0f, 28 - 15]);
    literal(&mut block, content_length.to_string().as_bytes());
    block
}

/// A TLS connection to `addr` from `tcp` offering only ALPN `h2`, its preface and an empty
/// SETTINGS sent.
pub async fn open(
    tcp: TcpStream,
    config: std::sync::Arc<rustls::ClientConfig>,
) -> TlsStream<TcpStream> {
    let name = ServerName::IpAddress(tcp.peer_addr().expect("peer").ip().into());
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("TLS");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut start = PREFACE.to_vec();
    start.extend(frame(SETTINGS, 0, 0, &[]));
    tls.write_all(&start).await.expect("preface");
    tls
}

/// The next frame; SETTINGS and PING are acknowledged on the way, as a client must. None once
/// the server closed.
pub async fn next(tls: &mut TlsStream<TcpStream>) -> Option<Frame> {
    let mut head = [0u8; 9];
    tls.read_exact(&mut head).await.ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    tls.read_exact(&mut payload).await.ok()?;
    let (kind, flags) = (head[3], head[4]);
    let ack = match (kind, flags & ACK) {
        (SETTINGS, 0) => Some(frame(SETTINGS, ACK, 0, &[])),
        (PING, 0) => Some(frame(PING, ACK, 0, &payload)),
        _ => None,
    };
    if let Some(ack) = ack {
        let _ = tls.write_all(&ack).await;
    }
    Some(Frame {
        kind,
        flags,
        stream,
        payload,
    })
}

/// The error code of a GOAWAY frame.
pub fn goaway_code(f: &Frame) -> u32 {
    u32::from_be_bytes([f.payload[4], f.payload[5], f.payload[6], f.payload[7]])
}
