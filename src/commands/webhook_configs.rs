//! `kubevirt-operator webhook-configurations`: prints the Mutating- and ValidatingWebhookConfiguration
//! as the chart and `manifests/` install them (no caBundle: the operator fills it), for an
//! operator run outside the cluster (`--webhook-url`), where neither install applies:
//! `kubevirt-operator webhook-configurations --webhook-url https://127.0.0.1:8443 | kubectl apply -f -`.

use clap::Args;

use crate::certs::{self, CertificateArgs, webhook_config};
use crate::config::{WatchScope, parse_dns_label, parse_dns_subdomain, parse_watch_namespaces};

#[derive(Args, Debug)]
pub struct WebhookConfigsArgs {
    /// The operator's namespace (its webhook Service's).
    #[arg(long, env = "NAMESPACE", default_value = "kubevirt-operator-system", value_parser = parse_dns_label)]
    pub namespace: String,
    /// Where kube-apiserver reaches the webhooks outside the cluster; unset: the Service.
    #[arg(long, env = "WEBHOOK_URL")]
    pub webhook_url: Option<String>,
    /// The webhook Service (when no --webhook-url is given).
    #[arg(long, env = "WEBHOOK_SERVICE_NAME", default_value = certs::WEBHOOK_SERVICE, value_parser = parse_dns_label)]
    pub webhook_service_name: String,
    /// The configurations' name (give the operator the same).
    #[arg(long, env = "WEBHOOK_CONFIGURATION_NAME", default_value = certs::WEBHOOK_CONFIGURATION,
          value_parser = parse_dns_subdomain)]
    pub webhook_configuration_name: String,
    /// Namespaces the webhooks are called for, comma-separated; empty: all.
    #[arg(long, env = "WATCH_NAMESPACES", default_value = "", value_parser = parse_watch_namespaces)]
    pub watch_namespaces: WatchScope,
    /// For Kubernetes 1.28+ (which serves `matchConditions`): give every webhook the condition
    /// that skips updates changing only finalizers, as the chart does there.
    #[arg(long, env = "MATCH_CONDITIONS")]
    pub match_conditions: bool,
}

/// The two configurations as YAML documents.
pub fn render(args: &WebhookConfigsArgs) -> anyhow::Result<String> {
    let lifetimes = CertificateArgs::default().lifetimes()?;
    let settings = certs::Settings::new(&args.namespace, args.webhook_url.as_deref(), lifetimes)?
        .with_service(&args.webhook_service_name)?
        .with_webhook_configuration(&args.webhook_configuration_name)?
        .with_watch_scope(&args.watch_namespaces);
    let mut mutating = webhook_config::mutating(&settings, b"");
    let mut validating = webhook_config::validating(&settings, b"");
    if args.match_conditions {
        mutating = webhook_config::skipping_finalizer_updates(mutating);
        validating = webhook_config::skipping_finalizer_updates(validating);
    }
    Ok(format!(
        "---\n{}---\n{}",
        serde_yaml::to_string(&with_kind(&mutating)?)?,
        serde_yaml::to_string(&with_kind(&validating)?)?
    ))
}

/// k8s-openapi's types serialize apiVersion and kind themselves; this only checks they did.
fn with_kind<T: serde::Serialize>(obj: &T) -> anyhow::Result<serde_json::Value> {
    let v = serde_json::to_value(obj)?;
    anyhow::ensure!(v.get("kind").is_some(), "no kind in {v}");
    Ok(v)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: WebhookConfigsArgs,
    }

    #[test]
    fn prints_both_for_the_url_without_a_ca_bundle() {
        let cmd = Cmd::try_parse_from([
            "x",
            "--webhook-url",
            "https://127.0.0.1:9443",
            "--webhook-configuration-name",
            "dev",
        ])
        .unwrap();
        let yaml = render(&cmd.args).unwrap();
        assert!(
            yaml.contains("kind: MutatingWebhookConfiguration"),
            "{yaml}"
        );
        assert!(
            yaml.contains("kind: ValidatingWebhookConfiguration"),
            "{yaml}"
        );
        assert!(yaml.contains("name: dev\n"), "{yaml}");
        assert!(
            yaml.contains("url: https://127.0.0.1:9443/mutate-vitistack-io-v1alpha1-machine"),
            "{yaml}"
        );
        assert!(!yaml.contains("caBundle"), "{yaml}");
        assert!(!yaml.contains("matchConditions"), "{yaml}");
        let cmd = Cmd::try_parse_from(["x", "--match-conditions"]).unwrap();
        let yaml = render(&cmd.args).unwrap();
        assert_eq!(
            yaml.matches(webhook_config::FINALIZER_ONLY_CONDITION)
                .count(),
            6,
            "every webhook: {yaml}"
        );
    }
}
