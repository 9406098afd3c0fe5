//! The Mutating- and ValidatingWebhookConfiguration: their shape as the chart and `manifests/`
//! install them (pure functions of the settings; tests compare both installs with it, and
//! `kubevirt-operator webhook-configurations` prints it for an operator outside the cluster),
//! and the one thing the operator writes into the installed ones: the caBundle of each webhook
//! that calls it. The operator never creates them, so uninstalling removes them.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::config::Settings;
use super::{NAME_LABEL, OPERATOR_NAME};
use crate::admission::{
    MACHINE_CLASS_VALIDATE_PATH, MUTATE_PATH, NETWORK_VALIDATE_PATH, RESTORE_VALIDATE_PATH,
    SNAPSHOT_VALIDATE_PATH, VALIDATE_PATH,
};

pub const MUTATING_WEBHOOK_NAME: &str = "mutate.machines.vitistack.io";
pub const VALIDATING_WEBHOOK_NAME: &str = "validate.machines.vitistack.io";
pub const NETWORK_WEBHOOK_NAME: &str = "validate.networkconfigurations.vitistack.io";
pub const MACHINE_CLASS_WEBHOOK_NAME: &str = "validate.machineclasses.vitistack.io";
pub const SNAPSHOT_WEBHOOK_NAME: &str = "validate.machinesnapshots.vitistack.io";
pub const RESTORE_WEBHOOK_NAME: &str = "validate.machinerestores.vitistack.io";
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

/// The name of the one matchCondition (Kubernetes 1.28+; the chart renders it there only).
pub const FINALIZER_ONLY_CONDITION: &str = "not-a-finalizer-only-update";

/// Its CEL: true (call the webhook) unless the request is an UPDATE that changes
/// `metadata.finalizers` and nothing else but what the API server itself changes
/// (`managedFields`, `resourceVersion`, `generation`). Removing a finalizer then never waits for
/// a webhook that is down: no webhook checks finalizers. `oldObject` is null unless UPDATE, so
/// the first test guards every use of it; `has()` because `finalizers` may be absent.
/// The chart holds the same text (tests/chart_render.rs compares).
pub const FINALIZER_ONLY_EXPRESSION: &str = "\
request.operation != 'UPDATE' || !(
  (has(object.metadata.finalizers) ? object.metadata.finalizers : []) !=
    (has(oldObject.metadata.finalizers) ? oldObject.metadata.finalizers : []) &&
  object.all(k, k == 'metadata' || (k in oldObject && object[k] == oldObject[k])) &&
  oldObject.all(k, k in object) &&
  object.metadata.all(k, k in ['finalizers', 'managedFields', 'resourceVersion', 'generation'] ||
    (k in oldObject.metadata && object.metadata[k] == oldObject.metadata[k])) &&
  oldObject.metadata.all(k, k in ['finalizers', 'managedFields', 'resourceVersion', 'generation'] ||
    k in object.metadata))";

fn match_conditions() -> Vec<MatchCondition> {
    vec![MatchCondition {
        name: FINALIZER_ONLY_CONDITION.to_owned(),
        expression: FINALIZER_ONLY_EXPRESSION.to_owned(),
    }]
}

/// `config` with the finalizer-only matchCondition on every webhook: the shape the chart renders
/// for Kubernetes 1.28+ (where `matchConditions` is served). Older servers drop the field, so
/// the plain shape is what they install; `manifests/` ships it, and its `match-conditions/`
/// component adds this one.
pub fn skipping_finalizer_updates<T: WebhookConfiguration>(mut config: T) -> T {
    for c in config.match_conditions_mut() {
        *c = Some(match_conditions());
    }
    config
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

/// The ValidatingWebhookConfiguration for `ca_bundle` (PEM): Machines, NetworkConfigurations,
/// MachineClasses, MachineSnapshots and MachineRestores.
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
            webhook_for(
                settings,
                "machinesnapshots",
                SNAPSHOT_WEBHOOK_NAME,
                SNAPSHOT_VALIDATE_PATH,
                ca_bundle,
            ),
            webhook_for(
                settings,
                "machinerestores",
                RESTORE_WEBHOOK_NAME,
                RESTORE_VALIDATE_PATH,
                ca_bundle,
            ),
            // Last: kustomize's manifests/machineclasses/ appends it (tests/chart_render.rs).
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
    fn match_conditions_mut(&mut self) -> Vec<&mut Option<Vec<MatchCondition>>>;
}

/// Both kinds hold their webhooks' clientConfigs and matchConditions the same way; only the
/// webhook type differs.
macro_rules! webhook_configuration {
    ($($kind:ty),*) => {$(
        impl WebhookConfiguration for $kind {
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
            fn match_conditions_mut(&mut self) -> Vec<&mut Option<Vec<MatchCondition>>> {
                let hooks = self.webhooks.iter_mut().flatten();
                hooks.map(|h| &mut h.match_conditions).collect()
            }
        }
    )*};
}

webhook_configuration!(MutatingWebhookConfiguration, ValidatingWebhookConfiguration);

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

#[cfg(test)]
mod match_condition_tests;
#[cfg(test)]
mod tests;
