//! `kubevirt-operator webhook`: the HTTPS admission server alone, from PEM files, no cluster. Its
//! `/metrics` has the admission and certificate families `run` has (`tests/metrics_e2e.rs`
//! compares them); the reconciler's and the leader's are `run`'s alone.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::admission::{Admission, routes};
use crate::cli::WebhookArgs;
use crate::telemetry::Metrics;
use crate::telemetry::health::{Readiness, serve_endpoints};
use crate::tls::file_reload::PemFiles;
use crate::tls::listener::{Drain, Draining, Limits};
use crate::tls::{CertSlot, client_auth, server};

const RELOAD_EVERY: Duration = Duration::from_secs(1);

pub async fn run(args: WebhookArgs) -> anyhow::Result<()> {
    let catalog = args
        .templates
        .catalog()?
        .with_networks(args.networks.policy());
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
    let listener = crate::listen::bind(args.listen).await.with_context(|| {
        format!(
            "WEBHOOK_BIND_ADDRESS / --listen {}: cannot listen",
            args.listen
        )
    })?;
    let metrics = Arc::new(Metrics::new());
    let ready_slot = slot.clone();
    let drain = Drain {
        period: args.drain.drain_period,
        draining: Draining::default(),
    };
    let readiness = Readiness::new()
        .require("serving certificate loaded", move || ready_slot.is_loaded())
        .require("not shutting down", drain.draining.not_draining());
    let endpoints = serve_endpoints(&args.endpoints, metrics.clone(), Arc::new(readiness)).await?;
    tracing::info!(address = %listener.local_addr()?, "serving admission webhooks over HTTPS");
    let reloader = tokio::spawn(files.watch(slot.clone(), loaded, RELOAD_EVERY));
    // The served certificate's expiry, as `run --cert-file` reports it: a file-mode server's
    // certificate running out shows on /metrics (and in the expiry alert).
    let expiry = tokio::spawn(crate::certs::metrics::follow_served(
        slot.clone(),
        metrics.certs.clone(),
        RELOAD_EVERY,
    ));
    let refused = metrics.listener_refused.clone();
    let app = routes::router_with_metrics(admission, metrics);
    let client_ca = (args.client_ca_file.as_deref())
        .map(client_auth::load)
        .transpose()?;
    server::serve_authenticated(
        listener,
        slot,
        client_ca,
        app,
        shutdown_signal(),
        Limits::WEBHOOK.with_per_client(args.webhook_max_connections_per_client),
        drain,
        refused,
    )
    .await?;
    reloader.abort();
    expiry.abort();
    endpoints.abort();
    tracing::info!("webhook server stopped");
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown requested");
}
