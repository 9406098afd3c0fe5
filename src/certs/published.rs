//! When the webhook configurations received their caBundle, recorded in the cluster: every write
//! that changes a configuration's caBundle stamps it with [`CA_BUNDLE_WRITTEN_ANNOTATION`] in the
//! same request; writes that leave the caBundle as it was keep the stamp. The publish grace is
//! counted from the later of the two stamps, so it survives a change of leader. Pure.

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::CA_BUNDLE_WRITTEN_ANNOTATION;
use super::config::Settings;
use super::holder::CaBundleHolder;
use super::observed::{Observed, Stored, ca_bundle_written_at};

/// Stamps `desired` (a fill of `live`): the live stamp when the caBundles of what calls us stay
/// the same and it has one, else `now`.
pub fn stamp<T: CaBundleHolder>(
    desired: &mut T,
    live: &T,
    settings: &Settings,
    now: DateTime<Utc>,
) {
    let same = live.bundles(settings) == desired.bundles(settings);
    let kept = Some(live.metadata())
        .filter(|_| same)
        .and_then(ca_bundle_written_at)
        .unwrap_or(now);
    desired
        .metadata_mut()
        .annotations
        .get_or_insert_default()
        .insert(
            CA_BUNDLE_WRITTEN_ANNOTATION.to_owned(),
            kept.to_rfc3339_opts(SecondsFormat::Secs, true),
        );
}

/// When both webhook configurations (and the APIService, when served) last received their
/// caBundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// The later of the two stamps (configurations that send nothing here are not waited for).
    At(DateTime<Utc>),
    /// One that calls us carries no readable stamp (never filled yet, or edited).
    Unrecorded,
    /// Neither configuration is installed with a webhook that calls us.
    NotOurs,
}

pub fn published(observed: &Observed, settings: &Settings) -> Published {
    let stamps = [
        stamp_of(&observed.mutating, settings),
        stamp_of(&observed.validating, settings),
        settings
            .api_service
            .then(|| stamp_of(&observed.api_service, settings))
            .flatten(),
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

/// None: nothing to wait for (not installed, or no webhook of it calls us); Some(None): one
/// that calls us, without a stamp.
fn stamp_of<T: CaBundleHolder>(
    stored: &Stored<T>,
    settings: &Settings,
) -> Option<Option<DateTime<Utc>>> {
    match stored {
        Stored::Ok(live) if !live.bundles(settings).is_empty() => {
            Some(ca_bundle_written_at(live.metadata()))
        }
        _ => None,
    }
}

/// Whether a live configuration needs writing only to record its stamp.
pub fn unstamped(meta: &ObjectMeta) -> bool {
    ca_bundle_written_at(meta).is_none()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };

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

    /// As installed (no caBundle), filled with `bundle` and stamped `at`.
    fn stamped(bundle: &[u8], at: Option<DateTime<Utc>>) -> MutatingWebhookConfiguration {
        let installed = webhook_config::mutating(&settings(), b"");
        let mut c = webhook_config::fill(&installed, &settings(), bundle).unwrap();
        if let Some(at) = at {
            stamp(&mut c, &installed, &settings(), at);
        }
        c
    }

    #[test]
    fn a_write_keeps_the_stamp_only_while_the_ca_bundle_stays_the_same() {
        let live = stamped(b"A", Some(t(0)));
        let installed = webhook_config::mutating(&settings(), b"");
        let cases = [
            // (desired caBundle, live, expected stamp)
            (&b"A"[..], &live, t(0)),
            (&b"A+B"[..], &live, t(60)),
            (&b"A"[..], &installed, t(60)),
        ];
        for (bundle, live, expected) in cases {
            let mut desired = webhook_config::fill(live, &settings(), bundle).unwrap();
            stamp(&mut desired, live, &settings(), t(60));
            assert_eq!(ca_bundle_written_at(&desired.metadata), Some(expected));
        }
        // Unstamped live, same caBundle: stamped now.
        let unstamped = stamped(b"A", None);
        let mut desired = webhook_config::fill(&unstamped, &settings(), b"A").unwrap();
        stamp(&mut desired, &unstamped, &settings(), t(60));
        assert_eq!(ca_bundle_written_at(&desired.metadata), Some(t(60)));
    }

    #[test]
    fn published_is_the_later_stamp_of_the_configurations_that_call_us() {
        let s = settings();
        let validating = |at: Option<DateTime<Utc>>| {
            let installed = webhook_config::validating(&s, b"");
            let mut c = webhook_config::fill(&installed, &s, b"A").unwrap();
            if let Some(at) = at {
                stamp(&mut c, &installed, &s, at);
            }
            Stored::Ok(c)
        };
        let observed = |m: Stored<MutatingWebhookConfiguration>,
                        v: Stored<ValidatingWebhookConfiguration>| {
            Observed {
                ca: Stored::Missing,
                serving: Stored::Missing,
                bundle: Stored::Missing,
                mutating: m,
                validating: v,
                api_service: Stored::Missing,
            }
        };
        // A configuration whose webhooks call another Service: not ours to wait for.
        let elsewhere = {
            let other = Settings::new("elsewhere", None, s.lifetimes).unwrap();
            Stored::Ok(webhook_config::mutating(&other, b"A"))
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
            (Stored::Missing, validating(Some(t(5))), Published::At(t(5))),
            (elsewhere, validating(Some(t(5))), Published::At(t(5))),
            (
                Stored::Ok(stamped(b"A", None)),
                validating(Some(t(5))),
                Published::Unrecorded,
            ),
            (Stored::Missing, Stored::Missing, Published::NotOurs),
        ];
        for (m, v, expected) in cases {
            assert_eq!(published(&observed(m, v), &s), expected);
        }
    }
}
