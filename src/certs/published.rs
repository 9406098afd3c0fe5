//! When the webhook configurations received their caBundle, recorded in the cluster: every write
//! that changes a configuration's caBundle stamps it with [`CA_BUNDLE_WRITTEN_ANNOTATION`] in the
//! same request; writes that leave the caBundle as it was keep the stamp. The publish grace is
//! counted from the later of the two stamps, so it survives a change of leader. Pure.

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::CA_BUNDLE_WRITTEN_ANNOTATION;
use super::observed::{Observed, Stored, ca_bundle_written_at};

/// The configuration's caBundles, webhook by webhook.
fn bundles<'a>(
    configs: impl Iterator<Item = &'a WebhookClientConfig>,
) -> Vec<Option<&'a ByteString>> {
    configs.map(|c| c.ca_bundle.as_ref()).collect()
}

fn mutating_bundles(c: &MutatingWebhookConfiguration) -> Vec<Option<&ByteString>> {
    bundles(c.webhooks.iter().flatten().map(|h| &h.client_config))
}

fn validating_bundles(c: &ValidatingWebhookConfiguration) -> Vec<Option<&ByteString>> {
    bundles(c.webhooks.iter().flatten().map(|h| &h.client_config))
}

/// The stamp `desired` is written with: the live one when the caBundles stay the same and it has
/// one, else `now`.
fn stamp(
    desired: &mut ObjectMeta,
    live: Option<&ObjectMeta>,
    same_bundles: bool,
    now: DateTime<Utc>,
) {
    let kept = live
        .filter(|_| same_bundles)
        .and_then(ca_bundle_written_at)
        .unwrap_or(now);
    desired.annotations.get_or_insert_default().insert(
        CA_BUNDLE_WRITTEN_ANNOTATION.to_owned(),
        kept.to_rfc3339_opts(SecondsFormat::Secs, true),
    );
}

pub fn stamp_mutating(
    desired: &mut MutatingWebhookConfiguration,
    live: Option<&MutatingWebhookConfiguration>,
    now: DateTime<Utc>,
) {
    let same = live.is_some_and(|l| mutating_bundles(l) == mutating_bundles(desired));
    stamp(&mut desired.metadata, live.map(|l| &l.metadata), same, now);
}

pub fn stamp_validating(
    desired: &mut ValidatingWebhookConfiguration,
    live: Option<&ValidatingWebhookConfiguration>,
    now: DateTime<Utc>,
) {
    let same = live.is_some_and(|l| validating_bundles(l) == validating_bundles(desired));
    stamp(&mut desired.metadata, live.map(|l| &l.metadata), same, now);
}

/// When both webhook configurations last received their caBundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// The later of the two stamps (configurations not managed by us are not waited for).
    At(DateTime<Utc>),
    /// One of ours carries no readable stamp (written by an older version, or edited).
    Unrecorded,
    /// Neither configuration is ours.
    NotOurs,
}

pub fn published(observed: &Observed) -> Published {
    let stamps = [
        stamp_of(&observed.mutating, |c| &c.metadata),
        stamp_of(&observed.validating, |c| &c.metadata),
    ];
    let mut latest = None;
    for s in stamps.into_iter().flatten() {
        match s {
            Some(at) => latest = latest.max(Some(at)),
            None => return Published::Unrecorded,
        }
    }
    latest.map_or(Published::NotOurs, Published::At)
}

/// None: not ours to wait for; Some(None): ours without a stamp.
fn stamp_of<T>(
    stored: &Stored<T>,
    meta: impl Fn(&T) -> &ObjectMeta,
) -> Option<Option<DateTime<Utc>>> {
    match stored {
        Stored::Foreign => None,
        Stored::Ok(live) => Some(ca_bundle_written_at(meta(live))),
        Stored::Missing | Stored::Unreadable(_) => Some(None),
    }
}

/// Whether a live configuration needs writing only to record its stamp.
pub fn unstamped(meta: &ObjectMeta) -> bool {
    ca_bundle_written_at(meta).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::config::{Lifetimes, RenewBefore, Settings};
    use crate::certs::webhook_config;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn settings() -> Settings {
        let h = |n: u64| std::time::Duration::from_secs(n * 3600);
        let l = Lifetimes::new(h(168), h(24), RenewBefore::Percent(20)).unwrap();
        Settings::new("kubevirt-operator-system", None, l).unwrap()
    }

    fn stamped(bundle: &[u8], at: Option<DateTime<Utc>>) -> MutatingWebhookConfiguration {
        let mut c = webhook_config::mutating(&settings(), bundle);
        if let Some(at) = at {
            stamp_mutating(&mut c, None, at);
        }
        c
    }

    #[test]
    fn a_write_keeps_the_stamp_only_while_the_ca_bundle_stays_the_same() {
        let live = stamped(b"A", Some(t(0)));
        let cases = [
            // (desired caBundle, live, expected stamp)
            (&b"A"[..], Some(&live), t(0)),
            (&b"A+B"[..], Some(&live), t(60)),
            (&b"A"[..], None, t(60)),
        ];
        for (bundle, live, expected) in cases {
            let mut desired = webhook_config::mutating(&settings(), bundle);
            stamp_mutating(&mut desired, live, t(60));
            assert_eq!(ca_bundle_written_at(&desired.metadata), Some(expected));
        }
        // Unstamped live, same caBundle: stamped now.
        let mut desired = webhook_config::mutating(&settings(), b"A");
        stamp_mutating(&mut desired, Some(&stamped(b"A", None)), t(60));
        assert_eq!(ca_bundle_written_at(&desired.metadata), Some(t(60)));
    }

    #[test]
    fn published_is_the_later_stamp_of_the_configurations_we_own() {
        let validating = |at: Option<DateTime<Utc>>| {
            let mut c = webhook_config::validating(&settings(), b"A");
            if let Some(at) = at {
                stamp_validating(&mut c, None, at);
            }
            Stored::Ok(c)
        };
        let observed = |m: Stored<MutatingWebhookConfiguration>, v| Observed {
            ca: Stored::Missing,
            serving: Stored::Missing,
            bundle: Stored::Missing,
            mutating: m,
            validating: v,
        };
        let cases = [
            (
                Stored::Ok(stamped(b"A", Some(t(0)))),
                validating(Some(t(5))),
                Published::At(t(5)),
            ),
            (
                Stored::Ok(stamped(b"A", Some(t(9)))),
                validating(Some(t(5))),
                Published::At(t(9)),
            ),
            (Stored::Foreign, validating(Some(t(5))), Published::At(t(5))),
            (
                Stored::Ok(stamped(b"A", None)),
                validating(Some(t(5))),
                Published::Unrecorded,
            ),
            (
                Stored::Missing,
                validating(Some(t(5))),
                Published::Unrecorded,
            ),
            (Stored::Foreign, Stored::Foreign, Published::NotOurs),
        ];
        for (m, v, expected) in cases {
            assert_eq!(published(&observed(m, v)), expected);
        }
    }
}
