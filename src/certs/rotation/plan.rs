//! What the rotation decisions say: the targets, the actions and why, the problems only a
//! person can fix, and the plan that carries them.

use std::fmt;

use chrono::{DateTime, Utc};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

/// The object a decision or a problem is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Ca,
    Serving,
    Bundle,
    MutatingWebhook,
    ValidatingWebhook,
    /// The aggregated API's APIService (only while it is served).
    ApiService,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Ca => "Secret kubevirt-operator-ca",
            Target::Serving => "Secret kubevirt-operator-webhook-tls",
            Target::Bundle => "ConfigMap kubevirt-operator-ca-bundle",
            Target::MutatingWebhook => "MutatingWebhookConfiguration",
            Target::ValidatingWebhook => "ValidatingWebhookConfiguration",
            Target::ApiService => "APIService",
        })
    }
}

/// Why something is (re)written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    Missing,
    Unreadable(String),
    Expired,
    RenewalDue,
    Requested,
    SignedByOtherCa,
    NamesChanged,
    NotTrusted(String),
    Outdated,
    /// Right, but without the record of when its caBundle was written.
    Unrecorded,
}

impl Reason {
    /// Short, bounded form for metric labels.
    pub fn label(&self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::Unreadable(_) => "unreadable",
            Reason::Expired => "expired",
            Reason::RenewalDue => "renewal_due",
            Reason::Requested => "requested",
            Reason::SignedByOtherCa => "ca_rotated",
            Reason::NamesChanged => "names_changed",
            Reason::NotTrusted(_) => "not_trusted",
            Reason::Outdated => "outdated",
            Reason::Unrecorded => "unrecorded",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Missing => f.write_str("missing"),
            Reason::Unreadable(why) => write!(f, "unreadable: {why}"),
            Reason::Expired => f.write_str("expired"),
            Reason::RenewalDue => f.write_str("renewal due"),
            Reason::Requested => f.write_str("rotation requested"),
            Reason::SignedByOtherCa => f.write_str("not signed by the current CA"),
            Reason::NamesChanged => f.write_str("names differ from the configured ones"),
            Reason::NotTrusted(why) => write!(f, "would not be trusted: {why}"),
            Reason::Outdated => f.write_str("out of date"),
            Reason::Unrecorded => f.write_str("no record of when its caBundle was written"),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Generate a CA and store it in the CA Secret.
    IssueCa { reason: Reason },
    /// Store this bundle (PEM) in the bundle ConfigMap.
    WriteBundle { pem: String, reason: Reason },
    WriteMutating {
        desired: Box<MutatingWebhookConfiguration>,
        reason: Reason,
    },
    WriteValidating {
        desired: Box<ValidatingWebhookConfiguration>,
        reason: Reason,
    },
    WriteApiService {
        desired: Box<APIService>,
        reason: Reason,
    },
    /// Issue a serving certificate from the CA in the CA Secret and store it.
    IssueServing { reason: Reason },
}

impl Action {
    pub fn target(&self) -> Target {
        match self {
            Action::IssueCa { .. } => Target::Ca,
            Action::WriteBundle { .. } => Target::Bundle,
            Action::WriteMutating { .. } => Target::MutatingWebhook,
            Action::WriteValidating { .. } => Target::ValidatingWebhook,
            Action::WriteApiService { .. } => Target::ApiService,
            Action::IssueServing { .. } => Target::Serving,
        }
    }

    pub fn reason(&self) -> &Reason {
        match self {
            Action::IssueCa { reason }
            | Action::WriteBundle { reason, .. }
            | Action::WriteMutating { reason, .. }
            | Action::WriteValidating { reason, .. }
            | Action::WriteApiService { reason, .. }
            | Action::IssueServing { reason } => reason,
        }
    }
}

/// Something only a person can fix; reported, never acted on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// An object with our name exists without our label: it is not overwritten.
    Foreign(Target),
    /// The CA is not valid yet: the clocks of this leader and the one that issued it disagree.
    CaNotYetValid { not_before: DateTime<Utc> },
    /// The webhook configuration the chart or manifests install is not there: the operator
    /// never creates one (it holds no such right), so there is nothing to fill.
    NotInstalled { target: Target, name: String },
    /// It is there, but none of its webhooks calls this operator (`callee`): nothing is ours.
    NotCallingUs {
        target: Target,
        name: String,
        callee: String,
    },
}

impl Problem {
    /// The object the problem is about.
    pub fn target(&self) -> Target {
        match self {
            Problem::Foreign(t)
            | Problem::NotInstalled { target: t, .. }
            | Problem::NotCallingUs { target: t, .. } => *t,
            Problem::CaNotYetValid { .. } => Target::Ca,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Foreign(t) => write!(
                f,
                "{t} exists but is not managed by kubevirt-operator (no label {}={}); it is left untouched. Delete it, or label it, to let the operator manage it",
                crate::certs::MANAGED_BY_LABEL,
                crate::certs::OPERATOR_NAME
            ),
            Problem::CaNotYetValid { not_before } => write!(
                f,
                "{} is not valid before {not_before}; check this node's clock",
                Target::Ca
            ),
            Problem::NotInstalled {
                target: Target::ApiService,
                name,
            } => write!(
                f,
                "{} {name} does not exist, so kube-apiserver does not route subresources.vitistack.io to the operator; the chart (subresources.enabled) and manifests/subresources install it and the operator only fills its caBundle",
                Target::ApiService
            ),
            Problem::NotInstalled { target, name } => write!(
                f,
                "{target} {name} does not exist, so admission of Machines is not configured; the chart and manifests/ install it (helm upgrade or kubectl apply -k puts it back) and the operator only fills its caBundle"
            ),
            Problem::NotCallingUs {
                target: Target::ApiService,
                name,
                callee,
            } => write!(
                f,
                "{} {name} names another Service than {callee}, so its caBundle is left alone; check WEBHOOK_SERVICE_NAME against the installed APIService",
                Target::ApiService
            ),
            Problem::NotCallingUs {
                target,
                name,
                callee,
            } => write!(
                f,
                "{target} {name} has no webhook calling {callee}, so its caBundle is left alone; check WEBHOOK_CONFIGURATION_NAME and WEBHOOK_SERVICE_NAME against the installed configuration"
            ),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// In order; each may depend on the ones before having been done.
    pub actions: Vec<Action>,
    pub problems: Vec<Problem>,
    /// Why a needed serving certificate is held back, when it is.
    pub waiting: Option<String>,
    /// The earliest time the decision may change without any object changing.
    pub wake_at: Option<DateTime<Utc>>,
}

impl Plan {
    pub(super) fn wake(&mut self, at: DateTime<Utc>) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }

    pub(super) fn act(mut self, action: Action) -> Plan {
        self.actions.push(action);
        self
    }
}
