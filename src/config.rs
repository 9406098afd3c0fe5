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

/// Parses a duration the way Go and kubectl write them: `30s`, `5m`, `1m30s`, `1h`, `500ms`
/// (ISO 8601 such as `PT30S` works too). Zero and negative durations are refused.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let parsed: k8s_openapi::jiff::SignedDuration = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration such as 30s, 5m or 1m30s"))?;
    if parsed.is_zero() || parsed.is_negative() {
        return Err(format!("{s:?} must be longer than zero"));
    }
    std::time::Duration::try_from(parsed).map_err(|_| format!("{s:?} is out of range"))
}

/// Parses a Lease duration: whole seconds, at least 10s (the holder renews at half of it and
/// steps down 3s before it runs out, so shorter Leases would leave no room for a late renewal).
pub fn parse_lease_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d.subsec_nanos() != 0 {
        return Err(format!("{s:?} must be whole seconds"));
    }
    if d < std::time::Duration::from_secs(10) {
        return Err(format!("{s:?} must be at least 10s"));
    }
    Ok(d)
}

/// Parses a rate that must be a finite number above zero.
pub fn parse_positive_f64(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number above zero")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lease_durations_are_whole_seconds_of_at_least_ten() {
        use std::time::Duration;
        assert_eq!(
            super::parse_lease_duration("15s"),
            Ok(Duration::from_secs(15))
        );
        assert_eq!(
            super::parse_lease_duration("1m"),
            Ok(Duration::from_secs(60))
        );
        assert!(
            super::parse_lease_duration("9s")
                .unwrap_err()
                .contains("at least 10s")
        );
        assert!(
            super::parse_lease_duration("15.5s")
                .unwrap_err()
                .contains("whole seconds")
        );
        assert!(super::parse_lease_duration("soon").is_err());
    }

    use super::*;

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(
            parse_duration("0s")
                .unwrap_err()
                .contains("longer than zero")
        );
        assert!(parse_duration("soon").unwrap_err().contains("\"soon\""));
        assert!(parse_duration("30").is_err(), "a unit is required");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_positive_f64("50").unwrap(), 50.0);
        assert_eq!(parse_positive_f64("0.5").unwrap(), 0.5);
        for bad in ["0", "-1", "NaN", "inf", "x"] {
            assert!(parse_positive_f64(bad).is_err(), "{bad}");
        }
    }

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
