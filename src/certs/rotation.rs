//! The rotation decisions: a pure function of the observed objects, the settings and the time.
//! Each call returns what can be done now; the manager performs it, reads again and asks again,
//! so every step is decided on fresh state (and a lost write race simply means asking again).
//!
//! The order that keeps kube-apiserver trusting every certificate it may be shown:
//! 1. the CA Secret holds a valid CA that is not due for renewal (else: issue a new CA);
//! 2. the bundle ConfigMap holds that CA plus every older CA that has not expired yet, and the
//!    CA that signed the current serving certificate (else: rewrite the bundle);
//! 3. the webhooks that call us in both installed webhook configurations (and the aggregated
//!    API's APIService, while it is served) carry exactly that bundle (else: write it into them;
//!    the operator writes nothing else there, and creates no configuration);
//! 4. the serving certificate is signed by the current CA, names the right hosts and is not due
//!    (else: issue one — but from a new CA only once steps 2 and 3 hold for it, and, while the
//!    current certificate still works, only after the publish grace, counted from when both
//!    webhook configurations were written as recorded on them: see [`super::published`]).

use chrono::{DateTime, Utc};

use super::config::Settings;
use super::holder::CaBundleHolder;
use super::observed::{Observed, Stored, StoredCa};
use super::published::{self, Published};
use super::x509::Cert;
use super::{bundle, issue, trust, webhook_config};

mod plan;
pub use plan::{Action, Plan, Problem, Reason, Target};

/// How long before the current serving certificate expires a held-back replacement is issued
/// anyway: time for the write, the watch and the swap in every replica.
pub const SWAP_MARGIN: chrono::TimeDelta = chrono::TimeDelta::seconds(2);

/// Decides what to do about the certificates now.
pub fn decide(observed: &Observed, settings: &Settings, now: DateTime<Utc>) -> Plan {
    let mut plan = Plan::default();
    let renew = settings.lifetimes.renew_before;

    // 1. The CA. Everything else depends on it, so a new CA is the only action of its plan.
    let ca: Option<&StoredCa> = match &observed.ca {
        Stored::Foreign => {
            plan.problems.push(Problem::Foreign(Target::Ca));
            None
        }
        Stored::Missing => {
            return plan.act(Action::IssueCa {
                reason: Reason::Missing,
            });
        }
        Stored::Unreadable(why) => {
            return plan.act(Action::IssueCa {
                reason: Reason::Unreadable(why.clone()),
            });
        }
        Stored::Ok(ca) => {
            let reason = if now >= ca.cert.not_after {
                Some(Reason::Expired)
            } else if ca.rotate_requested {
                Some(Reason::Requested)
            } else if now >= ca.cert.renew_at(renew) {
                Some(Reason::RenewalDue)
            } else {
                None
            };
            if let Some(reason) = reason {
                return plan.act(Action::IssueCa { reason });
            }
            if now < ca.cert.not_before {
                plan.problems.push(Problem::CaNotYetValid {
                    not_before: ca.cert.not_before,
                });
                plan.wake(ca.cert.not_before);
                return plan;
            }
            plan.wake(ca.cert.renew_at(renew));
            Some(ca)
        }
    };

    // 2. The bundle: what it holds, plus the current CA and the serving certificate's CA, less
    // whatever has expired.
    let serving = observed.serving.ok();
    let extra = ca
        .map(|c| &c.cert)
        .into_iter()
        .chain(serving.and_then(|s| s.issuer_ca.as_ref()));
    let stored_cas = observed
        .bundle
        .ok()
        .map(|b| b.cas.as_slice())
        .unwrap_or_default();
    let desired_cas = bundle::merge(stored_cas, extra, now);
    if let Some(at) = bundle::next_expiry(&desired_cas) {
        plan.wake(at);
    }
    let published: &[Cert] = match &observed.bundle {
        Stored::Foreign => {
            plan.problems.push(Problem::Foreign(Target::Bundle));
            stored_cas
        }
        Stored::Missing | Stored::Unreadable(_) if desired_cas.is_empty() => &[],
        Stored::Missing => {
            return plan.act(write_bundle(&desired_cas, Reason::Missing));
        }
        Stored::Unreadable(why) => {
            return plan.act(write_bundle(&desired_cas, Reason::Unreadable(why.clone())));
        }
        Stored::Ok(b) if b.cas != desired_cas || b.malformed > 0 => {
            return plan.act(write_bundle(&desired_cas, Reason::Outdated));
        }
        Stored::Ok(b) => &b.cas,
    };
    // Foreign, unreadable bundle with nothing to put in it: nothing can be published.
    if published.is_empty() {
        return plan;
    }

    // 3. The webhook configurations the chart or manifests installed carry the published
    // bundle in every webhook that calls us; each write records when (see `published`).
    let pem = bundle::encode(published);
    let problems = &mut plan.problems;
    let target = Target::MutatingWebhook;
    if let Some((desired, reason)) = fill(&observed.mutating, settings, &pem, now, target, problems)
    {
        plan.actions.push(Action::WriteMutating {
            desired: Box::new(desired),
            reason,
        });
    }
    let problems = &mut plan.problems;
    let target = Target::ValidatingWebhook;
    if let Some((desired, reason)) =
        fill(&observed.validating, settings, &pem, now, target, problems)
    {
        plan.actions.push(Action::WriteValidating {
            desired: Box::new(desired),
            reason,
        });
    }

    if settings.api_service {
        let problems = &mut plan.problems;
        let target = Target::ApiService;
        if let Some((desired, reason)) =
            fill(&observed.api_service, settings, &pem, now, target, problems)
        {
            plan.actions.push(Action::WriteApiService {
                desired: Box::new(desired),
                reason,
            });
        }
    }

    // 4. The serving certificate.
    let Some(ca) = ca else {
        if matches!(observed.serving, Stored::Foreign) {
            plan.problems.push(Problem::Foreign(Target::Serving));
        }
        return plan;
    };
    let names = settings.serving_names();
    let need = match &observed.serving {
        Stored::Foreign => {
            plan.problems.push(Problem::Foreign(Target::Serving));
            None
        }
        Stored::Missing => Some(Reason::Missing),
        Stored::Unreadable(why) => Some(Reason::Unreadable(why.clone())),
        Stored::Ok(s) => {
            if now >= s.cert.not_after {
                Some(Reason::Expired)
            } else if !trust::signed_by(&s.cert, &ca.cert) {
                Some(Reason::SignedByOtherCa)
            } else if !issue::names_match(&s.cert, &names) {
                Some(Reason::NamesChanged)
            } else if let Err(e) = trust::verify(
                &s.cert,
                std::slice::from_ref(&ca.cert),
                &names.verify_as,
                now,
            ) {
                Some(Reason::NotTrusted(e.to_string()))
            } else if s.rotate_requested {
                Some(Reason::Requested)
            } else if now >= s.cert.renew_at(renew) {
                Some(Reason::RenewalDue)
            } else {
                plan.wake(s.cert.renew_at(renew));
                None
            }
        }
    };
    let Some(reason) = need else {
        return plan;
    };
    // A configuration that is not installed sends nothing here: not waited for.
    let reached_webhooks = |c: &Cert| {
        let api_service = observed.api_service.ok().filter(|_| settings.api_service);
        observed.mutating.ok().is_none_or(|l| l.trusts(settings, c))
            && observed
                .validating
                .ok()
                .is_none_or(|l| l.trusts(settings, c))
            && api_service.is_none_or(|l| l.trusts(settings, c))
    };
    if !published.contains(&ca.cert) || !reached_webhooks(&ca.cert) {
        plan.waiting = Some(format!(
            "serving certificate ({reason}) waits until the CA {} is in the bundle and both webhook configurations",
            ca.cert.serial
        ));
        return plan;
    }
    // Moving to a new CA while the current certificate still works waits until every API
    // server has had time to see that CA: the grace counts from when both webhook
    // configurations were written, as recorded on them (so a new leader waits it out too). A
    // certificate that does not work has nothing to protect, and a new one from the same CA is
    // trusted wherever the current one is. The wait never outlasts the current certificate: it
    // ends a moment before that expires.
    let since = match published::published(observed, settings) {
        Published::At(at) => Some(at),
        Published::NotOurs => Some(ca.cert.issued_at()),
        Published::Unrecorded => None,
    };
    let hold_until = observed.serving.ok().and_then(|s| {
        let works = trust::verify(&s.cert, published, &names.verify_as, now).is_ok();
        let moves_to_new_ca = !trust::signed_by(&s.cert, &ca.cert);
        let last_moment = s.cert.not_after - SWAP_MARGIN;
        (works && moves_to_new_ca).then(|| {
            since.map_or(last_moment, |at| {
                (at + settings.publish_grace).min(last_moment)
            })
        })
    });
    if since.is_none() && hold_until.is_some_and(|at| now < at) {
        plan.waiting = Some(format!(
            "serving certificate ({reason}) waits until the webhook configurations record when they received the CA"
        ));
        return plan;
    }
    if let Some(at) = hold_until.filter(|at| now < *at) {
        plan.waiting = Some(format!(
            "serving certificate ({reason}) waits until {at} for the new CA to reach every API server"
        ));
        plan.wake(at);
        return plan;
    }
    plan.act(Action::IssueServing { reason })
}

fn write_bundle(cas: &[Cert], reason: Reason) -> Action {
    Action::WriteBundle {
        pem: bundle::encode(cas),
        reason,
    }
}

/// The fill of an installed webhook configuration, and why, when it needs writing: its
/// webhooks that call us lack the bundle (`missing` while none has one), or it has no record of
/// when they got it. Not installed, or nothing in it calls us: a problem, nothing to write.
fn fill<T: CaBundleHolder>(
    stored: &Stored<T>,
    settings: &Settings,
    pem: &str,
    now: DateTime<Utc>,
    target: Target,
    problems: &mut Vec<Problem>,
) -> Option<(T, Reason)> {
    let name = T::installed_name(settings);
    let Stored::Ok(live) = stored else {
        problems.push(Problem::NotInstalled { target, name });
        return None;
    };
    let Some(mut desired) = live.filled(settings, pem.as_bytes()) else {
        let callee = webhook_config::callee(settings);
        problems.push(Problem::NotCallingUs {
            target,
            name,
            callee,
        });
        return None;
    };
    published::stamp(&mut desired, live, settings, now);
    let before = live.bundles(settings);
    let reason = if before != desired.bundles(settings) {
        if before.iter().all(Option::is_none) {
            Reason::Missing
        } else {
            Reason::Outdated
        }
    } else if published::unstamped(live.metadata()) {
        Reason::Unrecorded
    } else {
        return None;
    };
    Some((desired, reason))
}

#[cfg(test)]
mod tests;
