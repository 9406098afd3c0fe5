//! `kubevirt-operator check-admission`: proves, through the API server, that Machines are
//! admitted by the operator's webhooks. The chart's `helm test` Pod runs it (and an admin may,
//! with any kubeconfig allowed to create Machines in the namespace).
//!
//! Two dry-run creates, which reach the webhooks but store nothing: a valid Machine must come
//! back defaulted by the mutating webhook (its cleanup finalizer added), and one naming a
//! template that does not exist must be denied by a webhook. A failure policy of Ignore, a
//! namespace outside the webhooks' namespaceSelector or a configuration that is not installed
//! fails the first; a webhook that answers nothing fails both.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use kube::api::{Api, PostParams};

use crate::api::names::FINALIZER;
use crate::api::{Machine, MachineSpec};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Namespace to make the dry-run Machines in: one whose Machines the webhooks are called for.
    #[arg(long, short = 'n', env = "CHECK_NAMESPACE", value_parser = crate::config::parse_dns_label)]
    pub namespace: String,
}

/// What the two dry runs showed.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Checked,
    /// The valid Machine was admitted without the mutating webhook's finalizer.
    NotMutated,
    /// The valid Machine was refused (the webhooks did not answer, or refused it).
    Refused(String),
    /// The invalid Machine was not denied by a webhook.
    NotDenied(String),
}

/// Decides from the answers to the two dry runs (pure).
pub fn verdict(valid: Result<&Machine, &str>, invalid: Result<&Machine, &str>) -> Verdict {
    match valid {
        Err(e) => return Verdict::Refused(e.to_owned()),
        Ok(m)
            if !m
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER) =>
        {
            return Verdict::NotMutated;
        }
        Ok(_) => {}
    }
    match invalid {
        Err(e) if e.contains("admission webhook") && e.contains("denied the request") => {
            Verdict::Checked
        }
        Err(e) => Verdict::NotDenied(e.to_owned()),
        Ok(_) => Verdict::NotDenied("it was admitted".to_owned()),
    }
}

fn machine(template: &str) -> Machine {
    let mut m = Machine::new(
        "",
        MachineSpec {
            template: Some(template.to_owned()),
            ..MachineSpec::default()
        },
    );
    m.metadata.name = None;
    m.metadata.generate_name = Some("admission-check-".to_owned());
    m
}

pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the cluster (KUBECONFIG or in-cluster configuration)")?;
    let machines: Api<Machine> = Api::namespaced(client, &args.namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answer = |r: Result<Machine, kube::Error>| r.map_err(|e| e.to_string());
    let valid = answer(machines.create(&dry_run, &machine("small")).await);
    let invalid = answer(
        machines
            .create(&dry_run, &machine("no-such-template"))
            .await,
    );
    let ns = &args.namespace;
    let outcome = verdict(
        valid.as_ref().map_err(String::as_str),
        invalid.as_ref().map_err(String::as_str),
    );
    match outcome {
        Verdict::Checked => {
            println!(
                "Machines in {ns} are admitted by the webhooks: a dry-run Machine was defaulted \
                 (finalizer {FINALIZER}) and one with an unknown template denied"
            );
            return Ok(ExitCode::SUCCESS);
        }
        Verdict::NotMutated => eprintln!(
            "a dry-run Machine in {ns} was admitted WITHOUT the mutating webhook: is the \
             MutatingWebhookConfiguration installed, with failurePolicy Fail, and {ns} in its \
             namespaceSelector?"
        ),
        Verdict::Refused(e) => eprintln!("a valid dry-run Machine in {ns} was refused: {e}"),
        Verdict::NotDenied(e) => eprintln!(
            "a dry-run Machine in {ns} with an unknown template was not denied by a webhook: {e}"
        ),
    }
    Ok(ExitCode::FAILURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_mutated_machine_and_a_webhook_denial_pass() {
        let plain = machine("small");
        let mut mutated = plain.clone();
        mutated.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
        let denied = r#"admission webhook "mutate.machines.vitistack.io" denied the request: spec.template: Unsupported value"#;
        assert_eq!(verdict(Ok(&mutated), Err(denied)), Verdict::Checked);
        assert_eq!(verdict(Ok(&plain), Err(denied)), Verdict::NotMutated);
        assert!(matches!(
            verdict(Err("failed calling webhook"), Err(denied)),
            Verdict::Refused(_)
        ));
        assert!(matches!(
            verdict(Ok(&mutated), Ok(&plain)),
            Verdict::NotDenied(_)
        ));
        assert!(matches!(
            verdict(Ok(&mutated), Err("forbidden: cannot create machines")),
            Verdict::NotDenied(_)
        ));
        assert_eq!(machine("x").metadata.name, None);
    }
}
