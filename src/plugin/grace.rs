//! `stop --grace` (pure): how long the guest has to shut down, in KubeVirt's whole seconds,
//! within bounds.

use std::time::Duration;

use crate::config::parse_duration;

/// The longest grace period `stop --grace` takes: a guest that needs longer is better stopped
/// by its own shutdown, and a typo (`300h`) should not hold a VM for weeks.
pub const MAX_GRACE: Duration = Duration::from_secs(24 * 60 * 60);

/// `--grace`: a duration in whole seconds (`300s`, `5m`, `1h30m`), 1 s to [`MAX_GRACE`].
/// Zero is `forcestop`, said so.
pub fn parse_grace(s: &str) -> Result<u64, String> {
    let zero = s.trim() == "0"
        || s.trim()
            .parse::<k8s_openapi::jiff::SignedDuration>()
            .is_ok_and(|d| d.is_zero());
    if zero {
        return Err(format!(
            "{s:?}: a grace period of zero is `forcestop`, not `stop`"
        ));
    }
    let d = parse_duration(s)?;
    if d.subsec_nanos() != 0 {
        return Err(format!(
            "{s:?} must be whole seconds (KubeVirt counts seconds)"
        ));
    }
    if d > MAX_GRACE {
        return Err(format!("{s:?} is longer than the most allowed, 24h"));
    }
    Ok(d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_period_is_whole_seconds_from_1s_to_24h() {
        let cases = [
            ("300s", Ok(300)),
            ("5m", Ok(300)),
            ("1s", Ok(1)),
            ("24h", Ok(86_400)),
            ("1h30m", Ok(5_400)),
            ("0", Err("forcestop")),
            ("0s", Err("forcestop")),
            ("24h1s", Err("24h")),
            ("1.5s", Err("whole seconds")),
            ("500ms", Err("whole seconds")),
            ("-5s", Err("longer than zero")),
            ("soon", Err("not a duration")),
            ("", Err("not a duration")),
        ];
        for (input, want) in cases {
            match (parse_grace(input), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{input}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{input}: {got}"),
                (got, want) => panic!("{input}: {got:?}, want {want:?}"),
            }
        }
    }
}
