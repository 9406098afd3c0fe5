//! The command line ([`Cli`]) and the subcommands' entry points: gather inputs, call the core,
//! print or serve.

use clap::{Parser, Subcommand};

use crate::cli::{RunArgs, ValidateArgs, WebhookArgs};
use crate::telemetry::logging::LogFormat;

pub mod certs;
pub mod check;
pub mod orphans;
pub mod run;
pub mod validate;
pub mod webhook;
pub mod webhook_configs;

#[derive(Parser, Debug)]
#[command(
    name = "kubevirt-operator",
    version,
    about = "Admission webhooks and reconciler for vitistack.io Machines"
)]
pub struct Cli {
    /// Log format.
    #[arg(
        long,
        env = "LOG_FORMAT",
        value_name = "LOG_FORMAT",
        value_enum,
        default_value = "auto",
        global = true
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the admission webhooks over HTTPS from PEM files, with no cluster access.
    ///
    /// Without a cluster there is no SubjectAccessReview: this server SKIPS the access check
    /// that `run` makes as the Machine's author (may they `get` the Secret in
    /// `spec.cloudInit.secretRef`?) and as the NetworkConfiguration's (may they create its
    /// network-attachment-definition?). Use `run` wherever authors are not trusted.
    Webhook(Box<WebhookArgs>),
    /// Print the CustomResourceDefinitions as YAML.
    Crd,
    /// Default and validate Machine manifests offline, against the built-in classes and any
    /// MachineClass in the input (checked too); exit 1 on errors.
    Validate(ValidateArgs),
    /// Show the webhook certificates, or ask the leader to rotate them now.
    Certs(certs::CertsArgs),
    /// Run the operator: the admission webhooks and the leader-elected reconciler.
    Run(Box<RunArgs>),
    /// Print the webhook configurations to install for an operator run outside the cluster.
    WebhookConfigurations(webhook_configs::WebhookConfigsArgs),
    /// Check through the API server that the webhooks admit Machines (dry-run creates); the
    /// chart's `helm test` runs it.
    CheckAdmission(check::CheckArgs),
    /// `--orphans`: list VMs, claims and DataVolumes on every configured cluster that carry the
    /// operator's labels or proofs but belong to no live Machine, with how to adopt or delete
    /// them; nothing is deleted. Exit 1 when anything is listed.
    Check(orphans::CheckArgs),
}
