//! idle: what a converged leader asks the API server while nothing changes, read from the API
//! server's audit log (every request, Metadata level; see `tests/support/audit.rs`). The
//! benchmark makes no requests of its own meanwhile (its VirtualMachine watch, opened before,
//! stays open), and no component but the operator runs as a user outside `system:`.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};

use super::super::replica::Replica;
use super::super::support::ControlPlane;

/// CPU time a process has used (user and system), from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name: state is the first, utime the 12th.
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let ticks: u64 = rest.next()?.parse::<u64>().ok()? + rest.next()?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_millis(ticks * 1000 / hz))
}

/// Requests received during `window`, by verb and resource, as requests per minute; and the
/// leader's reconciles (its resyncs) and CPU time meanwhile.
pub async fn measure(cp: &ControlPlane, leader: &Replica, window: Duration) -> Result<String> {
    let path = cp.dir().join("audit.log");
    let offset = std::fs::metadata(&path).context("the audit log")?.len();
    let (reconciles, cpu) = (leader.reconciles().await?, cpu_time(leader.proc.pid()));
    let from = Utc::now();
    tokio::time::sleep(window).await;
    let to = Utc::now();
    let reconciles = leader.reconciles().await? - reconciles;
    let cpu = cpu_time(leader.proc.pid())
        .zip(cpu)
        .map(|(b, a)| b.saturating_sub(a).as_secs_f64())
        .unwrap_or(f64::NAN);
    // The log backend writes as requests complete; let the last ones land.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut file = std::fs::File::open(&path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let counts = count(&text, from, to);
    let minutes = (to - from).num_milliseconds() as f64 / 60_000.0;
    let total: u64 = counts.values().sum();
    let by: Vec<String> = counts
        .iter()
        .map(|(k, v)| format!("{k} {:.1}", *v as f64 / minutes))
        .collect();
    Ok(format!(
        "{total} requests in {minutes:.1} min = {:.1}/min: {}; meanwhile {:.0} reconciles/min, {:.2} CPU s/min",
        total as f64 / minutes,
        by.join(", "),
        reconciles as f64 / minutes,
        cpu / minutes,
    ))
}

/// Requests received in [from, to] by a user outside `system:`, once each (a watch is logged
/// when it starts and when it ends), keyed "VERB resource[/subresource]" (or the path of a
/// non-resource request).
fn count(text: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> BTreeMap<String, u64> {
    let mut ids = HashSet::new();
    let mut out = BTreeMap::new();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let s = |p: &str| e.pointer(p).and_then(|v| v.as_str()).unwrap_or_default();
        if s("/user/username").starts_with("system:") || !ids.insert(s("/auditID").to_owned()) {
            continue;
        }
        let Ok(at) = DateTime::parse_from_rfc3339(s("/requestReceivedTimestamp")) else {
            continue;
        };
        if at < from || at > to {
            continue;
        }
        let what = match (s("/objectRef/resource"), s("/objectRef/subresource")) {
            ("", _) => s("/requestURI").split('?').next().unwrap_or("").to_owned(),
            (r, "") => r.to_owned(),
            (r, sub) => format!("{r}/{sub}"),
        };
        *out.entry(format!("{} {what}", s("/verb"))).or_insert(0) += 1;
    }
    out
}
