//! What only a Machine on a remote cluster needs: its namespace there, and what is done while
//! its cluster cannot be worked on (status only; deletion waits unless abandoned).

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};

use super::{apply, events, finalizer};
use crate::api::Machine;
use crate::api::names::ABANDON_REMOTE_ANNOTATION;
use crate::reconciler::decide::abandon::{Waiting, waiting};
use crate::reconciler::decide::status::cluster::unready;
use crate::reconciler::decide::status_write;
use crate::reconciler::error::Error;
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::remotes::{CACHES_FILLING, Unready};
use crate::reconciler::run::watches::key_of;
use crate::reconciler::{MANAGED_BY, MANAGED_BY_LABEL};

/// Makes the Machine's namespace on a remote cluster if it is missing (labelled as ours; one
/// that exists is used as it is). Remembered once seen, so asked for once per cluster.
pub async fn ensure_namespace(cluster: &Cluster, ns: &str) -> Result<(), kube::Error> {
    let known = |c: &Cluster| {
        let set = c.namespaces.lock().unwrap_or_else(|p| p.into_inner());
        set.contains(ns)
    };
    if cluster.is_local() || known(cluster) {
        return Ok(());
    }
    let api: Api<Namespace> = Api::all(cluster.client.clone());
    if api.get_metadata_opt(ns).await?.is_none() {
        let labels = [(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())].into();
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.to_owned()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match api.create(&PostParams::default(), &namespace).await {
            Ok(_) => {
                tracing::info!(namespace = ns, cluster = ?cluster.name, "created the Machine's namespace on its cluster")
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    let mut set = cluster.namespaces.lock().unwrap_or_else(|p| p.into_inner());
    set.insert(ns.to_owned());
    Ok(())
}

/// Whether the admin let the Machine's deletion finish without its remote cluster.
pub fn abandoned(machine: &Machine) -> bool {
    machine
        .annotations()
        .get(ABANDON_REMOTE_ANNOTATION)
        .map(String::as_str)
        == Some("true")
}

/// While cluster `name` cannot be worked on: nothing is made, changed or deleted anywhere; the
/// status says why (`ClusterReady=False`). A deleting Machine keeps its finalizer (its objects
/// there are not cleaned up yet) unless [`abandoned`]. Returns whether the Machine is blocked.
pub async fn unreachable(
    ctx: &Context,
    machine: &Machine,
    name: &str,
    why: &Unready,
) -> Result<bool, Error> {
    let ns = machine.namespace().ok_or(Error::NoNamespace)?;
    let deleting = machine.meta().deletion_timestamp.is_some();
    let probed = why.reason != CACHES_FILLING;
    let message = match waiting(deleting, abandoned(machine), probed, &why.message) {
        Waiting::Abandon => {
            tracing::warn!(
                cluster = name,
                "cluster unavailable and vitistack.io/abandon-remote is \"true\": the Machine goes, what it made there stays"
            );
            finalizer::abandon(machine, ctx).await?;
            return Ok(false);
        }
        // Brief; the cluster's Machines run again once they are filled.
        Waiting::Quiet => return Ok(true),
        Waiting::Say(message) => message,
    };
    let key = key_of(machine);
    let stored = ctx
        .statuses
        .newer_than(&key, machine.resource_version().as_deref());
    let old = stored.as_ref().or(machine.status.as_ref());
    let new = unready(
        old,
        machine.metadata.generation,
        (name, &why.reason, &message),
        Timestamp::now(),
    );
    if !crate::reconciler::decide::status::differs(old, &new) {
        return Ok(true);
    }
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let written = apply::write_status(&api, &machine.name_any(), &new).await?;
    let served = ctx.settings.served_status.pruned();
    ctx.statuses.record(
        key,
        written.resource_version().as_deref(),
        status_write::without(&new, &served),
    );
    let notices = events::notices(old, &new);
    if !notices.is_empty() {
        let (recorder, machine) = (ctx.events.clone(), machine.clone());
        tokio::spawn(async move { events::publish(&recorder, &machine, notices).await });
    }
    Ok(true)
}
