//! The leader's own proof that it still holds the Lease.
//!
//! kube-lease-manager keeps reporting leadership while it cannot reach the API server, even past
//! the Lease's expiry, when another replica (through another API server) may already have taken
//! over: two reconcilers would then write the same objects. So the leader reads its Lease itself
//! and stops its work shortly before the hold it last saw runs out, unless it has seen a renewal
//! by then (client-go's leader election stops at its renew deadline for the same reason).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;

use super::LEASE_NAME;

/// Work stops this long before the hold runs out, leaving room to wind down.
pub const MARGIN: Duration = Duration::from_secs(3);
/// How often the leader reads its Lease.
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// Until when the Lease, as read, is held by `identity`: its renewTime plus its duration. None
/// when another identity (or nobody) holds it, or it carries no renewal.
pub fn held_until(lease: &Lease, identity: &str) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = spec.renew_time.as_ref()?.0;
    let seconds = spec.lease_duration_seconds?;
    renewed
        .checked_add(SignedDuration::from_secs(seconds.into()))
        .ok()
}

/// Whether work may go on at `now`, given the hold last confirmed.
pub fn may_lead(held_until: Option<Timestamp>, now: Timestamp) -> bool {
    let margin = SignedDuration::try_from(MARGIN).unwrap_or(SignedDuration::ZERO);
    held_until.is_some_and(|until| now.checked_add(margin).is_ok_and(|t| t < until))
}

/// Reads the Lease until it shows a hold by `identity` that leaves time to work; returns it.
pub async fn confirmed(leases: &Api<Lease>, identity: &str) -> Timestamp {
    loop {
        match read(leases, identity).await {
            Ok(Some(until)) if may_lead(Some(until), Timestamp::now()) => return until,
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "cannot read the Lease"),
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
}

/// Resolves when the hold can no longer be confirmed in time: the Lease names someone else, or
/// no renewal has been seen by `MARGIN` before the last one runs out.
pub async fn lapsed(leases: &Api<Lease>, identity: &str, mut until: Timestamp) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        match read(leases, identity).await {
            Ok(Some(renewed)) => until = until.max(renewed),
            Ok(None) => return,
            // Unreachable: the last confirmed hold stands until it runs out.
            Err(e) => tracing::debug!(error = %e, "cannot read the Lease"),
        }
        if !may_lead(Some(until), Timestamp::now()) {
            return;
        }
    }
}

/// The hold the Lease shows for `identity` (None: absent, or someone else's).
async fn read(leases: &Api<Lease>, identity: &str) -> Result<Option<Timestamp>, kube::Error> {
    let lease = leases.get_opt(LEASE_NAME).await?;
    Ok(lease.and_then(|l| held_until(&l, identity)))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::*;

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn lease(holder: Option<&str>, renewed: Option<i64>, duration: Option<i32>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: renewed.map(|s| MicroTime(t(s))),
                lease_duration_seconds: duration,
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn the_hold_is_the_renewal_plus_the_duration_for_its_holder_only() {
        assert_eq!(
            held_until(&lease(Some("a"), Some(10), Some(15)), "a"),
            Some(t(25))
        );
        assert_eq!(held_until(&lease(Some("b"), Some(10), Some(15)), "a"), None);
        assert_eq!(held_until(&lease(None, Some(10), Some(15)), "a"), None);
        assert_eq!(held_until(&lease(Some("a"), None, Some(15)), "a"), None);
        assert_eq!(held_until(&lease(Some("a"), Some(10), None), "a"), None);
        assert_eq!(held_until(&Lease::default(), "a"), None);
    }

    #[test]
    fn work_stops_a_margin_before_the_hold_runs_out() {
        let until = Some(t(25));
        assert!(may_lead(until, t(10)));
        assert!(may_lead(until, t(21)));
        // 3 s margin: at 22 s the hold has only 3 s left.
        assert!(!may_lead(until, t(22)));
        assert!(!may_lead(until, t(25)));
        assert!(!may_lead(until, t(40)));
        assert!(!may_lead(None, t(0)));
    }
}
