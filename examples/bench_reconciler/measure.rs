//! What the reconciler benchmark reads: a process's memory from `/proc`, and the writes the API
//! server served, from its own metrics.

use std::collections::BTreeMap;

use anyhow::Result;
use kube::Client;

/// A `/proc/<pid>/status` field (`VmHWM`, `VmRSS`), in KiB.
pub fn proc_status(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Write requests the API server served, by verb and resource, from its own metrics.
pub async fn writes(client: &Client) -> Result<BTreeMap<String, u64>> {
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await?;
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let label = |k: &str| {
            line.split(&format!("{k}=\""))
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("")
                .to_owned()
        };
        let verb = label("verb");
        if !matches!(verb.as_str(), "POST" | "PATCH" | "PUT" | "DELETE" | "APPLY") {
            continue;
        }
        let resource = match label("subresource").as_str() {
            "" => label("resource"),
            sub => format!("{}/{sub}", label("resource")),
        };
        let count: f64 = line
            .rsplit(' ')
            .next()
            .unwrap_or("0")
            .parse()
            .unwrap_or(0.0);
        *out.entry(format!("{verb} {resource}")).or_insert(0) += count as u64;
    }
    Ok(out)
}

/// Writes to what each Machine gets (the Machine, its status, claims and VM), per Machine;
/// the floor makes three (claim, VM, status).
pub fn writes_per_machine(writes: &BTreeMap<String, u64>, n: usize) -> f64 {
    let per_machine = [
        "machines",
        "machines/status",
        "persistentvolumeclaims",
        "virtualmachines",
    ];
    let total: u64 = writes
        .iter()
        .filter(|(k, _)| {
            k.split_once(' ')
                .is_some_and(|(_, resource)| per_machine.contains(&resource))
        })
        .map(|(_, v)| v)
        .sum();
    total as f64 / n.max(1) as f64
}
