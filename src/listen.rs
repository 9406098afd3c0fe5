//! Binding the operator's listeners. `[::]` (what `:8443` means) is bound dual-stack, with
//! IPV6_V6ONLY off whatever the host's `net.ipv6.bindv6only` says, so IPv4 and IPv6 clients
//! both reach it; on a host without IPv6 it falls back to `0.0.0.0` on the same port.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

const BACKLOG: i32 = 1024;

/// Binds `addr`; `[::]:port` becomes one socket for IPv6 and IPv4.
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    if !(addr.is_ipv6() && addr.ip().is_unspecified()) {
        return listen(addr, false);
    }
    match listen(addr, true) {
        Ok(l) => Ok(l),
        // No IPv6 on this host (kernel without it, or ipv6.disable=1).
        Err(e) if ipv6_unavailable(&e) => listen(
            SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), addr.port()),
            false,
        ),
        Err(e) => Err(e),
    }
}

/// EAFNOSUPPORT on Linux (the operator's platform); std maps it to no specific `ErrorKind`.
const EAFNOSUPPORT: i32 = 97;

fn ipv6_unavailable(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AddrNotAvailable || e.raw_os_error() == Some(EAFNOSUPPORT)
}

fn listen(addr: SocketAddr, dual_stack: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if dual_stack {
        socket.set_only_v6(false)?;
    }
    // As std and tokio do: a restarted process rebinds at once.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// `:port` accepts IPv4 and, where the host has IPv6, IPv6 clients on one listener.
    #[tokio::test]
    async fn the_default_address_takes_ipv4_and_ipv6_clients() {
        let listener = bind(crate::config::default_bind(0))
            .await
            .expect("bind [::]:0");
        let port = listener.local_addr().expect("addr").port();
        let mut clients = vec![SocketAddr::from(([127, 0, 0, 1], port))];
        if listener.local_addr().expect("addr").is_ipv6() {
            clients.push(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port)));
        }
        for client in clients {
            let mut stream = tokio::net::TcpStream::connect(client)
                .await
                .unwrap_or_else(|e| panic!("connect {client}: {e}"));
            stream.write_all(b"x").await.expect("write");
            let (_, peer) = listener.accept().await.expect("accept");
            assert_eq!(
                peer.is_ipv4() || peer.ip().to_canonical().is_ipv4(),
                client.is_ipv4()
            );
        }
    }
}
