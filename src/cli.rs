//! The flags the subcommands share or serve with (`webhook`, `run`, `validate`); every flag also
//! reads its environment variable. The command line itself is [`crate::commands::Cli`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::config::{
    WatchScope, parse_bind_address, parse_dns_label, parse_dns_subdomain, parse_duration,
    parse_duration_or_zero, parse_image, parse_lease_duration, parse_per_client, parse_qps,
    parse_watch_namespaces,
};
use crate::machine::Catalog;
use crate::machine::catalog::ExternalEviction;
use crate::machine::machine_types::MachineTypes;
use crate::machine::network_policy::{DEFAULT_VLANS, NetworkPolicy, Vlans, interface_name_problem};
use crate::machine::templates::DEFAULT_TEMPLATE;
use crate::telemetry::health::EndpointArgs;
use crate::tls::listener::Limits;

#[derive(Args, Debug, Clone)]
pub struct TemplateArgs {
    /// Template for Machines that name none.
    #[arg(long, env = "DEFAULT_TEMPLATE", value_name = "DEFAULT_TEMPLATE", default_value = DEFAULT_TEMPLATE)]
    pub default_template: String,
    /// Machine types KubeVirt accepts (its emulatedMachines), comma-separated glob patterns
    /// matched against the type the VM gets (`pc-q35` is written `q35`, `pc-i440fx` `pc`).
    #[arg(long, env = "ALLOWED_MACHINE_TYPES", value_name = "ALLOWED_MACHINE_TYPES",
          default_value = "q35*,pc-q35*", value_parser = MachineTypes::parse)]
    pub allowed_machine_types: MachineTypes,
    /// What a node drain does to the VM of a Machine that sets no `evictionStrategy`:
    /// LiveMigrate, LiveMigrateIfPossible, External, or None (KubeVirt's cluster default).
    #[arg(long, env = "DEFAULT_EVICTION_STRATEGY", value_name = "DEFAULT_EVICTION_STRATEGY",
          default_value = crate::api::placement::DEFAULT_EVICTION_STRATEGY,
          value_parser = clap::builder::PossibleValuesParser::new(crate::api::placement::EVICTION_STRATEGIES))]
    pub default_eviction_strategy: String,
    /// What the operator does when a node drain asks a VM whose eviction strategy is External
    /// to leave: `notify` (the Machine's `EvictionRequested` condition and a Warning Event;
    /// someone else moves the VM) or `restart` (the VM is stopped and started, so the scheduler
    /// places it elsewhere and the drain finishes).
    #[arg(long, env = "EXTERNAL_EVICTION", value_name = "EXTERNAL_EVICTION", value_enum,
          default_value_t = ExternalEviction::Notify)]
    pub external_eviction: ExternalEviction,
    /// Machine labels whose key starts with one of these prefixes are copied onto the VM and
    /// its template (comma-separated, e.g. `team.example.com/,app`), so selectors and
    /// NetworkPolicies can pick VMs. Unset or empty: none. Never replaces the operator's labels.
    #[arg(long, env = "PROPAGATE_LABEL_PREFIXES", value_name = "PROPAGATE_LABEL_PREFIXES",
          default_value = "", value_parser = parse_label_prefixes)]
    pub propagate_label_prefixes: LabelPrefixes,
}

/// `--propagate-label-prefixes`, parsed.
#[derive(Clone, Debug, Default)]
pub struct LabelPrefixes(pub Vec<String>);

/// Each prefix must be the start of a valid label key: `[prefix/]name` characters only.
fn parse_label_prefixes(s: &str) -> Result<LabelPrefixes, String> {
    let mut out = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let valid = p.len() <= 253 + 1 + 63
            && p.matches('/').count() <= 1
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        if !valid {
            return Err(format!(
                "{p:?} is not the start of a label key (letters, digits, '-', '_', '.', at most one '/')"
            ));
        }
        out.push(p.to_owned());
    }
    Ok(LabelPrefixes(out))
}

impl TemplateArgs {
    /// What Machines may ask for; networks are added by the commands that admit them.
    pub fn catalog(&self) -> anyhow::Result<Catalog> {
        let catalog = Catalog::with_default(&self.default_template)
            .map_err(|e| anyhow::anyhow!("DEFAULT_TEMPLATE / --default-template: {e}"))?;
        Ok(catalog
            .with_machine_types(self.allowed_machine_types.clone())
            .with_eviction_strategy(&self.default_eviction_strategy)
            .with_external_eviction(self.external_eviction)
            .with_label_prefixes(self.propagate_label_prefixes.0.clone()))
    }
}

/// What NetworkConfigurations may ask of the nodes. Unset, nothing: no bridge is allowed.
#[derive(Args, Debug, Clone)]
pub struct NetworkArgs {
    /// Host bridges NetworkConfigurations may name, comma-separated (e.g. br0,br-vms).
    /// Unset or empty: none, so no NetworkConfiguration is admitted or attached.
    #[arg(long, env = "ALLOWED_BRIDGES", value_name = "ALLOWED_BRIDGES", default_value = "",
          value_parser = parse_bridges)]
    pub allowed_bridges: Bridges,
    /// VLAN IDs NetworkConfigurations may use on those bridges: IDs and ranges, comma-separated
    /// (e.g. 100-199,300); 0 is untagged. Unset: untagged only.
    #[arg(long, env = "ALLOWED_VLANS", value_name = "ALLOWED_VLANS", default_value = DEFAULT_VLANS,
          value_parser = Vlans::parse)]
    pub allowed_vlans: Vlans,
}

impl NetworkArgs {
    pub fn policy(&self) -> NetworkPolicy {
        NetworkPolicy::new(self.allowed_bridges.0.clone(), self.allowed_vlans.clone())
    }
}

/// `--allowed-bridges`, parsed as one value so that an empty setting means none.
#[derive(Clone, Debug, Default)]
pub struct Bridges(pub Vec<String>);

fn parse_bridges(s: &str) -> Result<Bridges, String> {
    let mut bridges = Vec::new();
    for b in s.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        if let Some(problem) = interface_name_problem(b) {
            return Err(format!("bridge {b:?} {problem}"));
        }
        bridges.push(b.to_owned());
    }
    Ok(Bridges(bridges))
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
    /// PEM CA certificates: only callers with a certificate they sign (kube-apiserver, given
    /// one in its AdmissionConfiguration) may call the webhooks. Unset: any caller.
    #[arg(long, env = "CLIENT_CA_FILE", value_name = "CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// Connections one client address may hold open to the webhooks (1 to 256, the cap of all);
    /// more are refused, so one client cannot take every slot.
    #[arg(long, env = "WEBHOOK_MAX_CONNECTIONS_PER_CLIENT", value_name = "WEBHOOK_MAX_CONNECTIONS_PER_CLIENT",
          default_value_t = 64, value_parser = parse_per_client(Limits::WEBHOOK))]
    pub webhook_max_connections_per_client: usize,
    #[command(flatten)]
    pub templates: TemplateArgs,
    #[command(flatten)]
    pub networks: NetworkArgs,
    #[command(flatten)]
    pub endpoints: EndpointArgs,
    #[command(flatten)]
    pub drain: DrainArgs,
}

/// The webhook server's stop sequence on SIGTERM.
#[derive(Args, Debug, Clone)]
pub struct DrainArgs {
    /// How long the webhook server keeps answering after SIGTERM (with `/readyz` failing), so
    /// kube-apiserver stops routing here before the listener closes. Keep it plus 10s (the
    /// longest a request may take) under the pod's terminationGracePeriodSeconds (30s).
    #[arg(long, env = "DRAIN_PERIOD", value_name = "DRAIN_PERIOD", default_value = "10s", value_parser = parse_duration)]
    pub drain_period: Duration,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Manifest file (multi-document YAML or JSON) of Machines and MachineClasses; `-` reads
    /// standard input.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    #[command(flatten)]
    pub templates: TemplateArgs,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Kubeconfig file. Unset: the in-cluster service account, else `KUBECONFIG` (which may list
    /// several files, as kubectl reads it) or ~/.kube/config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the operator (its Lease lives here).
    #[arg(
        long,
        env = "NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "kubevirt-operator-system"
    )]
    pub namespace: String,
    /// How often every Machine is re-checked, e.g. 30s, 5m, 1m30s; also the error backoff cap.
    #[arg(long, env = "RECONCILE_INTERVAL", value_name = "RECONCILE_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub reconcile_interval: Duration,
    /// The least time between two runs of one Machine's snapshot schedule, e.g. 15m, 1h: a
    /// schedule firing more often is clamped to it (0s: no minimum).
    #[arg(long, env = "MIN_SNAPSHOT_INTERVAL", value_name = "MIN_SNAPSHOT_INTERVAL", default_value = "15m", value_parser = parse_duration_or_zero)]
    pub min_snapshot_interval: Duration,
    /// How long the node of a Machine's VM may be NotReady or unreachable before the Machine
    /// shows Ready=False, reason NodeUnreachable, e.g. 60s, 5m (0s: at once).
    #[arg(long, env = "NODE_UNREACHABLE_GRACE", value_name = "NODE_UNREACHABLE_GRACE", default_value = "60s", value_parser = parse_duration_or_zero)]
    pub node_unreachable_grace: Duration,
    /// Restarts the operator performs (restarted-at, updateStrategy: Restart, External
    /// eviction restarts) at once at most, cluster-wide; more wait in line with RestartPending.
    /// A restart counts until its new VMI is Running (0: no limit).
    #[arg(
        long,
        env = "MAX_CONCURRENT_RESTARTS",
        value_name = "MAX_CONCURRENT_RESTARTS",
        default_value_t = 10
    )]
    pub max_concurrent_restarts: u32,
    /// The same, in one namespace (0: no limit beyond --max-concurrent-restarts).
    #[arg(
        long,
        env = "MAX_CONCURRENT_RESTARTS_PER_NAMESPACE",
        value_name = "MAX_CONCURRENT_RESTARTS_PER_NAMESPACE",
        default_value_t = 0
    )]
    pub max_concurrent_restarts_per_namespace: u32,
    /// How long a restart holds its slot at most when its new VMI does not reach Running, e.g.
    /// 10m (0s: until it does).
    #[arg(long, env = "RESTART_TIMEOUT", value_name = "RESTART_TIMEOUT", default_value = "10m", value_parser = parse_duration_or_zero)]
    pub restart_timeout: Duration,
    /// How often the leader counts leftovers on every cluster for the
    /// `kubevirt_operator_orphans` gauges (lists only), e.g. 10m, 1h (0s: never).
    #[arg(long, env = "ORPHAN_CHECK_INTERVAL", value_name = "ORPHAN_CHECK_INTERVAL", default_value = "10m", value_parser = parse_duration_or_zero)]
    pub orphan_check_interval: Duration,
    /// Scheduled snapshots being taken at once at most, across every Machine; more due ones
    /// wait for one to finish.
    #[arg(long, env = "MAX_SNAPSHOTS_IN_FLIGHT", value_name = "MAX_SNAPSHOTS_IN_FLIGHT", default_value_t = 10,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub max_snapshots_in_flight: u16,
    /// The image of the Pod a restore makes to bind claims of a WaitForFirstConsumer storage
    /// class (it only has to be scheduled, and never runs anything): the pause image, or a
    /// mirror of it for clusters that cannot pull from registry.k8s.io.
    #[arg(long, env = "RESTORE_PAUSE_IMAGE", value_name = "RESTORE_PAUSE_IMAGE",
          default_value = crate::snapshots::context::DEFAULT_PAUSE_IMAGE, value_parser = parse_image)]
    pub restore_pause_image: String,
    /// Machines reconciled at the same time.
    #[arg(long, env = "MAX_CONCURRENT_RECONCILES", value_name = "MAX_CONCURRENT_RECONCILES", default_value_t = 5,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,
    /// Accept a new ownership key when its Secret is missing although objects made under the
    /// lost key exist (locally or on a KubevirtConfig's cluster): remote objects are then
    /// re-proven once by their labels and names. Without it the leader reconciles nothing until
    /// the Secret is restored. Only when the Secret is lost for good.
    #[arg(long, env = "NEW_OWNERSHIP_KEY", value_name = "NEW_OWNERSHIP_KEY")]
    pub new_ownership_key: bool,
    /// Elect a leader among replicas; only the leader reconciles.
    #[arg(long, env = "LEADER_ELECTION", value_name = "LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub leader_election: bool,
    /// How long the leader's Lease lasts after a renewal: a dead leader's replica takes over
    /// after at most this long. The leader renews at half of it.
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", value_name = "LEADER_ELECTION_LEASE_DURATION",
          default_value = "15s", value_parser = parse_lease_duration)]
    pub leader_election_lease_duration: Duration,
    /// This replica's identity in the Lease and in Events. Unset: hostname and process id.
    #[arg(long, env = "POD_NAME", value_name = "POD_NAME")]
    pub identity: Option<String>,
    /// Sustained rate of requests to the API server, per second.
    #[arg(long, env = "KUBE_API_QPS", value_name = "KUBE_API_QPS", default_value = "50", value_parser = parse_qps)]
    pub kube_api_qps: f64,
    /// Requests allowed in a burst above the sustained rate.
    #[arg(long, env = "KUBE_API_BURST", value_name = "KUBE_API_BURST", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_api_burst: u32,
    /// How long a request to the API server may go without an answer (response headers, or the
    /// next part of its body) before it fails and is retried. Watches are exempt; Lease requests
    /// use a fifth of the Lease duration.
    #[arg(long, env = "KUBE_API_TIMEOUT", value_name = "KUBE_API_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub kube_api_timeout: Duration,
    /// PEM certificate chain to serve instead of self-managed certificates (e.g. from
    /// cert-manager; reloaded when it changes). Needs --key-file (checked by `run`, so that the
    /// error names the value given).
    #[arg(long, env = "CERT_FILE", value_name = "CERT_FILE")]
    pub cert_file: Option<PathBuf>,
    /// PEM private key of --cert-file.
    #[arg(long, env = "KEY_FILE", value_name = "KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// Where kube-apiserver reaches the webhooks when the operator runs outside the cluster,
    /// e.g. https://127.0.0.1:8443; the serving certificate then carries that host.
    #[arg(long, env = "WEBHOOK_URL", value_name = "WEBHOOK_URL")]
    pub webhook_url: Option<String>,
    /// Address of the HTTPS webhook server.
    #[arg(long, env = "WEBHOOK_BIND_ADDRESS", value_name = "WEBHOOK_BIND_ADDRESS", default_value = ":8443", value_parser = parse_bind_address)]
    pub listen: SocketAddr,
    /// PEM CA certificates: only callers with a certificate they sign (kube-apiserver, given
    /// one in its AdmissionConfiguration) may call the webhooks. Unset: any caller.
    #[arg(long, env = "CLIENT_CA_FILE", value_name = "CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// Connections one client address may hold open to the webhooks (1 to 256, the cap of all);
    /// more are refused, so one client cannot take every slot.
    #[arg(long, env = "WEBHOOK_MAX_CONNECTIONS_PER_CLIENT", value_name = "WEBHOOK_MAX_CONNECTIONS_PER_CLIENT",
          default_value_t = 64, value_parser = parse_per_client(Limits::WEBHOOK))]
    pub webhook_max_connections_per_client: usize,
    /// Address of the aggregated API `subresources.vitistack.io` (HTTPS, the webhooks'
    /// certificate; only kube-apiserver's front proxy is let in). Unset: not served.
    #[arg(long, env = "SUBRESOURCES_BIND_ADDRESS", value_name = "SUBRESOURCES_BIND_ADDRESS", value_parser = parse_bind_address)]
    pub subresources_listen: Option<SocketAddr>,
    /// The Service in front of the webhook server, in the operator's namespace: the webhook
    /// configurations call it and the serving certificate names it. Deployments pass the name
    /// of the Service they ship (so a kustomize namePrefix or a Helm release name carries over).
    #[arg(long, env = "WEBHOOK_SERVICE_NAME", value_name = "WEBHOOK_SERVICE_NAME",
          default_value = crate::certs::WEBHOOK_SERVICE, value_parser = parse_dns_label)]
    pub webhook_service_name: String,
    /// The Mutating- and ValidatingWebhookConfiguration (one name for both) the chart or
    /// manifests install, named per release; self-managed certificates fill their caBundle.
    #[arg(long, env = "WEBHOOK_CONFIGURATION_NAME", value_name = "WEBHOOK_CONFIGURATION_NAME",
          default_value = crate::certs::WEBHOOK_CONFIGURATION, value_parser = parse_dns_subdomain)]
    pub webhook_configuration_name: String,
    /// The namespaces whose Machines are reconciled, comma-separated (e.g. `team-a,team-b`);
    /// unset or empty: every namespace. Listed, the operator needs a Role in each of them only,
    /// instead of cluster-wide rights on Secrets, claims and VMs; it runs one set of watches per
    /// namespace listed.
    #[arg(long, env = "WATCH_NAMESPACES", value_name = "WATCH_NAMESPACES", default_value = "",
          value_parser = parse_watch_namespaces)]
    pub watch_namespaces: WatchScope,
    #[command(flatten)]
    pub templates: TemplateArgs,
    #[command(flatten)]
    pub networks: NetworkArgs,
    #[command(flatten)]
    pub endpoints: EndpointArgs,
    #[command(flatten)]
    pub drain: DrainArgs,
    #[command(flatten)]
    pub certs: crate::certs::CertificateArgs,
    #[command(flatten)]
    pub clusters: ClusterArgs,
    #[command(flatten)]
    pub sessions: crate::subresources::session_args::SessionArgs,
}

/// Remote KubeVirt clusters (KubevirtConfigs).
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// How often the leader probes each KubevirtConfig's cluster (API server, credentials, the
    /// APIs it serves), besides at each change of its kubeconfig Secret, e.g. 30s, 1m.
    #[arg(long, env = "KUBEVIRT_CONFIG_PROBE_INTERVAL", value_name = "KUBEVIRT_CONFIG_PROBE_INTERVAL",
          default_value = "30s", value_parser = parse_duration)]
    pub kubevirt_config_probe_interval: Duration,
    /// The KubevirtConfig whose cluster gets the Machines that name none (annotation
    /// `vitistack.io/kubevirt-config`). Unset: the local cluster.
    #[arg(long, env = "DEFAULT_KUBEVIRT_CONFIG", value_name = "DEFAULT_KUBEVIRT_CONFIG",
          value_parser = parse_dns_subdomain)]
    pub default_kubevirt_config: Option<String>,
}

impl ClusterArgs {
    /// The remote clusters' settings; their clients share the operator's rate limit and read
    /// timeout settings (each client its own bucket).
    pub fn settings(
        &self,
        qps: f64,
        burst: u32,
        read_timeout: Duration,
    ) -> crate::clusters::Settings {
        crate::clusters::Settings {
            qps,
            burst,
            read_timeout,
            default_kubevirt_config: self.default_kubevirt_config.clone(),
            ..crate::clusters::Settings::new(self.kubevirt_config_probe_interval)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        run: super::RunArgs,
    }

    /// `--min-snapshot-interval 0s` switches the minimum off, as its help, the chart and the
    /// docs say; other durations parse as every duration does.
    #[test]
    fn the_minimum_snapshot_interval_may_be_zero() {
        for (value, secs) in [("0s", 0), ("0", 0), ("15m", 900)] {
            let cmd = Cmd::try_parse_from(["x", "--min-snapshot-interval", value])
                .unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(cmd.run.min_snapshot_interval.as_secs(), secs, "{value}");
        }
        let e = Cmd::try_parse_from(["x", "--min-snapshot-interval=-1m"])
            .err()
            .expect("negative refused");
        assert!(e.to_string().contains("--min-snapshot-interval"), "{e}");
    }
}
