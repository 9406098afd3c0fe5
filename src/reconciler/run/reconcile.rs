//! One reconcile of one Machine: observe -> decide -> act inside a span that puts SPEC's log
//! fields (`controller`, `machine`, `namespace`, `phase`) on every line, and when to run next
//! (the resync, the backoff, or a held-back status write).

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::Instrument;

use crate::api::Machine;
use crate::machine::placement::{self, Placement};
use crate::telemetry::metrics::Controller as ControllerLabel;

use super::context::Context;
use super::metrics::{self as reconcile_metrics, CONTROLLER};
use super::restart_budget::RestartBudget;
use super::status::{self, Refusal, Worked};
use crate::reconciler::decide::cleanup::Wait;
use crate::reconciler::error::Error;
use crate::reconciler::store::packed::Packed;
use crate::reconciler::{act, decide, observe};

/// Only failures the user cannot fix reach here (API errors, a VMI still going); a blocked
/// Machine is requeued by `reconcile` itself, with the same backoff.
pub fn error_policy(machine: Arc<Packed<Machine>>, error: &Error, ctx: Arc<Context>) -> Action {
    let retry = ctx.next_retry(machine.as_ref());
    let span = reconcile_span(&machine);
    let _guard = span.enter();
    if matches!(error, Error::VmiStillRunning(_)) {
        tracing::info!(error = %error, retry_in = ?retry, "reconcile incomplete");
    } else {
        tracing::warn!(error = %error, kind = error.kind(), retry_in = ?retry, "reconcile failed");
    }
    Action::requeue(retry)
}

/// SPEC's fields on every log line of a reconcile; `phase` is filled in once known.
fn reconcile_span(machine: &Packed<Machine>) -> tracing::Span {
    let phase = machine
        .brief()
        .phase
        .as_deref()
        .unwrap_or(crate::reconciler::decide::status::phase::PENDING);
    tracing::info_span!(
        "reconcile",
        controller = CONTROLLER,
        machine = %machine.name_any(),
        namespace = %machine.namespace().unwrap_or_default(),
        phase = %phase,
    )
}

pub async fn reconcile(machine: Arc<Packed<Machine>>, ctx: Arc<Context>) -> Result<Action, Error> {
    let span = reconcile_span(&machine);
    reconcile_in_span(machine, ctx).instrument(span).await
}

async fn reconcile_in_span(
    packed: Arc<Packed<Machine>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    if ctx.caches_ready.subscribe().wait_for(|r| *r).await.is_err() {
        return Err(Error::CachesGone);
    }
    // The object handed over was taken from the cache when the run was requested, possibly
    // while the previous run was still writing; the cache may hold a newer copy by now.
    let packed = ctx
        .stores
        .machines
        .get(&ObjectRef::from_obj(packed.as_ref()))
        .unwrap_or(packed);
    let machine = match packed.unpack() {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "cached Machine does not decode; reading it from the API server");
            let ns = packed.namespace().unwrap_or_default();
            match Api::<Machine>::namespaced(ctx.client.clone(), &ns)
                .get_opt(&packed.name_any())
                .await?
            {
                Some(m) => m,
                None => return Ok(Action::await_change()),
            }
        }
    };
    let started = std::time::Instant::now();
    let result = reconcile_machine(&machine, &ctx).await;
    let metrics = &ctx.settings.metrics;
    metrics
        .reconcile_duration
        .get_or_create(&ControllerLabel {
            controller: CONTROLLER.to_owned(),
        })
        .observe(started.elapsed().as_secs_f64());
    match &result {
        Ok(r) if !r.blocked => ctx.forget_failures(&machine),
        Ok(_) => {}
        Err(e) => reconcile_metrics::record_error(metrics, e.kind()),
    }
    result.map(|r| {
        let base = if r.blocked {
            // Problems are counted, shown and announced by reason in `act`; retry with backoff.
            ctx.next_retry(&machine)
        } else {
            ctx.settings.reconcile_interval
        };
        Action::requeue(requeue_after(base, r.write_status_in))
    })
}

/// The identity of the cluster the Machine's status says it was made on.
fn made_on(machine: &Machine) -> Option<&str> {
    (machine.status.as_ref()).and_then(|s| s.cluster_identity.as_deref())
}

/// How one reconcile ended.
#[derive(Default)]
struct Reconciled {
    blocked: bool,
    /// A status write held back (import progress) is due then.
    write_status_in: Option<Duration>,
}

/// The next run: the resync or the backoff, or earlier when a held-back status write is due.
fn requeue_after(base: Duration, write_status_in: Option<Duration>) -> Duration {
    write_status_in.map_or(base, |w| w.min(base))
}

async fn reconcile_machine(machine: &Machine, ctx: &Context) -> Result<Reconciled, Error> {
    let ns = machine.namespace().ok_or(Error::NoNamespace)?;
    let deleting = machine.meta().deletion_timestamp.is_some();
    let placement = placement::of(machine, ctx.settings.default_kubevirt_config.as_deref());
    let cluster = match placement {
        Placement::Local => Ok(ctx.local.clone()),
        // Its KubevirtConfig's namespaceSelector first: the webhook may have been bypassed.
        Placement::Remote(name) => {
            match super::placement::forbidden(ctx, &ns, deleting, &name).await? {
                Some(why) => Err((name, why)),
                None => (ctx.remotes)
                    .cluster(&name, made_on(machine))
                    .map_err(|why| (name, why)),
            }
        }
    };
    // The spec it is worked from, resolved once for cleanup and for observe, and its class.
    let catalog = ctx.settings.catalog.load_full();
    let sized = decide::spec::sized(machine, &catalog);
    // A deleting Machine: what remains of it observed, its cleanup decided and carried out.
    let mut cluster_message = None;
    if deleting {
        let reach = cluster.as_deref().map_err(|(_, why)| why);
        let remains = observe::cleanup::remains(machine, &sized.spec, ctx, reach).await?;
        let plan = decide::cleanup::planned(&remains);
        act::cleanup::execute(ctx, cluster.as_deref().ok(), machine, &plan).await?;
        if plan.wait != Some(Wait::Cluster) {
            return Ok(Reconciled::default());
        }
        cluster_message = plan.cluster_message;
    }
    // While its remote cluster cannot be worked on, or (remote) its namespace there is not the
    // operator's (`NamespaceConflict`), nothing is made, changed or deleted anywhere, and the
    // status says why (`ClusterReady=False`): the Machine is blocked.
    let cluster = match cluster {
        Err((name, why)) => Err(Refusal {
            cluster: name,
            reason: why.reason.clone(),
            message: cluster_message.unwrap_or_else(|| why.message.clone()),
        }),
        Ok(cluster) => match act::remote::namespace(&cluster, &ns).await? {
            Some(why) => Err(Refusal {
                cluster: cluster.name.clone().unwrap_or_default(),
                reason: why.reason,
                message: why.message,
            }),
            None => Ok(cluster),
        },
    };
    let (observed, acted);
    let worked = match cluster {
        Err(refusal) => Worked::Refused(refusal),
        Ok(ref cluster) => {
            observed = observe::observe(machine, sized, &catalog, ctx, cluster).await?;
            let mut decision = decide::decide(&observed, &catalog, &cluster.key);
            // The restart budget lets a restart go ahead or holds it back, before anything is
            // acted on.
            let budget: &RestartBudget = &ctx.settings.restart_budget;
            let budget = budget.gate(
                &ctx.settings.metrics,
                machine,
                decision.vmi.as_ref(),
                &mut decision.restart,
                k8s_openapi::jiff::Timestamp::now(),
            );
            acted = act::act(ctx, cluster, &observed, (decision, budget)).await?;
            Worked::Acted(cluster, &observed, &acted)
        }
    };
    let settled = status::settle(ctx, machine, worked).await?;
    if let Some(phase) = settled.status.phase.as_deref() {
        tracing::Span::current().record("phase", phase);
    }
    tracing::debug!(blocked = settled.blocked, "reconciled");
    Ok(Reconciled {
        blocked: settled.blocked,
        write_status_in: settled.write_status_in,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_back_progress_brings_the_next_run_forward() {
        let s = Duration::from_secs;
        assert_eq!(requeue_after(s(30), None), s(30), "resync");
        assert_eq!(requeue_after(s(30), Some(s(8))), s(8), "progress due first");
        assert_eq!(requeue_after(s(2), Some(s(8))), s(2), "a retry comes first");
    }
}
