//! `kubevirt-operator run`: the admission webhooks (every replica) and the reconciler (the
//! leader only, or this process when leader election is off), until SIGTERM or Ctrl-C.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::FutureExt;

use crate::access::AccessReviewer;
use crate::addresses::LiveAddresses;
use crate::admission::{Admission, routes};
use crate::api::names::FIELD_MANAGER;
use crate::certs::{self, CertManager};
use crate::classes::{self, LiveCatalog};
use crate::cli::RunArgs;
use crate::client::{kube_config, limited_client};
use crate::commands::webhook::shutdown_signal;
use crate::leader::{self, Election, Stop};
use crate::macs::{self, LiveMacs};
use crate::reconciler::{self, Clients, Settings, run::readiness};
use crate::telemetry::Metrics;
use crate::telemetry::health::{Readiness, serve_endpoints};
use crate::tls::file_reload::PemFiles;
use crate::tls::listener::{Drain, Draining, Limits};
use crate::tls::{CertSlot, client_auth, server};

const RELOAD_EVERY: Duration = Duration::from_secs(1);

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

pub async fn run(args: Box<RunArgs>) -> anyhow::Result<()> {
    let args = *args;
    match (&args.cert_file, &args.key_file) {
        (Some(cert), None) => anyhow::bail!(
            "CERT_FILE / --cert-file {} needs KEY_FILE / --key-file (or neither, for self-managed certificates)",
            cert.display()
        ),
        (None, Some(key)) => anyhow::bail!(
            "KEY_FILE / --key-file {} needs CERT_FILE / --cert-file (or neither, for self-managed certificates)",
            key.display()
        ),
        _ => {}
    }
    // Machines are refused until the MachineClasses are read (a watch below keeps them).
    let catalog = LiveCatalog::watched(
        args.templates
            .catalog()?
            .with_networks(args.networks.policy()),
    );
    let lifetimes = args.certs.lifetimes()?;
    let config = kube_config(args.kubeconfig.as_deref()).await?;
    let limited =
        |config, timeout| limited_client(config, args.kube_api_qps, args.kube_api_burst, timeout);
    // The access check has a client of its own: a backlog of reconcile writes never delays an
    // admission (it has 4 s in all).
    let access_client = limited(config.clone(), args.kube_api_timeout)?;
    let clients = Clients {
        api: limited(config.clone(), args.kube_api_timeout)?,
        events: limited(config.clone(), args.kube_api_timeout)?,
        lease: limited(
            config,
            leader::request_timeout(args.leader_election_lease_duration),
        )?,
    };
    let leadership = Arc::new(leader::State::default());
    let metrics = {
        let mut metrics = Metrics::new();
        let leadership = leadership.clone();
        metrics.register_leader(move || leadership.is_leader());
        Arc::new(metrics)
    };
    let cluster_settings = args.clusters.settings(
        args.kube_api_qps,
        args.kube_api_burst,
        args.kube_api_timeout,
    );
    // Each KubevirtConfig's health and client, for the reconciler (filled on the leader).
    let registry = crate::clusters::Registry::new();
    let settings = Settings {
        reconcile_interval: args.reconcile_interval,
        max_concurrent_reconciles: args.max_concurrent_reconciles,
        catalog: catalog.clone(),
        instance: identity(args.identity),
        metrics: metrics.clone(),
        scopes: reconciler::run::watches::scopes(&args.watch_namespaces),
        namespace: args.namespace.clone(),
        served_status: Default::default(),
        clusters: registry.clone(),
        machines_per_cluster: Default::default(),
        default_kubevirt_config: args.clusters.default_kubevirt_config.clone(),
        new_ownership_key: args.new_ownership_key,
        node_unreachable_grace: args.node_unreachable_grace,
        restart_budget: Arc::new(reconciler::run::restart_budget::RestartBudget::new(
            reconciler::decide::restart_budget::Limits {
                global: args.max_concurrent_restarts,
                per_namespace: args.max_concurrent_restarts_per_namespace,
                timeout: args.restart_timeout,
            },
        )),
    };

    let slot = CertSlot::new();
    let state = Arc::new(readiness::State::default());
    let drain = Drain {
        period: args.drain.drain_period,
        draining: Draining::default(),
    };
    let readiness = {
        let (slot, leadership, state) = (slot.clone(), leadership.clone(), state.clone());
        let classes = catalog.clone();
        Readiness::new()
            .require("not shutting down", drain.draining.not_draining())
            .require("serving certificate loaded", move || slot.is_loaded())
            .require("MachineClasses read", move || classes.loaded())
            .require("caches synced (leader)", move || {
                !leadership.is_leader() || state.caches_synced()
            })
    };
    let endpoints = serve_endpoints(&args.endpoints, metrics.clone(), Arc::new(readiness)).await?;

    // Webhooks, on every replica.
    // Validation asks, as the Machine's author, whether they may read what it refers to.
    // Interfaces get MAC addresses unique among the Machines this operator serves.
    let macs = LiveMacs::watched(args.watch_namespaces.watches());
    // Static addresses: unique per NetworkConfiguration, handed out from its ipam ranges.
    let addresses = LiveAddresses::watched(args.watch_namespaces.watches());
    let admission = Arc::new(
        Admission::with_catalog(catalog.clone())?
            .with_access(AccessReviewer::new(access_client))
            .with_macs(macs.clone())
            .with_addresses(addresses.clone())
            .with_default_cluster(args.clusters.default_kubevirt_config.clone()),
    );
    let listener = crate::listen::bind(args.listen).await.with_context(|| {
        format!(
            "WEBHOOK_BIND_ADDRESS / --listen {}: cannot listen",
            args.listen
        )
    })?;
    let subresources_listener = match args.subresources_listen {
        Some(addr) => Some(crate::listen::bind(addr).await.with_context(|| {
            format!("SUBRESOURCES_BIND_ADDRESS / --subresources-listen {addr}: cannot listen")
        })?),
        None => None,
    };
    // Started once every port is bound: a start-up error leaves no task behind to log more.
    // The serving certificate: given files, or the self-managed one from its Secret.
    let certificates = match (args.cert_file, args.key_file) {
        (Some(cert), Some(key)) => {
            let files = PemFiles { cert, key };
            let loaded = files
                .load_into(&slot)
                .await
                .context("--cert-file/--key-file")?;
            tracing::info!("serving the certificate from --cert-file/--key-file");
            let expiry = tokio::spawn(certs::metrics::follow_served(
                slot.clone(),
                metrics.certs.clone(),
                RELOAD_EVERY,
            ));
            let reload = tokio::spawn(files.watch(slot.clone(), loaded, RELOAD_EVERY));
            Certificates::Files([reload, expiry])
        }
        _ => {
            let cert_settings =
                certs::Settings::new(&args.namespace, args.webhook_url.as_deref(), lifetimes)?
                    .with_service(&args.webhook_service_name)?
                    .with_webhook_configuration(&args.webhook_configuration_name)?
                    .with_api_service(args.subresources_listen.is_some())
                    .with_watch_scope(&args.watch_namespaces);
            let watcher = tokio::spawn(certs::watch::serve_from_secret(
                clients.api.clone(),
                args.namespace.clone(),
                slot.clone(),
                metrics.certs.clone(),
            ));
            Certificates::SelfManaged {
                settings: Box::new(cert_settings),
                watcher,
            }
        }
    };

    tracing::info!(address = %listener.local_addr()?, "serving admission webhooks over HTTPS");
    let shutdown = shutdown_signal().shared();
    let app = routes::router_with_metrics(admission, metrics.clone());
    let client_ca = (args.client_ca_file.as_deref())
        .map(client_auth::load)
        .transpose()?;
    if client_ca.is_some() {
        tracing::info!("webhook callers must present a certificate of --client-ca-file");
    }
    // Every replica keeps the MachineClasses it admits Machines against.
    let class_watch = tokio::spawn(classes::watch::follow(clients.api.clone(), catalog.clone()));
    // Freed memory back to the system (the reconciler's lists and convergence free much).
    let trimmer = tokio::spawn(crate::heap::trim_every(crate::heap::TRIM_EVERY));
    let mac_watch = tokio::spawn(macs::watch::follow(
        clients.api.clone(),
        args.watch_namespaces.clone(),
        macs,
        addresses.clone(),
    ));
    let pool_watch = tokio::spawn(crate::addresses::watch::follow_pools(
        clients.api.clone(),
        args.watch_namespaces.clone(),
        addresses,
    ));
    let subresources = match subresources_listener {
        Some(listener) => {
            tracing::info!(address = %listener.local_addr()?, "serving the aggregated API subresources.vitistack.io over HTTPS");
            futures::future::Either::Left(crate::subresources::serve::serve(
                listener,
                slot.clone(),
                clients.api.clone(),
                registry.clone(),
                shutdown.clone(),
                drain.clone(),
                metrics.listener_refused.clone(),
                crate::subresources::held::Held::new(
                    args.sessions.limits(),
                    metrics.sessions.clone(),
                    drain.draining.clone(),
                ),
            ))
        }
        None => futures::future::Either::Right(async { Ok(()) }),
    };
    let webhooks = server::serve_authenticated(
        listener,
        slot,
        client_ca,
        app,
        shutdown.clone(),
        Limits::WEBHOOK.with_per_client(args.webhook_max_connections_per_client),
        drain,
        metrics.listener_refused.clone(),
    );

    // The leader's work: the reconciler and, when self-managed, the certificate manager.
    let cert_settings = match &certificates {
        Certificates::SelfManaged { settings, .. } => Some((**settings).clone()),
        Certificates::Files(_) => None,
    };
    let snapshot_limits = crate::snapshots::context::Limits {
        min_interval: args.min_snapshot_interval,
        max_in_flight: usize::from(args.max_snapshots_in_flight),
        ..Default::default()
    };
    let pause_image = args.restore_pause_image.clone();
    let mut work = {
        let (clients, settings, state) = (clients.clone(), settings.clone(), state.clone());
        let (cluster_settings, registry) = (cluster_settings.clone(), registry.clone());
        let cert_metrics = metrics.certs.clone();
        let (orphan_metrics, orphan_check_interval) =
            (metrics.orphans.clone(), args.orphan_check_interval);
        move |stop: Stop| {
            let stop = stop.shared();
            let reconciler = reconciler::run(
                clients.clone(),
                settings.clone(),
                state.clone(),
                stop.clone(),
            );
            let snapshots = crate::snapshots::run(
                clients.api.clone(),
                crate::snapshots::Settings {
                    scopes: settings.scopes.clone(),
                    namespace: settings.namespace.clone(),
                    clock: Arc::new(crate::snapshots::SystemClock),
                    tick: crate::snapshots::context::tick_for(settings.reconcile_interval),
                    limits: snapshot_limits,
                    pause_image: pause_image.clone(),
                    clusters: registry.clone(),
                    default_kubevirt_config: cluster_settings.default_kubevirt_config.clone(),
                },
                stop.clone(),
            );
            let clusters = crate::clusters::run(
                clients.api.clone(),
                cluster_settings.clone(),
                registry.clone(),
                // status.machines, as the reconciler's gauges last counted them.
                {
                    let counts = settings.machines_per_cluster.clone();
                    Arc::new(move |name: &str| counts.get(name))
                },
                stop.clone(),
            );
            let orphans = crate::orphans::run::run(
                clients.api.clone(),
                crate::orphans::run::Settings {
                    interval: orphan_check_interval,
                    namespace: settings.namespace.clone(),
                    scopes: settings.scopes.clone(),
                },
                registry.clone(),
                orphan_metrics.clone(),
                stop.clone(),
            );
            let reconciler = async move {
                tokio::join!(reconciler, snapshots, clusters, orphans);
            };
            let manager = cert_settings.clone().map(|s| {
                CertManager::new(clients.api.clone(), s, cert_metrics.clone()).run(stop.clone())
            });
            async move {
                match manager {
                    Some(manager) => {
                        tokio::join!(reconciler, manager);
                    }
                    None => reconciler.await,
                }
            }
        }
    };
    let leading = async {
        if !args.leader_election {
            tracing::info!("leader election off: this process reconciles");
            leadership.set_leader(true);
            work(Box::pin(shutdown.clone())).await;
            return Ok::<(), anyhow::Error>(());
        }
        // A Lease that cannot be set up (namespace missing, RBAC not applied yet) is retried,
        // loudly: the webhooks keep serving meanwhile, and /readyz names what is missing.
        let election = Election {
            client: clients.lease.clone(),
            namespace: args.namespace.clone(),
            identity: settings.instance.clone(),
            duration: args.leader_election_lease_duration,
            field_manager: format!("{FIELD_MANAGER}-{}", settings.instance),
        };
        let mut backoff = Duration::from_secs(1);
        loop {
            let attempt =
                leader::run(&election, leadership.clone(), shutdown.clone(), &mut work).await;
            match attempt {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::error!(error = %e, retry_in = ?backoff, "leader election failed")
                }
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = shutdown.clone() => return Ok(()),
            }
            backoff = (backoff * 2).min(Duration::from_secs(30));
        }
    };
    let (served, aggregated, led) = tokio::join!(webhooks, subresources, leading);
    match certificates {
        Certificates::Files(tasks) => tasks.iter().for_each(|t| t.abort()),
        Certificates::SelfManaged { watcher, .. } => watcher.abort(),
    }
    endpoints.abort();
    class_watch.abort();
    mac_watch.abort();
    pool_watch.abort();
    trimmer.abort();
    served.context("webhook server")?;
    aggregated.context("aggregated API server")?;
    led?;
    tracing::info!("stopped");
    Ok(())
}

enum Certificates {
    /// `--cert-file/--key-file`, reloaded when they change, and the served-expiry follower.
    Files([tokio::task::JoinHandle<()>; 2]),
    /// Issued and rotated by the leader; every replica serves it from its Secret.
    SelfManaged {
        settings: Box<certs::Settings>,
        watcher: tokio::task::JoinHandle<()>,
    },
}
