//! Self-managed webhook certificates: a CA, the serving certificate it signs, the trusted bundle,
//! and the webhook configurations that carry that bundle to kube-apiserver.
//!
//! Pure core, thin I/O shell:
//! - [`config`]: lifetimes and renew-before from flags and the environment, checked at start-up.
//! - [`x509`], [`trust`], [`bundle`], [`issue`]: parsing, verification, bundle merge and issuance.
//! - [`observed`]: stored objects classified into what the decisions need (pure).
//! - [`published`]: when the webhook configurations received their caBundle, recorded on them.
//! - [`rotation`]: the decisions — observed state + settings + now in, a list of actions out.
//! - [`webhook_config`]: the desired webhook configurations (pure) and their comparison;
//!   [`scope`]: their namespaceSelector from `--watch-namespaces`.
//! - [`api_service`]: the aggregated API's APIService, whose caBundle is filled the same way;
//!   [`holder`]: the one trait over the three objects that carry our caBundle.
//! - [`store`]: reading and conditionally writing the Secrets, ConfigMap and webhook configurations.
//! - [`manager`]: the leader's loop that observes, decides and acts.
//! - [`watch`]: every replica's serving-Secret watcher that feeds the TLS server's `CertSlot`.
//! - [`metrics`]: the served certificate's expiry, followed (the families: `telemetry::certs`).

pub mod api_service;
pub mod bundle;
pub mod config;
pub mod holder;
pub mod issue;
pub mod manager;
pub mod metrics;
pub mod observed;
pub mod published;
pub mod rotation;
pub mod scope;
pub mod store;
pub mod trust;
pub mod watch;
pub mod webhook_config;
pub mod x509;

pub use config::{CertificateArgs, Lifetimes, RenewBefore, Settings};
pub use manager::CertManager;
pub use metrics::Metrics;

/// Secret holding the current CA certificate and key (`tls.crt`, `tls.key`).
pub const CA_SECRET: &str = "kubevirt-operator-ca";
/// Secret holding the serving certificate, its key and the CA that signed it (`ca.crt`).
pub const SERVING_SECRET: &str = "kubevirt-operator-webhook-tls";
/// ConfigMap holding every CA kube-apiserver must trust, under [`BUNDLE_KEY`].
pub const BUNDLE_CONFIGMAP: &str = "kubevirt-operator-ca-bundle";
pub const BUNDLE_KEY: &str = "ca-bundle.crt";
/// Name of both the Mutating- and the ValidatingWebhookConfiguration.
pub const WEBHOOK_CONFIGURATION: &str = "kubevirt-operator";
/// The Service in front of the webhook server, in the operator namespace.
pub const WEBHOOK_SERVICE: &str = "kubevirt-operator-webhook";

pub const TLS_CERT_KEY: &str = "tls.crt";
pub const TLS_PRIVATE_KEY_KEY: &str = "tls.key";
pub const CA_CERT_KEY: &str = "ca.crt";

pub const MANAGED_BY_LABEL: &str = "vitistack.io/managed-by";
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
pub const OPERATOR_NAME: &str = "kubevirt-operator";

/// Set (to any value, by convention an RFC 3339 time) on the CA or serving Secret to ask the
/// leader to renew that certificate now; the leader's write of the new certificate removes it.
pub const ROTATE_ANNOTATION: &str = "vitistack.io/rotate-requested-at";

/// On each webhook configuration: when its caBundle was last written (RFC 3339), recorded in the
/// same write. A serving certificate from a new CA waits until the CA has been in both
/// configurations for the publish grace, counted from here, so a new leader honours the wait.
pub const CA_BUNDLE_WRITTEN_ANNOTATION: &str = "vitistack.io/ca-bundle-written-at";

/// Labels on every object this module creates; their absence marks an object as not ours.
pub fn managed_labels() -> std::collections::BTreeMap<String, String> {
    [
        (MANAGED_BY_LABEL.to_owned(), OPERATOR_NAME.to_owned()),
        (NAME_LABEL.to_owned(), OPERATOR_NAME.to_owned()),
    ]
    .into_iter()
    .collect()
}

/// Whether `labels` mark an object as managed by this operator.
pub fn is_managed(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == OPERATOR_NAME)
}
