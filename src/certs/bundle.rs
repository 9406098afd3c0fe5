//! The trusted CA bundle: every CA whose certificates may still be served. A new CA is added
//! before anything is signed by it; an old one leaves only once it has expired.

use chrono::{DateTime, Utc};

use super::x509::Cert;

/// `existing` plus `add`, without duplicates, without CAs expired at `now` and without
/// certificates that are not CAs; oldest first so a rotation appends at the end.
pub fn merge<'a>(
    existing: impl IntoIterator<Item = &'a Cert>,
    add: impl IntoIterator<Item = &'a Cert>,
    now: DateTime<Utc>,
) -> Vec<Cert> {
    let mut out: Vec<Cert> = Vec::new();
    for c in existing.into_iter().chain(add) {
        if c.is_ca && now < c.not_after && !out.contains(c) {
            out.push(c.clone());
        }
    }
    // A stable sort on age alone: CAs issued within the same second (times have second
    // resolution) keep their order, existing before added, so a rotation still appends.
    out.sort_by_key(|c| c.not_before);
    out
}

/// PEM text of the bundle, as stored in the ConfigMap and in `caBundle`.
pub fn encode(cas: &[Cert]) -> String {
    cas.iter().map(Cert::to_pem).collect()
}

/// When the next CA in `cas` expires and must leave the bundle.
pub fn next_expiry(cas: &[Cert]) -> Option<DateTime<Utc>> {
    cas.iter().map(|c| c.not_after).min()
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::certs::issue::issue_ca;

    fn ca(at: DateTime<Utc>, hours: i64) -> Cert {
        let p = issue_ca(at, TimeDelta::hours(hours)).unwrap();
        Cert::from_pem(p.cert_pem.as_bytes()).unwrap()
    }

    #[test]
    fn cas_issued_in_the_same_second_keep_existing_before_added() {
        let now = Utc::now();
        for _ in 0..16 {
            let (old, new) = (ca(now, 1), ca(now, 1));
            assert_eq!(merge([&old], [&new], now), vec![old.clone(), new.clone()]);
            // Merging again (what every later decision does) keeps the order: no rewrite churn.
            let again = merge(&merge([&old], [&new], now), [], now);
            assert_eq!(again, vec![old, new]);
        }
    }

    #[test]
    fn merge_adds_dedupes_orders_and_prunes_expired() {
        let now = Utc::now();
        let old = ca(now - TimeDelta::hours(150), 168);
        let new = ca(now, 168);
        let expired = ca(now - TimeDelta::hours(200), 168);
        let merged = merge([&new, &old, &expired], [&new, &old], now);
        assert_eq!(merged, vec![old.clone(), new.clone()]);
        // The old CA stays until it expires, and not a moment longer.
        assert_eq!(
            merge(&merged, [], old.not_after - TimeDelta::seconds(1)).len(),
            2
        );
        assert_eq!(merge(&merged, [], old.not_after), vec![new.clone()]);
        assert_eq!(next_expiry(&merged), Some(old.not_after));
    }

    #[test]
    fn encode_round_trips() {
        let now = Utc::now();
        let a = ca(now - TimeDelta::hours(1), 168);
        let b = ca(now, 168);
        let pem = encode(&[a.clone(), b.clone()]);
        assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 2);
        assert!(!pem.contains('\r'));
        let (certs, bad) = Cert::all_from_pem(pem.as_bytes());
        assert_eq!((certs, bad), (vec![a, b], 0));
    }

    #[test]
    fn corrupted_blocks_are_counted_not_fatal() {
        let now = Utc::now();
        let a = ca(now, 168);
        let text = format!(
            "{}-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n",
            a.to_pem()
        );
        let (certs, bad) = Cert::all_from_pem(text.as_bytes());
        assert_eq!(certs, vec![a]);
        assert_eq!(bad, 1);
        assert_eq!(Cert::all_from_pem(b"garbage").0.len(), 0);
    }
}
