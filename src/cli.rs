//! Command-line interface: every flag also reads its environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::parse_bind_address;
use crate::machine::templates::DEFAULT_TEMPLATE;
use crate::telemetry::logging::LogFormat;

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
    Webhook(WebhookArgs),
    /// Print the CustomResourceDefinitions as YAML.
    Crd,
    /// Default and validate Machine manifests offline; exit 1 on errors.
    Validate(ValidateArgs),
    /// Show the webhook certificates, or ask the leader to rotate them now.
    Certs(crate::commands::certs::CertsArgs),
}

#[derive(Args, Debug, Clone)]
pub struct TemplateArgs {
    /// Template for Machines that name none.
    #[arg(long, env = "DEFAULT_TEMPLATE", value_name = "DEFAULT_TEMPLATE", default_value = DEFAULT_TEMPLATE)]
    pub default_template: String,
}

#[derive(Args, Debug)]
pub struct WebhookArgs {
    /// PEM certificate chain to serve (reloaded when it changes).
    #[arg(long, env = "CERT_FILE", value_name = "CERT_FILE")]
    pub cert_file: PathBuf,
    /// PEM private key of the certificate (reloaded when it changes).
    #[arg(long, env = "KEY_FILE", value_name = "KEY_FILE")]
    pub key_file: PathBuf,
    /// Address of the HTTPS webhook server.
    #[arg(long, env = "WEBHOOK_BIND_ADDRESS", value_name = "WEBHOOK_BIND_ADDRESS", default_value = ":8443", value_parser = parse_bind_address)]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub templates: TemplateArgs,
    #[command(flatten)]
    pub endpoints: EndpointArgs,
}

/// The plain-HTTP endpoints for Prometheus and the kubelet's probes.
#[derive(Args, Debug, Clone)]
pub struct EndpointArgs {
    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, env = "METRICS_BIND_ADDRESS", value_name = "METRICS_BIND_ADDRESS", default_value = ":8080", value_parser = parse_bind_address)]
    pub metrics_bind_address: SocketAddr,
    /// Address of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_PROBE_BIND_ADDRESS", value_name = "HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081", value_parser = parse_bind_address)]
    pub health_probe_bind_address: SocketAddr,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Manifest file (multi-document YAML or JSON); `-` reads standard input.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    #[command(flatten)]
    pub templates: TemplateArgs,
}
