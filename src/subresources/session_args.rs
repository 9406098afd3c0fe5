//! The settings of console and VNC sessions (`run` flags and their environment variables).

use std::time::Duration;

use clap::Args;

use super::sessions::Limits;
use crate::config::parse_duration;

/// Sessions this replica may hold at most: each holds one of kube-apiserver's connections to
/// the aggregated API's listener (64 per client address), and the buttons need some too.
pub const MAX_TOTAL: usize = 48;

#[derive(Args, Debug, Clone)]
pub struct SessionArgs {
    /// Console and VNC sessions one user may hold open at once on a replica (1 to 48).
    #[arg(long, env = "CONSOLE_MAX_SESSIONS_PER_USER", value_name = "CONSOLE_MAX_SESSIONS_PER_USER",
          default_value_t = 4, value_parser = parse_count)]
    pub console_max_sessions_per_user: usize,
    /// Console and VNC sessions a replica holds open at once, all users together (1 to 48:
    /// each holds a connection from kube-apiserver, which may open 64).
    #[arg(long, env = "CONSOLE_MAX_SESSIONS", value_name = "CONSOLE_MAX_SESSIONS",
          default_value_t = 32, value_parser = parse_count)]
    pub console_max_sessions: usize,
    /// A console or VNC session with no byte either way for this long is closed, e.g. 15m.
    #[arg(long, env = "CONSOLE_IDLE_TIMEOUT", value_name = "CONSOLE_IDLE_TIMEOUT",
          default_value = "15m", value_parser = parse_duration)]
    pub console_idle_timeout: Duration,
    /// A console or VNC session is closed this long after it opened, busy or not, e.g. 4h.
    #[arg(long, env = "CONSOLE_MAX_SESSION_LENGTH", value_name = "CONSOLE_MAX_SESSION_LENGTH",
          default_value = "4h", value_parser = parse_duration)]
    pub console_max_session_length: Duration,
}

impl SessionArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            per_user: self.console_max_sessions_per_user,
            total: self.console_max_sessions,
            idle: self.console_idle_timeout,
            max_length: self.console_max_session_length,
        }
    }
}

fn parse_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_TOTAL).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} is not between 1 and {MAX_TOTAL}")),
        Err(e) => Err(format!("{s:?} is not a count: {e}")),
    }
}

#[cfg(test)]
#[test]
fn counts_are_bounded_by_the_listeners_connections() {
    assert_eq!(parse_count("4"), Ok(4));
    assert!(parse_count("0").is_err());
    assert!(parse_count("49").is_err());
    assert!(parse_count("many").is_err());
    const { assert!(MAX_TOTAL < super::serve::LIMITS.max_connections_per_client) };
}
