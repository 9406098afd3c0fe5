//! failover: the leader is SIGKILLed while a second replica follows, and a Machine is changed
//! right after; the time until the follower's write for it shows on the VM's watch. The Lease
//! was last renewed somewhere in the half-duration before the kill, so the follower can take
//! it over 7.5-15 s after the kill with the default 15 s (`--leader-election-lease-duration`).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;

use kubevirt_operator::leader::LEASE_NAME;

use super::super::replica::Replica;
use super::super::support::OPERATOR_NAMESPACE;
use super::latency::{CHANGED_CORES, VmWatch, change_cores};

/// Cores the changed Machine gets (none of the change mode's Machines has them).
const FAILOVER_CORES: i64 = CHANGED_CORES + 1;

fn holder(lease: &Lease) -> (Option<String>, Option<Timestamp>, Option<i32>) {
    let spec = lease.spec.clone().unwrap_or_default();
    (
        spec.holder_identity,
        spec.renew_time.map(|t| t.0),
        spec.lease_duration_seconds,
    )
}

pub async fn measure(
    client: &Client,
    ns: &str,
    n: usize,
    leader: &mut Replica,
    mut follower: Replica,
    watch: &VmWatch,
) -> Result<String> {
    follower
        .wait_logged("waiting for leadership", Duration::from_secs(120))
        .await?;
    let leases = Api::<Lease>::namespaced(client.clone(), OPERATOR_NAMESPACE);
    let (held_by, renewed, duration) = holder(&leases.get(LEASE_NAME).await?);
    if held_by.as_deref() != Some("a") {
        bail!("the Lease is held by {held_by:?}, not a");
    }
    let machine = format!("m-{:05}", n.saturating_sub(1));

    let killed = Instant::now();
    let renewed_before = renewed
        .map(|r| (Timestamp::now().as_millisecond() - r.as_millisecond()) as f64 / 1000.0)
        .unwrap_or(f64::NAN);
    leader.proc.kill();
    change_cores(client, ns, &machine, FAILOVER_CORES).await?;
    let answered = killed.elapsed();

    let taken = async {
        loop {
            if let Ok(l) = leases.get(LEASE_NAME).await
                && holder(&l).0.as_deref() == Some("b")
            {
                return killed.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let written = async {
        let at = watch
            .wait_all(std::slice::from_ref(&machine), Some(FAILOVER_CORES))
            .await?;
        anyhow::Ok(at.first().map(|t| *t - killed).unwrap_or_default())
    };
    let (taken, written) = tokio::join!(taken, written);
    let written = written?;
    follower
        .wait_reconciles(n as u64, Duration::from_secs(1800))
        .await?;
    let first_pass = killed.elapsed();
    follower.proc.kill();
    Ok(format!(
        "SIGKILL → VM of the changed Machine updated by b {:.2} s (Lease taken by b at {:.2} s, then {:.2} s to the write); change answered at {:.3} s; Lease last renewed {renewed_before:.1} s before the kill, duration {} s; b's first pass of {n} reconciles done by {:.1} s",
        written.as_secs_f64(),
        taken.as_secs_f64(),
        (written.saturating_sub(taken)).as_secs_f64(),
        answered.as_secs_f64(),
        duration.map(|d| d.to_string()).unwrap_or_default(),
        first_pass.as_secs_f64(),
    ))
}
