//! `vnc`: a local port on 127.0.0.1 for any VNC viewer; each connection is relayed to its own
//! WebSocket on the Machine's `vnc` subresource. Loopback only: the relay carries the user's
//! rights, which another host on the network must not borrow.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use kube::Client;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::connect::{PluginError, open_stream};
use super::pump::pump;

/// Viewers relayed at once; more wait for one to leave. The server bounds sessions too; this
/// keeps a misbehaving local program from opening streams without end.
pub const MAX_VIEWERS: usize = 4;

/// What the user is told once the port listens.
pub fn announcement(addr: SocketAddr, machine: &str, namespace: &str, proxy_only: bool) -> String {
    if proxy_only {
        // virtctl's `--proxy-only` output, for scripts that start a viewer themselves.
        serde_json::json!({ "port": addr.port() }).to_string()
    } else {
        format!(
            "VNC of Machine {namespace}/{machine} at {addr} (vnc://{addr}): point a VNC viewer \
             at it. Ctrl+C ends."
        )
    }
}

/// Listens on 127.0.0.1:`port` and relays viewers until interrupted; `announce` is told the
/// address once it listens.
pub async fn serve(
    client: &Client,
    path: &str,
    port: u16,
    announce: impl FnOnce(SocketAddr) -> String,
) -> Result<(), PluginError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|e| PluginError::Local(format!("listening on 127.0.0.1:{port}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| PluginError::Local(e.to_string()))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", announce(addr)).map_err(|e| PluginError::Local(e.to_string()))?;
    stdout
        .flush()
        .map_err(|e| PluginError::Local(e.to_string()))?;
    let slots = Arc::new(Semaphore::new(MAX_VIEWERS));
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.map_err(|e| PluginError::Local(e.to_string()))?,
            _ = &mut interrupted => return Ok(()),
        };
        let (viewer, from) = tokio::select! {
            accepted = listener.accept() => accepted.map_err(|e| PluginError::Local(format!("accepting a viewer: {e}")))?,
            _ = &mut interrupted => return Ok(()),
        };
        let client = client.clone();
        let path = path.to_owned();
        tokio::spawn(async move {
            if let Err(e) = relay(&client, &path, viewer).await {
                eprintln!("viewer {from}: {e}");
            }
            drop(slot);
        });
    }
}

/// One viewer's connection, relayed until either side ends it.
async fn relay(client: &Client, path: &str, viewer: TcpStream) -> Result<(), PluginError> {
    let mut stream = open_stream(client, path, "vnc").await?;
    let (read, write) = viewer.into_split();
    pump(&mut stream, read, write, false).await?;
    Ok(())
}
