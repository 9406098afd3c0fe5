//! etcd: its flags, its health, and its revision and compaction through the v3 JSON gateway.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::control_plane::{LOG_LINES, START_TIMEOUT, exited_error};
use super::process::Proc;
use super::{ControlPlane, Ports};

impl ControlPlane {
    /// etcd's current revision (the header of a range request, through its v3 JSON gateway).
    pub async fn etcd_revision(&self) -> Result<i64> {
        // Any key will do: the header carries the store's revision.
        let header = etcd_post(self.ports.etcd_client, "/v3/kv/range", r#"{"key":"AA=="}"#).await?;
        revision_of(&header)
    }

    /// Compacts etcd's history up to its current revision (physically, so it is gone before
    /// this returns): watches from any older resourceVersion get 410 Gone. Returns the revision.
    pub async fn etcd_compact(&self) -> Result<i64> {
        let revision = self.etcd_revision().await?;
        let body = format!(r#"{{"revision":"{revision}","physical":true}}"#);
        let answer = etcd_post(self.ports.etcd_client, "/v3/kv/compaction", &body).await?;
        revision_of(&answer).with_context(|| format!("compaction at {revision}"))?;
        Ok(revision)
    }
}

/// POSTs JSON to etcd's v3 gateway and returns the JSON answer (HTTP 200 only).
async fn etcd_post(port: u16, path: &str, body: &str) -> Result<serde_json::Value> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        stream.read_to_string(&mut response),
    )
    .await
    .context("etcd did not answer within 30 s")??;
    let (head, json) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("etcd {path}: no HTTP body in {response:?}"))?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("etcd {path}: {head}\n{json}");
    }
    serde_json::from_str(json).with_context(|| format!("etcd {path}: {json}"))
}

/// `header.revision` of an etcd gateway answer (a string, as int64s are in its JSON).
fn revision_of(answer: &serde_json::Value) -> Result<i64> {
    let revision = answer.pointer("/header/revision");
    revision
        .and_then(|r| match r {
            serde_json::Value::String(s) => s.parse().ok(),
            other => other.as_i64(),
        })
        .with_context(|| format!("no header.revision in {answer}"))
}

pub(super) fn etcd_args(dir: &Path, ports: &Ports) -> Vec<OsString> {
    let client = format!("http://127.0.0.1:{}", ports.etcd_client);
    let peer = format!("http://127.0.0.1:{}", ports.etcd_peer);
    [
        "--name=default".to_string(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        // The peer port is set too: its default 2380 would collide between parallel instances.
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=default={peer}"),
        "--logger=zap".to_string(),
        "--log-outputs=stderr".to_string(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

async fn etcd_health(port: u16) -> Result<bool> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(response.contains("\"health\":\"true\""))
}

pub(super) async fn wait_for_etcd(etcd: &mut Proc, port: u16) -> Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        exited_error(etcd)?;
        let last = match tokio::time::timeout(Duration::from_secs(5), etcd_health(port)).await {
            Ok(Ok(true)) => return Ok(()),
            Ok(Ok(false)) => "unhealthy".to_string(),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "health check timed out".to_string(),
        };
        if Instant::now() > deadline {
            bail!(
                "etcd not healthy on 127.0.0.1:{port} after {START_TIMEOUT:?} (last: {last})\n{}",
                etcd.log_tail(LOG_LINES)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
