//! `kubevirt-operator run`: the admission webhooks (every replica) and the reconciler (the
//! leader only, or this process when leader election is off), until SIGTERM or Ctrl-C.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::FutureExt;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::net::TcpListener;
use tower::limit::RateLimitLayer;

use crate::admission::{Admission, routes};
use crate::cli::RunArgs;
use crate::commands::webhook::shutdown_signal;
use crate::machine::Catalog;
use crate::reconciler::Settings;
use crate::reconciler::controller::{self, Clients};
use crate::reconciler::leader::{self, State};
use crate::tls::file_reload::PemFiles;
use crate::tls::{CertSlot, server};

const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// The Kubernetes configuration: from `--kubeconfig`, else inferred (in-cluster, `KUBECONFIG`,
/// ~/.kube/config).
pub async fn kube_config(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Config> {
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {}", path.display()))
        }
        None => Config::infer()
            .await
            .context("no Kubernetes configuration (in-cluster, KUBECONFIG or ~/.kube/config)"),
    }
}

/// A client limited to `qps` requests per second on average with bursts of `burst`: client-go's
/// token bucket as a window of `burst` requests per `burst / qps` seconds.
pub fn limited_client(config: Config, qps: f64, burst: u32) -> anyhow::Result<Client> {
    let window = Duration::from_secs_f64(f64::from(burst) / qps);
    let builder = ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    Ok(builder
        .with_layer(&RateLimitLayer::new(u64::from(burst), window))
        .build())
}

/// A rate-limited client from `--kubeconfig` or the inferred configuration.
pub async fn client(
    kubeconfig: Option<&std::path::Path>,
    qps: f64,
    burst: u32,
) -> anyhow::Result<Client> {
    limited_client(kube_config(kubeconfig).await?, qps, burst)
}

/// The replica's identity: `--identity`/`POD_NAME`, else hostname and process id.
fn identity(given: Option<String>) -> String {
    given.unwrap_or_else(|| {
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "kubevirt-operator".to_owned());
        format!("{host}-{}", std::process::id())
    })
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let catalog =
        Catalog::with_default(&args.templates.default_template).context("--default-template")?;
    let config = kube_config(args.kubeconfig.as_deref()).await?;
    let limited = |config| limited_client(config, args.kube_api_qps, args.kube_api_burst);
    let clients = Clients {
        api: limited(config.clone())?,
        events: limited(config.clone())?,
        lease: limited(config)?,
    };
    let settings = Settings {
        reconcile_interval: args.reconcile_interval,
        max_concurrent_reconciles: args.max_concurrent_reconciles,
        catalog: catalog.clone(),
        instance: identity(args.identity),
    };

    // Webhooks, on every replica.
    let admission = Arc::new(Admission::new(catalog)?);
    let slot = CertSlot::new();
    let files = PemFiles {
        cert: args.cert_file,
        key: args.key_file,
    };
    let loaded = files
        .load_into(&slot)
        .await
        .context("--cert-file/--key-file")?;
    let listener = TcpListener::bind(args.listen).await.with_context(|| {
        format!(
            "WEBHOOK_BIND_ADDRESS / --listen {}: cannot listen",
            args.listen
        )
    })?;
    tracing::info!(address = %listener.local_addr()?, "serving admission webhooks over HTTPS");
    let reloader = tokio::spawn(files.watch(slot.clone(), loaded, RELOAD_EVERY));

    let shutdown = shutdown_signal().shared();
    let webhooks = server::serve(listener, slot, routes::router(admission), shutdown.clone());
    let state = Arc::new(State::default());
    let reconciler = async {
        if args.leader_election {
            leader::run(clients, &args.namespace, settings, state, shutdown.clone())
                .await
                .context("leader election")
        } else {
            tracing::info!("leader election off: this process reconciles");
            state.set_leader(true);
            controller::run(clients, settings, state, shutdown.clone()).await;
            Ok(())
        }
    };
    let (served, reconciled) = tokio::join!(webhooks, reconciler);
    reloader.abort();
    served.context("webhook server")?;
    reconciled?;
    tracing::info!("stopped");
    Ok(())
}
