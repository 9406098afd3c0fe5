//! A loopback TCP proxy that can go silent: once stalled it still accepts connections and keeps
//! the open ones open, but forwards nothing in either direction, as a hung API server (or a
//! black-holed network path) looks to a client: no refusal, no reset, no answer.

#![allow(dead_code)]

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct StallingProxy {
    addr: SocketAddr,
    stalled: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl StallingProxy {
    /// Forwards 127.0.0.1:<port> to `upstream` until [`StallingProxy::stall`].
    pub async fn start(upstream: SocketAddr) -> StallingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (stalled, _) = watch::channel(false);
        let gate = stalled.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let gate = gate.subscribe();
                tokio::spawn(async move {
                    // Held, not refused, while stalled.
                    if !open(&gate) {
                        return hold(client).await;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(pipe(cr, sw, gate.clone()), pipe(sr, cw, gate));
                });
            }
        });
        StallingProxy {
            addr,
            stalled,
            task,
        }
    }

    /// `https://127.0.0.1:<port>`, to put in a kubeconfig in place of the API server's URL.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// From now on nothing passes; connections stay open.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn open(gate: &watch::Receiver<bool>) -> bool {
    !*gate.borrow()
}

/// Keeps a connection open without ever answering.
async fn hold(client: TcpStream) {
    let mut client = client;
    let mut sink = [0u8; 4096];
    while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// Copies `from` to `to` until either side closes; once stalled, reads but drops everything and
/// never closes `to` (a silent peer, not a failing one).
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, gate: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !open(&gate) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    if open(&gate) {
        let _ = to.shutdown().await;
    } else {
        // Stay silent, never close, while the test runs.
        std::future::pending::<()>().await;
    }
}
