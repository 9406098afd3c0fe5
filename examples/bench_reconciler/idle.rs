//! idle: what a converged leader asks the API server while nothing changes, read from the API
//! server's audit log (every request, Metadata level; see `tests/support/audit.rs`). The
//! benchmark makes no requests of its own meanwhile (its VirtualMachine watch, opened before,
//! stays open), and no component but the operator runs as a user outside `system:`.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};

use super::super::support::ControlPlane;

/// Requests received during `window`, by verb and resource, as requests per minute.
pub async fn measure(cp: &ControlPlane, window: Duration) -> Result<String> {
    let path = cp.dir().join("audit.log");
    let offset = std::fs::metadata(&path).context("the audit log")?.len();
    let from = Utc::now();
    tokio::time::sleep(window).await;
    let to = Utc::now();
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
        "{total} requests in {minutes:.1} min = {:.1}/min: {}",
        total as f64 / minutes,
        by.join(", ")
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
