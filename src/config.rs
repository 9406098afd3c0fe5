//! Settings shared by the subcommands, parsed from flags and the environment. A bad value stops
//! start-up with a message that names the setting and the value.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Parses a bind address the way the Go operators write it: `:8443` means every interface.
pub fn parse_bind_address(s: &str) -> Result<SocketAddr, String> {
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_owned(),
    };
    full.parse::<SocketAddr>()
        .map_err(|_| format!("{s:?} is not an address such as :8443, 127.0.0.1:8443 or [::1]:8443"))
}

pub fn default_bind(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses() {
        assert_eq!(parse_bind_address(":8443").unwrap(), default_bind(8443));
        assert_eq!(
            parse_bind_address("127.0.0.1:9").unwrap().to_string(),
            "127.0.0.1:9"
        );
        assert_eq!(
            parse_bind_address("[::1]:9").unwrap().to_string(),
            "[::1]:9"
        );
        assert!(parse_bind_address("8443").unwrap_err().contains("\"8443\""));
        assert!(parse_bind_address(":99999").is_err());
    }
}
