//! The Mutating- and ValidatingWebhookConfiguration the operator keeps, as pure functions of
//! the settings and the published CA bundle, and a comparison that ignores what the API server
//! fills in by default (so a freshly written object never looks out of date).

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::config::Settings;
use super::x509::Cert;
use super::{WEBHOOK_CONFIGURATION, managed_labels};
use crate::admission::{
    MACHINE_CLASS_VALIDATE_PATH, MUTATE_PATH, NETWORK_VALIDATE_PATH, VALIDATE_PATH,
};

pub const MUTATING_WEBHOOK_NAME: &str = "mutate.machines.vitistack.io";
pub const VALIDATING_WEBHOOK_NAME: &str = "validate.machines.vitistack.io";
pub const NETWORK_WEBHOOK_NAME: &str = "validate.networkconfigurations.vitistack.io";
pub const MACHINE_CLASS_WEBHOOK_NAME: &str = "validate.machineclasses.vitistack.io";
pub const TIMEOUT_SECONDS: i32 = 5;
const SERVICE_PORT: i32 = 443;

fn metadata() -> ObjectMeta {
    ObjectMeta {
        name: Some(WEBHOOK_CONFIGURATION.to_owned()),
        labels: Some(managed_labels()),
        ..ObjectMeta::default()
    }
}

fn client_config(settings: &Settings, path: &str, ca_bundle: &[u8]) -> WebhookClientConfig {
    let ca_bundle = Some(ByteString(ca_bundle.to_vec()));
    match &settings.webhook_url {
        Some(url) => WebhookClientConfig {
            url: Some(url.join(path)),
            service: None,
            ca_bundle,
        },
        None => WebhookClientConfig {
            url: None,
            service: Some(ServiceReference {
                name: settings.service.clone(),
                namespace: settings.namespace.clone(),
                path: Some(path.to_owned()),
                port: Some(SERVICE_PORT),
            }),
            ca_bundle,
        },
    }
}

fn rules(resource: &str, scope: &str) -> Vec<RuleWithOperations> {
    let strings = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    vec![RuleWithOperations {
        api_groups: strings(&["vitistack.io"]),
        api_versions: strings(&["v1alpha1"]),
        operations: strings(&["CREATE", "UPDATE"]),
        resources: strings(&[resource]),
        scope: Some(scope.to_owned()),
    }]
}

fn review_versions() -> Vec<String> {
    vec!["v1".to_owned(), "v1beta1".to_owned()]
}

/// One webhook in the fields both kinds share (the validating shape), for Machines.
fn webhook(settings: &Settings, name: &str, path: &str, ca_bundle: &[u8]) -> ValidatingWebhook {
    webhook_for(settings, "machines", name, path, ca_bundle)
}

/// The MachineClass webhook: cluster-scoped, so no namespace to select; and `Ignore` when no
/// replica answers, unlike the Machine webhooks. Every replica checks each class again when it
/// reads it (an invalid one is not usable, the newer of two defaults is used), so a class
/// admitted unchecked does no harm, while `Fail` would block `helm upgrade` (which applies the
/// chart's classes) whenever the operator is down, the very time an upgrade may be the fix.
fn class_webhook(
    settings: &Settings,
    resource: &str,
    name: &str,
    path: &str,
    ca_bundle: &[u8],
) -> ValidatingWebhook {
    ValidatingWebhook {
        failure_policy: Some("Ignore".to_owned()),
        namespace_selector: Some(LabelSelector::default()),
        rules: Some(rules(resource, "Cluster")),
        ..webhook_for(settings, resource, name, path, ca_bundle)
    }
}

fn webhook_for(
    settings: &Settings,
    resource: &str,
    name: &str,
    path: &str,
    ca_bundle: &[u8],
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: name.to_owned(),
        admission_review_versions: review_versions(),
        client_config: client_config(settings, path, ca_bundle),
        failure_policy: Some("Fail".to_owned()),
        match_policy: Some("Equivalent".to_owned()),
        namespace_selector: Some(super::scope::namespace_selector(&settings.namespaces)),
        object_selector: Some(LabelSelector::default()),
        rules: Some(rules(resource, "Namespaced")),
        side_effects: "None".to_owned(),
        timeout_seconds: Some(TIMEOUT_SECONDS),
        match_conditions: None,
    }
}

/// The two kinds differ only in the mutating one's reinvocationPolicy. Struct literals without
/// `..` on purpose: a field added to either type stops the build instead of being dropped.
fn into_mutating(v: ValidatingWebhook, reinvocation_policy: Option<String>) -> MutatingWebhook {
    MutatingWebhook {
        admission_review_versions: v.admission_review_versions,
        client_config: v.client_config,
        failure_policy: v.failure_policy,
        match_conditions: v.match_conditions,
        match_policy: v.match_policy,
        name: v.name,
        namespace_selector: v.namespace_selector,
        object_selector: v.object_selector,
        reinvocation_policy,
        rules: v.rules,
        side_effects: v.side_effects,
        timeout_seconds: v.timeout_seconds,
    }
}

fn split_mutating(m: MutatingWebhook) -> (ValidatingWebhook, Option<String>) {
    let shared = ValidatingWebhook {
        admission_review_versions: m.admission_review_versions,
        client_config: m.client_config,
        failure_policy: m.failure_policy,
        match_conditions: m.match_conditions,
        match_policy: m.match_policy,
        name: m.name,
        namespace_selector: m.namespace_selector,
        object_selector: m.object_selector,
        rules: m.rules,
        side_effects: m.side_effects,
        timeout_seconds: m.timeout_seconds,
    };
    (shared, m.reinvocation_policy)
}

/// The MutatingWebhookConfiguration for `ca_bundle` (PEM).
pub fn mutating(settings: &Settings, ca_bundle: &[u8]) -> MutatingWebhookConfiguration {
    let hook = webhook(settings, MUTATING_WEBHOOK_NAME, MUTATE_PATH, ca_bundle);
    MutatingWebhookConfiguration {
        metadata: metadata(),
        webhooks: Some(vec![into_mutating(hook, Some("Never".to_owned()))]),
    }
}

/// The ValidatingWebhookConfiguration for `ca_bundle` (PEM): Machines, NetworkConfigurations
/// and MachineClasses.
pub fn validating(settings: &Settings, ca_bundle: &[u8]) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: metadata(),
        webhooks: Some(vec![
            webhook(settings, VALIDATING_WEBHOOK_NAME, VALIDATE_PATH, ca_bundle),
            webhook_for(
                settings,
                "networkconfigurations",
                NETWORK_WEBHOOK_NAME,
                NETWORK_VALIDATE_PATH,
                ca_bundle,
            ),
            class_webhook(
                settings,
                "machineclasses",
                MACHINE_CLASS_WEBHOOK_NAME,
                MACHINE_CLASS_VALIDATE_PATH,
                ca_bundle,
            ),
        ]),
    }
}

/// Fills in what kube-apiserver defaults, so live and desired compare equal when they mean the
/// same thing.
fn normalize(h: &mut ValidatingWebhook) {
    let c = &mut h.client_config;
    if let Some(s) = &mut c.service {
        s.port.get_or_insert(SERVICE_PORT);
    }
    if c.ca_bundle.as_ref().is_some_and(|b| b.0.is_empty()) {
        c.ca_bundle = None;
    }
    h.failure_policy.get_or_insert_with(|| "Fail".to_owned());
    h.match_policy
        .get_or_insert_with(|| "Equivalent".to_owned());
    h.namespace_selector
        .get_or_insert_with(LabelSelector::default);
    h.object_selector.get_or_insert_with(LabelSelector::default);
    h.timeout_seconds.get_or_insert(10);
    for r in h.rules.iter_mut().flatten() {
        r.scope.get_or_insert_with(|| "*".to_owned());
    }
    if h.match_conditions.as_ref().is_some_and(Vec::is_empty) {
        h.match_conditions = None;
    }
}

fn normalized_validating(webhooks: Option<&Vec<ValidatingWebhook>>) -> Vec<ValidatingWebhook> {
    let mut hooks = webhooks.cloned().unwrap_or_default();
    hooks.iter_mut().for_each(normalize);
    hooks
}

fn normalized_mutating(webhooks: Option<&Vec<MutatingWebhook>>) -> Vec<MutatingWebhook> {
    let hooks = webhooks.cloned().unwrap_or_default();
    hooks
        .into_iter()
        .map(|m| {
            let (mut shared, reinvocation) = split_mutating(m);
            normalize(&mut shared);
            into_mutating(shared, reinvocation.or_else(|| Some("Never".to_owned())))
        })
        .collect()
}

/// Whether the live configuration's webhooks mean what the desired ones do.
pub fn mutating_matches(
    live: &MutatingWebhookConfiguration,
    desired: &MutatingWebhookConfiguration,
) -> bool {
    normalized_mutating(live.webhooks.as_ref()) == normalized_mutating(desired.webhooks.as_ref())
}

pub fn validating_matches(
    live: &ValidatingWebhookConfiguration,
    desired: &ValidatingWebhookConfiguration,
) -> bool {
    normalized_validating(live.webhooks.as_ref())
        == normalized_validating(desired.webhooks.as_ref())
}

fn bundle_has(ca_bundle: Option<&ByteString>, ca: &Cert) -> bool {
    ca_bundle.is_some_and(|b| Cert::all_from_pem(&b.0).0.contains(ca))
}

/// Whether every one of the configuration's webhooks trusts `ca` (the new CA has "reached" it).
fn all_trust<'a>(
    mut configs: impl ExactSizeIterator<Item = &'a WebhookClientConfig>,
    ca: &Cert,
) -> bool {
    configs.len() > 0 && configs.all(|c| bundle_has(c.ca_bundle.as_ref(), ca))
}

pub fn mutating_trusts(live: &MutatingWebhookConfiguration, ca: &Cert) -> bool {
    let hooks = live.webhooks.as_deref().unwrap_or_default();
    all_trust(hooks.iter().map(|h| &h.client_config), ca)
}

pub fn validating_trusts(live: &ValidatingWebhookConfiguration, ca: &Cert) -> bool {
    let hooks = live.webhooks.as_deref().unwrap_or_default();
    all_trust(hooks.iter().map(|h| &h.client_config), ca)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::config::CertificateArgs;

    fn settings(url: Option<&str>) -> Settings {
        Settings::new(
            "kubevirt-operator-system",
            url,
            CertificateArgs::default().lifetimes().unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn in_cluster_points_at_the_service() {
        let m = mutating(&settings(None), b"PEM");
        assert_eq!(m.metadata.name.as_deref(), Some("kubevirt-operator"));
        assert_eq!(
            m.metadata.labels.as_ref().unwrap()["vitistack.io/managed-by"],
            "kubevirt-operator"
        );
        let h = &m.webhooks.as_ref().unwrap()[0];
        let svc = h.client_config.service.as_ref().unwrap();
        assert_eq!(
            (svc.name.as_str(), svc.namespace.as_str(), svc.port),
            (
                "kubevirt-operator-webhook",
                "kubevirt-operator-system",
                Some(443)
            )
        );
        assert_eq!(
            svc.path.as_deref(),
            Some("/mutate-vitistack-io-v1alpha1-machine")
        );
        assert!(h.client_config.url.is_none());
        assert_eq!(h.client_config.ca_bundle.as_ref().unwrap().0, b"PEM");
        assert_eq!(h.side_effects, "None");
        assert_eq!(h.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(h.timeout_seconds, Some(5));
        assert_eq!(h.admission_review_versions, ["v1", "v1beta1"]);
        let rule = &h.rules.as_ref().unwrap()[0];
        assert_eq!(rule.api_groups.as_ref().unwrap(), &["vitistack.io"]);
        assert_eq!(rule.api_versions.as_ref().unwrap(), &["v1alpha1"]);
        assert_eq!(rule.resources.as_ref().unwrap(), &["machines"]);
        assert_eq!(rule.operations.as_ref().unwrap(), &["CREATE", "UPDATE"]);
    }

    #[test]
    fn out_of_cluster_uses_the_url() {
        let v = validating(&settings(Some("https://127.0.0.1:9443")), b"PEM");
        let h = &v.webhooks.as_ref().unwrap()[0];
        assert_eq!(
            h.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-vitistack-io-v1alpha1-machine")
        );
        assert!(h.client_config.service.is_none());
    }

    #[test]
    fn network_configurations_have_their_own_validating_webhook() {
        let v = validating(&settings(Some("https://127.0.0.1:9443")), b"PEM");
        let h = &v.webhooks.as_ref().unwrap()[1];
        assert_eq!(h.name, NETWORK_WEBHOOK_NAME);
        assert_eq!(
            h.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-vitistack-io-v1alpha1-networkconfiguration")
        );
        let rule = &h.rules.as_ref().unwrap()[0];
        assert_eq!(rule.resources.as_ref().unwrap(), &["networkconfigurations"]);
        assert_eq!(rule.operations.as_ref().unwrap(), &["CREATE", "UPDATE"]);
        assert_eq!(h.client_config.ca_bundle.as_ref().unwrap().0, b"PEM");
    }

    #[test]
    fn machine_classes_have_a_cluster_scoped_validating_webhook() {
        let v = validating(&settings(Some("https://127.0.0.1:9443")), b"PEM");
        let h = &v.webhooks.as_ref().unwrap()[2];
        assert_eq!(h.name, MACHINE_CLASS_WEBHOOK_NAME);
        assert_eq!(
            h.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-vitistack-io-v1alpha1-machineclass")
        );
        let rule = &h.rules.as_ref().unwrap()[0];
        assert_eq!(rule.resources.as_ref().unwrap(), &["machineclasses"]);
        assert_eq!(rule.scope.as_deref(), Some("Cluster"));
        assert_eq!(rule.operations.as_ref().unwrap(), &["CREATE", "UPDATE"]);
        assert_eq!(h.namespace_selector, Some(LabelSelector::default()));
        assert_eq!(h.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(h.side_effects, "None");
        assert_eq!(h.timeout_seconds, Some(5));
    }

    #[test]
    fn server_defaults_do_not_count_as_drift_but_edits_do() {
        let s = settings(None);
        let desired = mutating(&s, b"PEM");
        // What an API server returns: defaults in, our explicit values as written.
        let mut live = desired.clone();
        let h = &mut live.webhooks.as_mut().unwrap()[0];
        h.match_conditions = Some(vec![]);
        assert!(mutating_matches(&live, &desired));
        let mut sparse = desired.clone();
        let h = &mut sparse.webhooks.as_mut().unwrap()[0];
        h.match_policy = None;
        h.namespace_selector = None;
        h.reinvocation_policy = None;
        h.client_config.service.as_mut().unwrap().port = None;
        assert!(mutating_matches(&desired, &sparse));

        let mut edited = desired.clone();
        edited.webhooks.as_mut().unwrap()[0].client_config.ca_bundle =
            Some(ByteString(b"OTHER".to_vec()));
        assert!(!mutating_matches(&edited, &desired));
        let mut edited = desired.clone();
        edited.webhooks.as_mut().unwrap()[0].failure_policy = Some("Ignore".into());
        assert!(!mutating_matches(&edited, &desired));
        let mut gone = desired.clone();
        gone.webhooks = None;
        assert!(!mutating_matches(&gone, &desired));

        let v = validating(&s, b"PEM");
        let mut v2 = v.clone();
        v2.webhooks.as_mut().unwrap()[0].timeout_seconds = Some(30);
        assert!(validating_matches(&v, &v.clone()));
        assert!(!validating_matches(&v2, &v));
    }
}
