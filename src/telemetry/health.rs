//! `/healthz`, `/readyz` and `/metrics`, served over plain HTTP on their own addresses.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::{
    Router, extract::State, http::StatusCode, http::header, response::IntoResponse, routing::get,
};
use clap::Args;

use tokio::net::TcpListener;

use super::Metrics;
use crate::config::{parse_bind_address, parse_per_client};
use crate::tls::listener::{self, Drain, Limits, RefusedConnections};

/// The plain-HTTP endpoints for Prometheus and the kubelet's probes.
#[derive(Args, Debug, Clone)]
pub struct EndpointArgs {
    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, env = "METRICS_BIND_ADDRESS", value_name = "METRICS_BIND_ADDRESS", default_value = ":8080", value_parser = parse_bind_address)]
    pub metrics_bind_address: SocketAddr,
    /// Address of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_PROBE_BIND_ADDRESS", value_name = "HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081", value_parser = parse_bind_address)]
    pub health_probe_bind_address: SocketAddr,
    /// Connections one client address may hold open to `/metrics` (1 to 32, the cap of all).
    #[arg(long, env = "METRICS_MAX_CONNECTIONS_PER_CLIENT", value_name = "METRICS_MAX_CONNECTIONS_PER_CLIENT",
          default_value_t = 8, value_parser = parse_per_client(Limits::METRICS))]
    pub metrics_max_connections_per_client: usize,
    /// Connections one client address may hold open to the probes (1 to 32, the cap of all).
    #[arg(long, env = "HEALTH_PROBE_MAX_CONNECTIONS_PER_CLIENT", value_name = "HEALTH_PROBE_MAX_CONNECTIONS_PER_CLIENT",
          default_value_t = 8, value_parser = parse_per_client(Limits::PROBES))]
    pub health_probe_max_connections_per_client: usize,
}

type Check = Box<dyn Fn() -> bool + Send + Sync>;

/// Named readiness conditions; ready when all hold.
#[derive(Default)]
pub struct Readiness {
    checks: Vec<(&'static str, Check)>,
}

impl Readiness {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a condition, e.g. ("serving certificate loaded", ...).
    pub fn require(
        mut self,
        name: &'static str,
        check: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        self.checks.push((name, Box::new(check)));
        self
    }

    /// The names of the conditions that do not hold.
    pub fn failing(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|(_, check)| !check())
            .map(|(name, _)| *name)
            .collect()
    }
}

pub fn probes_router(readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(readiness)
}

async fn readyz(State(readiness): State<Arc<Readiness>>) -> impl IntoResponse {
    match readiness.failing().as_slice() {
        [] => (StatusCode::OK, "ok".to_owned()),
        failing => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("not ready: {}", failing.join(", ")),
        ),
    }
}

pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(m): State<Arc<Metrics>>| async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    m.encode(),
                )
            }),
        )
        .with_state(metrics)
}

/// Binds the metrics and probe endpoints (start-up fails, naming the setting, when an address is
/// taken) and serves them in the background, each within its limits, until aborted (after the
/// webhooks have drained: `/readyz` must keep saying "not ready" meanwhile).
pub async fn serve_endpoints(
    args: &EndpointArgs,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let metrics_listener = crate::listen::bind(args.metrics_bind_address)
        .await
        .with_context(|| {
            format!(
                "METRICS_BIND_ADDRESS / --metrics-bind-address {}: cannot listen",
                args.metrics_bind_address
            )
        })?;
    let probes_listener = crate::listen::bind(args.health_probe_bind_address)
        .await
        .with_context(|| {
            format!(
                "HEALTH_PROBE_BIND_ADDRESS / --health-probe-bind-address {}: cannot listen",
                args.health_probe_bind_address
            )
        })?;
    tracing::info!(
        metrics = %metrics_listener.local_addr()?,
        probes = %probes_listener.local_addr()?,
        "serving metrics and probes over HTTP"
    );
    let refused = metrics.listener_refused.clone();
    let metrics_limits = Limits::METRICS.with_per_client(args.metrics_max_connections_per_client);
    let probes_limits =
        Limits::PROBES.with_per_client(args.health_probe_max_connections_per_client);
    Ok(tokio::spawn(async move {
        tokio::join!(
            serve_plain(
                metrics_listener,
                metrics_limits,
                metrics_router(metrics),
                refused.clone()
            ),
            serve_plain(
                probes_listener,
                probes_limits,
                probes_router(readiness),
                refused
            ),
        );
    }))
}

/// Plain HTTP within `limits`, until the task is aborted; refusals are counted in `refused`.
pub async fn serve_plain(
    listener: TcpListener,
    limits: Limits,
    app: Router,
    refused: RefusedConnections,
) {
    let forever = std::future::pending();
    listener::serve(
        listener,
        limits,
        app,
        forever,
        Drain::default(),
        refused,
        |tcp, _| std::future::ready(Some(tcp)),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn ready_only_when_every_check_holds() {
        let loaded = Arc::new(AtomicBool::new(false));
        let flag = loaded.clone();
        let r = Readiness::new().require("serving certificate loaded", move || {
            flag.load(Ordering::SeqCst)
        });
        assert_eq!(r.failing(), ["serving certificate loaded"]);
        loaded.store(true, Ordering::SeqCst);
        assert!(r.failing().is_empty());
    }
}
