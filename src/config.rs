//! Settings shared by the subcommands, parsed from flags and the environment. A bad value stops
//! start-up with a message that names the setting and the value.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use crate::tls::listener::Limits;

mod image;
mod scoped;
pub use image::parse_image;
pub use scoped::watch_each;

/// Parses a bind address the way the Go operators write it: `:8443` means every interface, IPv6
/// and IPv4 (`[::]:8443`, bound dual-stack by [`crate::listen::bind`], which falls back to
/// `0.0.0.0` on hosts without IPv6).
pub fn parse_bind_address(s: &str) -> Result<SocketAddr, String> {
    let full = match s.strip_prefix(':') {
        Some(port) => format!("[::]:{port}"),
        None => s.to_owned(),
    };
    full.parse::<SocketAddr>()
        .map_err(|_| format!("{s:?} is not an address such as :8443, 127.0.0.1:8443 or [::1]:8443"))
}

/// A per-client connection cap: 1 up to the listener's cap of all connections.
pub fn parse_per_client(limits: Limits) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=limits.max_connections as u64)
}

pub fn default_bind(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)
}

/// The longest duration any setting takes (certificate lifetimes are the longest ones).
const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 24 * 3600);

/// The one duration syntax of every setting, as Go and kubectl write durations: `30s`, `5m`,
/// `1m30s`, `168h`, `1.5h`, `500ms` (ISO 8601 such as `PT30S` works too). Zero, negative and
/// longer than 100 years are refused.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let parsed: k8s_openapi::jiff::SignedDuration = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration such as 30s, 5m, 1m30s or 168h"))?;
    if parsed.is_zero() || parsed.is_negative() {
        return Err(format!("{s:?} must be longer than zero"));
    }
    match std::time::Duration::try_from(parsed) {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(format!("{s:?} is longer than 100 years")),
    }
}

/// [`parse_duration`], where zero (`0s`, or `0` as Go writes it) is allowed too: a bound that
/// may be switched off.
pub fn parse_duration_or_zero(s: &str) -> Result<std::time::Duration, String> {
    let zero = s.trim() == "0"
        || s.trim()
            .parse::<k8s_openapi::jiff::SignedDuration>()
            .is_ok_and(|d| d.is_zero());
    if zero {
        Ok(std::time::Duration::ZERO)
    } else {
        parse_duration(s)
    }
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

/// The slowest request rate accepted: one request every 100 s. Slower rates are no use to a
/// controller, and the wait for one token at rates near zero overflows a `Duration`.
pub const MIN_QPS: f64 = 0.01;

/// Parses a request rate: a finite number of at least [`MIN_QPS`].
pub fn parse_qps(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= MIN_QPS => Ok(v),
        Ok(v) if v.is_finite() && v > 0.0 => Err(format!(
            "{s:?} is below the slowest rate accepted, {MIN_QPS} requests per second"
        )),
        _ => Err(format!("{s:?} is not a number of at least {MIN_QPS}")),
    }
}

/// Parses a DNS-1123 label (a Service name), at most 63 characters.
pub fn parse_dns_label(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63)"
        ))
    }
}

/// Parses a DNS-1123 subdomain (an object name such as a webhook configuration's): labels of
/// [`parse_dns_label`]'s kind joined by dots, at most 253 characters.
pub fn parse_dns_subdomain(s: &str) -> Result<String, String> {
    if s.len() <= 253 && s.split('.').all(|l| parse_dns_label(l).is_ok()) {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253)"
        ))
    }
}

/// Which namespaces the reconciler watches: all, or the listed ones (`WATCH_NAMESPACES=a,b`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchScope {
    All,
    Namespaces(Vec<String>),
}

/// Parses `--watch-namespaces`: a comma-separated list of namespace names; empty means all.
pub fn parse_watch_namespaces(s: &str) -> Result<WatchScope, String> {
    let mut names = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let name = parse_dns_label(part).map_err(|e| format!("namespace {e}"))?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(if names.is_empty() {
        WatchScope::All
    } else {
        WatchScope::Namespaces(names)
    })
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
        assert_eq!(parse_qps("50").unwrap(), 50.0);
        assert_eq!(parse_qps("0.5").unwrap(), 0.5);
        assert_eq!(parse_qps("0.01").unwrap(), 0.01);
        for bad in ["0", "-1", "NaN", "inf", "x"] {
            assert!(parse_qps(bad).is_err(), "{bad}");
        }
        // Accepted before, then a panic in the rate limiter.
        assert!(parse_qps("1e-20").unwrap_err().contains("slowest rate"));
    }

    #[test]
    fn one_duration_syntax_for_every_setting() {
        use std::time::Duration;
        assert_eq!(
            parse_duration("168h").unwrap(),
            Duration::from_secs(168 * 3600)
        );
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("2h45m30s").unwrap(),
            Duration::from_secs(9930)
        );
        assert!(
            parse_duration("1000000h")
                .unwrap_err()
                .contains("100 years")
        );
    }

    #[test]
    fn service_names_and_watch_scopes() {
        assert_eq!(
            parse_dns_label("dev-kubevirt-operator-webhook").unwrap(),
            "dev-kubevirt-operator-webhook"
        );
        for bad in ["", "Upper", "-a", "a-", "a.b", &"a".repeat(64)] {
            assert!(parse_dns_label(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_watch_namespaces("").unwrap(), WatchScope::All);
        assert_eq!(
            parse_watch_namespaces(" a, b ,a,").unwrap(),
            WatchScope::Namespaces(vec!["a".into(), "b".into()])
        );
        assert!(
            parse_watch_namespaces("a,B")
                .unwrap_err()
                .contains("namespace \"B\"")
        );
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
