//! The decisions, pure: what one look at a KubevirtConfig found ([`Observation`]) becomes its
//! health ([`verdict`]) and, only when something changed, a new status ([`status`]); a failed
//! probe's error becomes a reason ([`classify`]); the cluster's [`identity`] is checked against
//! the one recorded.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::kubeconfig::Unusable;
use super::registry::{Apis, Reason};
use crate::api::kubevirt_config::{KubevirtConfigStatus, MAX_MESSAGE, READY_CONDITION, phase};

/// `lastChecked` alone is written at most this often (besides every change of outcome): a
/// thousand healthy configs cost about three writes a second, not one per probe.
pub const REFRESH_LAST_CHECKED: Duration = Duration::from_secs(300);

/// What a probe of the remote API server found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// It answered, accepted the credentials, and serves `apis`.
    Reached {
        version: String,
        apis: Apis,
        /// The cluster's identity: its kube-system namespace's uid.
        identity: String,
    },
    Unreachable(String),
    Unauthorized(String),
}

/// What one look found, stopping at the first problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    SecretNotFound { namespace: String, name: String },
    SecretForbidden { namespace: String, error: String },
    Unusable(Unusable),
    Probed(Probe),
}

/// A KubevirtConfig's health: the reason, a message saying what to do, what is served (None:
/// not known from this look), and the cluster identity to record (see [`identity`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub reason: Reason,
    pub message: String,
    pub apis: Option<Apis>,
    pub identity: Option<String>,
}

pub fn verdict(observed: &Observation) -> Verdict {
    let not_ready = |reason, message: String| Verdict {
        reason,
        message,
        apis: None,
        identity: None,
    };
    match observed {
        Observation::SecretNotFound { namespace, name } => not_ready(
            Reason::SecretNotFound,
            format!("Secret {namespace}/{name} not found: create it with the key \"kubeconfig\""),
        ),
        Observation::SecretForbidden { namespace, error } => not_ready(
            Reason::SecretForbidden,
            format!(
                "the operator may not read Secrets in namespace {namespace} (grant it list and watch there): {error}"
            ),
        ),
        Observation::Unusable(u @ Unusable::KeyMissing(_)) => {
            not_ready(Reason::KeyMissing, u.to_string())
        }
        Observation::Unusable(u @ Unusable::Invalid(_)) => {
            not_ready(Reason::KubeconfigInvalid, u.to_string())
        }
        Observation::Probed(Probe::Unreachable(e)) => not_ready(
            Reason::Unreachable,
            format!("the API server is unreachable: {e}"),
        ),
        Observation::Probed(Probe::Unauthorized(e)) => not_ready(
            Reason::Unauthorized,
            format!(
                "the API server refused the kubeconfig's credentials or their rights (see manifests/remote-cluster-rbac.yaml): {e}"
            ),
        ),
        Observation::Probed(Probe::Reached { version, apis, .. }) => Verdict {
            reason: Reason::Ready,
            message: ready_message(version, *apis),
            apis: Some(*apis),
            identity: None,
        },
    }
}

fn ready_message(version: &str, apis: Apis) -> String {
    let named = [
        ("KubeVirt", apis.kubevirt),
        ("CDI", apis.cdi),
        ("Multus", apis.multus),
    ];
    let list = |served: bool| {
        let names: Vec<&str> = named
            .iter()
            .filter(|(_, s)| *s == served)
            .map(|(n, _)| *n)
            .collect();
        names.join(", ")
    };
    match (list(true), list(false)) {
        (s, m) if m.is_empty() => format!("Kubernetes {version}; serves {s}"),
        (s, m) if s.is_empty() => format!("Kubernetes {version}; serves none of {m}"),
        (s, m) => format!("Kubernetes {version}; serves {s}; not {m}"),
    }
}

/// The status to write, or None when the stored one says the same and its `lastChecked` is
/// younger than `refresh`. Keeps what is served when this look could not tell, and the Ready
/// condition's transition time while its status stays.
pub fn status(
    stored: Option<&KubevirtConfigStatus>,
    verdict: &Verdict,
    machines: u32,
    generation: Option<i64>,
    now: Timestamp,
    refresh: Duration,
) -> Option<KubevirtConfigStatus> {
    let ready = verdict.reason == Reason::Ready;
    let message = cut(&verdict.message, MAX_MESSAGE);
    let stored_ready =
        stored.and_then(|s| s.conditions.iter().find(|c| c.type_ == READY_CONDITION));
    let condition_status = if ready { "True" } else { "False" };
    let transition = match stored_ready {
        Some(c) if c.status == condition_status => c.last_transition_time.clone(),
        _ => Time(now),
    };
    let served = |now: Option<bool>, before: Option<bool>| now.or(before);
    let apis = verdict.apis;
    let mut next = KubevirtConfigStatus {
        phase: Some(
            if ready {
                phase::READY
            } else {
                phase::NOT_READY
            }
            .to_owned(),
        ),
        reason: Some(verdict.reason.as_str().to_owned()),
        message: Some(message.clone()),
        kubevirt_installed: served(
            apis.map(|a| a.kubevirt),
            stored.and_then(|s| s.kubevirt_installed),
        ),
        cdi_installed: served(apis.map(|a| a.cdi), stored.and_then(|s| s.cdi_installed)),
        multus_installed: served(
            apis.map(|a| a.multus),
            stored.and_then(|s| s.multus_installed),
        ),
        machines: Some(i64::from(machines)),
        cluster_identity: (verdict.identity.clone())
            .or_else(|| stored.and_then(|s| s.cluster_identity.clone())),
        last_checked: stored.and_then(|s| s.last_checked.clone()),
        conditions: vec![Condition {
            type_: READY_CONDITION.to_owned(),
            status: condition_status.to_owned(),
            reason: verdict.reason.as_str().to_owned(),
            message,
            last_transition_time: transition,
            observed_generation: generation,
        }],
    };
    let fresh = next.last_checked.as_ref().is_some_and(|t| {
        Duration::try_from(now.duration_since(t.0)).is_ok_and(|age| age < refresh)
    });
    if stored == Some(&next) && fresh {
        return None;
    }
    next.last_checked = Some(Time(now));
    Some(next)
}

/// Cuts `s` to at most `max` bytes on a character boundary.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// What a failed request to the remote API server says about it: 401 and 403 are the
/// credentials (or their rights), anything else (no connection, TLS, a timeout, 5xx) is
/// unreachability.
pub fn classify(error: &kube::Error) -> Probe {
    match error {
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => {
            Probe::Unauthorized(format!("{} ({})", s.message, s.code))
        }
        other => Probe::Unreachable(error_chain(other)),
    }
}

/// An error and its sources, so "error trying to connect" says why.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = e.source();
    }
    out
}

pub mod identity;

#[cfg(test)]
mod tests;
