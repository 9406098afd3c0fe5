//! The Mutating- and ValidatingWebhookConfiguration: their shape as the chart and `manifests/`
//! install them (pure functions of the settings; tests compare both installs with it, and
//! `kubevirt-operator webhook-configurations` prints it for an operator outside the cluster),
//! and the one thing the operator writes into the installed ones: the caBundle of each webhook
//! that calls it. The operator never creates them, so uninstalling removes them.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::config::Settings;
use super::x509::Cert;
use super::{NAME_LABEL, OPERATOR_NAME};
use crate::admission::{
    MACHINE_CLASS_VALIDATE_PATH, MUTATE_PATH, NETWORK_VALIDATE_PATH, VALIDATE_PATH,
};

pub const MUTATING_WEBHOOK_NAME: &str = "mutate.machines.vitistack.io";
pub const VALIDATING_WEBHOOK_NAME: &str = "validate.machines.vitistack.io";
pub const NETWORK_WEBHOOK_NAME: &str = "validate.networkconfigurations.vitistack.io";
pub const MACHINE_CLASS_WEBHOOK_NAME: &str = "validate.machineclasses.vitistack.io";
pub const TIMEOUT_SECONDS: i32 = 5;
const SERVICE_PORT: i32 = 443;

fn metadata(settings: &Settings) -> ObjectMeta {
    ObjectMeta {
        name: Some(settings.webhook_configuration.clone()),
        labels: Some([(NAME_LABEL.to_owned(), OPERATOR_NAME.to_owned())].into()),
        ..ObjectMeta::default()
    }
}

/// An empty `ca_bundle`: none (as installed, before the operator fills it in).
fn client_config(settings: &Settings, path: &str, ca_bundle: &[u8]) -> WebhookClientConfig {
    let ca_bundle = (!ca_bundle.is_empty()).then(|| ByteString(ca_bundle.to_vec()));
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

/// The MutatingWebhookConfiguration for `ca_bundle` (PEM).
pub fn mutating(settings: &Settings, ca_bundle: &[u8]) -> MutatingWebhookConfiguration {
    let hook = webhook(settings, MUTATING_WEBHOOK_NAME, MUTATE_PATH, ca_bundle);
    MutatingWebhookConfiguration {
        metadata: metadata(settings),
        webhooks: Some(vec![into_mutating(hook, Some("Never".to_owned()))]),
    }
}

/// The ValidatingWebhookConfiguration for `ca_bundle` (PEM): Machines, NetworkConfigurations
/// and MachineClasses.
pub fn validating(settings: &Settings, ca_bundle: &[u8]) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: metadata(settings),
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

/// What the fill-in below needs of either kind of webhook configuration: its clientConfigs.
pub trait WebhookConfiguration: kube::Resource<DynamicType = ()> + Clone {
    fn client_configs(&self) -> Vec<&WebhookClientConfig>;
    fn client_configs_mut(&mut self) -> Vec<&mut WebhookClientConfig>;
}

impl WebhookConfiguration for MutatingWebhookConfiguration {
    fn client_configs(&self) -> Vec<&WebhookClientConfig> {
        self.webhooks
            .iter()
            .flatten()
            .map(|h| &h.client_config)
            .collect()
    }
    fn client_configs_mut(&mut self) -> Vec<&mut WebhookClientConfig> {
        let hooks = self.webhooks.iter_mut().flatten();
        hooks.map(|h| &mut h.client_config).collect()
    }
}

impl WebhookConfiguration for ValidatingWebhookConfiguration {
    fn client_configs(&self) -> Vec<&WebhookClientConfig> {
        self.webhooks
            .iter()
            .flatten()
            .map(|h| &h.client_config)
            .collect()
    }
    fn client_configs_mut(&mut self) -> Vec<&mut WebhookClientConfig> {
        let hooks = self.webhooks.iter_mut().flatten();
        hooks.map(|h| &mut h.client_config).collect()
    }
}

/// Whether a webhook calls this operator: its Service in its namespace, or under its URL. Only
/// such webhooks get the operator's caBundle; any other webhook in the configuration is not its.
pub fn calls_us(settings: &Settings, c: &WebhookClientConfig) -> bool {
    match (&settings.webhook_url, &c.service, &c.url) {
        (Some(base), _, Some(url)) => base.covers(url),
        (None, Some(s), _) => s.name == settings.service && s.namespace == settings.namespace,
        _ => false,
    }
}

/// What the operator's webhooks are reached by, for messages: `Service ns/name` or the URL.
pub fn callee(settings: &Settings) -> String {
    match &settings.webhook_url {
        Some(url) => format!("URL {}", url.join("")),
        None => format!("Service {}/{}", settings.namespace, settings.service),
    }
}

/// The caBundles of the webhooks that call us, in order.
pub fn bundles<'a, T: WebhookConfiguration>(
    live: &'a T,
    settings: &Settings,
) -> Vec<Option<&'a ByteString>> {
    let configs = live.client_configs().into_iter();
    configs
        .filter(|c| calls_us(settings, c))
        .map(|c| c.ca_bundle.as_ref())
        .collect()
}

/// `live` with `ca_bundle` (PEM) in every webhook that calls us and nothing else changed; None
/// when no webhook calls us (nothing of it is ours to fill).
pub fn fill<T: WebhookConfiguration>(live: &T, settings: &Settings, ca_bundle: &[u8]) -> Option<T> {
    let mut desired = live.clone();
    let mut ours = 0;
    for c in desired.client_configs_mut() {
        if calls_us(settings, c) {
            c.ca_bundle = Some(ByteString(ca_bundle.to_vec()));
            ours += 1;
        }
    }
    (ours > 0).then_some(desired)
}

fn bundle_has(ca_bundle: Option<&ByteString>, ca: &Cert) -> bool {
    ca_bundle.is_some_and(|b| Cert::all_from_pem(&b.0).0.contains(ca))
}

/// Whether every webhook of `live` that calls us trusts `ca` (the new CA has "reached" it).
/// A configuration none of whose webhooks calls us sends no request here: nothing to wait for.
pub fn trusts<T: WebhookConfiguration>(live: &T, settings: &Settings, ca: &Cert) -> bool {
    bundles(live, settings)
        .into_iter()
        .all(|b| bundle_has(b, ca))
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
            m.metadata.labels.as_ref().unwrap()["app.kubernetes.io/name"],
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

    /// Only caBundle, and only of the webhooks that call us: another release's or another
    /// product's webhook in the same configuration keeps its own.
    #[test]
    fn fill_writes_the_ca_bundle_of_our_webhooks_only() {
        let ours = settings(None);
        let installed = validating(&ours, b"");
        assert!(
            installed
                .client_configs()
                .iter()
                .all(|c| c.ca_bundle.is_none())
        );
        let mut live = installed.clone();
        let hooks = live.webhooks.as_mut().unwrap();
        hooks[0].timeout_seconds = Some(9); // an admin's edit through the chart stays
        let mut foreign = hooks[1].clone();
        foreign.name = "other.example.com".into();
        let svc = foreign.client_config.service.as_mut().unwrap();
        svc.name = "other".into();
        foreign.client_config.ca_bundle = Some(ByteString(b"THEIRS".to_vec()));
        hooks.push(foreign);

        let filled = fill(&live, &ours, b"PEM").unwrap();
        let b = |c: &ValidatingWebhookConfiguration, i: usize| {
            c.webhooks.as_ref().unwrap()[i]
                .client_config
                .ca_bundle
                .clone()
        };
        assert_eq!(b(&filled, 0), Some(ByteString(b"PEM".to_vec())));
        assert_eq!(b(&filled, 1), Some(ByteString(b"PEM".to_vec())));
        assert_eq!(
            b(&filled, 2),
            Some(ByteString(b"PEM".to_vec())),
            "MachineClasses'"
        );
        assert_eq!(b(&filled, 3), Some(ByteString(b"THEIRS".to_vec())));
        assert_eq!(
            filled.webhooks.as_ref().unwrap()[0].timeout_seconds,
            Some(9)
        );
        assert_eq!(bundles(&filled, &ours).len(), 3);

        // Another namespace's Service, or a URL when we run in the cluster: not ours.
        let elsewhere = Settings::new(
            "elsewhere",
            None,
            CertificateArgs::default().lifetimes().unwrap(),
        )
        .unwrap();
        assert!(fill(&live, &elsewhere, b"PEM").is_none());
        let by_url = settings(Some("https://127.0.0.1:9443"));
        assert!(fill(&live, &by_url, b"PEM").is_none());
        assert!(fill(&validating(&by_url, b""), &by_url, b"PEM").is_some());
        let other_port = settings(Some("https://127.0.0.1:9444"));
        assert!(fill(&validating(&by_url, b""), &other_port, b"PEM").is_none());
    }

    #[test]
    fn the_name_is_the_releases() {
        let s = settings(None)
            .with_webhook_configuration("edge-kubevirt-operator")
            .unwrap();
        assert_eq!(
            mutating(&s, b"").metadata.name.as_deref(),
            Some("edge-kubevirt-operator")
        );
        assert!(settings(None).with_webhook_configuration("Edge!").is_err());
    }
}
