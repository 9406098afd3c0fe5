//! A MachineSnapshot taken on a remote cluster: it carries [`REMOTE_SNAPSHOT_FINALIZER`] from
//! before its VirtualMachineSnapshot is made there, and on deletion the operator deletes that
//! VirtualMachineSnapshot (only the one its proof binds to this MachineSnapshot, by uid), then
//! lets the MachineSnapshot go ([`cleanup`] decides, pure).

use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::super::context::Context;
use super::super::error::Error;
use super::super::site::Site;
use super::super::workload::{self, Workload};
use super::{made_for, write_status};
use crate::api::snapshots::{MachineSnapshot, REMOTE_SNAPSHOT_FINALIZER};
use crate::reconciler::apis::snapshot::VirtualMachineSnapshot;

/// What deleting a remote MachineSnapshot does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// Delete its VirtualMachineSnapshot (this uid) there.
    Delete(String),
    /// Wait for the deletion under way, or for the cluster (why).
    Wait(Option<String>),
    /// Nothing of it is there (any longer): remove the finalizer.
    Release,
}

/// What is on the cluster: the VirtualMachineSnapshot of its name, if any, as (uid, made by the
/// operator for this MachineSnapshot, being deleted).
pub type There = Option<(String, bool, bool)>;

/// The next step of deleting a MachineSnapshot taken on cluster `cluster` (`None`: never
/// recorded, so nothing was made remotely) reached as `site`, where `there` was found.
pub fn cleanup(cluster: Option<&str>, site: &Site, there: There) -> Cleanup {
    let Some(cluster) = cluster else {
        return Cleanup::Release;
    };
    match (site, there) {
        (Site::Wait(why), _) => Cleanup::Wait(Some(format!(
            "deleting its VirtualMachineSnapshot on cluster {cluster} waits: {} ({}); to leave \
             it there, remove the finalizer {REMOTE_SNAPSHOT_FINALIZER}",
            why.message, why.reason
        ))),
        (_, Some((uid, true, false))) => Cleanup::Delete(uid),
        (_, Some((_, true, true))) => Cleanup::Wait(None),
        // Gone, or someone else's of that name: never touched.
        (_, None | Some((_, false, _))) => Cleanup::Release,
    }
}

/// Whether `s` carries the finalizer.
pub fn held(s: &MachineSnapshot) -> bool {
    s.finalizers()
        .iter()
        .any(|f| f == REMOTE_SNAPSHOT_FINALIZER)
}

/// Puts the finalizer on (guarded by the version read: a concurrent change retries).
pub async fn hold(ctx: &Context, s: &MachineSnapshot) -> Result<(), Error> {
    if held(s) {
        return Ok(());
    }
    let mut list = s.finalizers().to_vec();
    list.push(REMOTE_SNAPSHOT_FINALIZER.to_owned());
    patch_finalizers(ctx, s, list).await
}

async fn patch_finalizers(
    ctx: &Context,
    s: &MachineSnapshot,
    list: Vec<String>,
) -> Result<(), Error> {
    let patch = json!({"metadata": {"finalizers": list, "resourceVersion": s.resource_version()}});
    Api::<MachineSnapshot>::namespaced(ctx.client.clone(), &s.namespace().unwrap_or_default())
        .patch(&s.name_any(), &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// A deleted MachineSnapshot: its remote VirtualMachineSnapshot deleted, then let go.
pub async fn on_delete(s: &MachineSnapshot, ctx: &Context) -> Result<Action, Error> {
    if !held(s) {
        return Ok(Action::await_change());
    }
    let ns = s
        .namespace()
        .ok_or_else(|| Error::NoNamespace(s.name_any()))?;
    let status = s.status.clone().unwrap_or_default();
    let cluster = status.cluster.as_deref();
    let site = match cluster {
        Some(c) => workload::site_at(ctx, c, status.cluster_identity.as_deref()),
        None => Site::Local,
    };
    let there = match (cluster, Workload::of(ctx, &site)) {
        (Some(_), Some(w)) => Api::<VirtualMachineSnapshot>::namespaced(w.client.clone(), &ns)
            .get_opt(&s.name_any())
            .await?
            .map(|v| {
                let ours = made_for(&w.key, s, &v, true);
                let deleting = v.meta().deletion_timestamp.is_some();
                (v.uid().unwrap_or_default(), ours, deleting)
            }),
        _ => None,
    };
    match cleanup(cluster, &site, there) {
        Cleanup::Release => {
            let kept: Vec<String> = (s.finalizers().iter())
                .filter(|f| *f != REMOTE_SNAPSHOT_FINALIZER)
                .cloned()
                .collect();
            patch_finalizers(ctx, s, kept).await?;
            tracing::info!(snapshot = %s.name_any(), namespace = %ns, "remote snapshot deleted: finalizer removed");
            Ok(Action::await_change())
        }
        Cleanup::Delete(uid) => {
            if let Some(w) = Workload::of(ctx, &site) {
                let dp = DeleteParams::default().preconditions(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                });
                match Api::<VirtualMachineSnapshot>::namespaced(w.client, &ns)
                    .delete(&s.name_any(), &dp)
                    .await
                {
                    Ok(_) => {
                        tracing::info!(snapshot = %s.name_any(), namespace = %ns, ?cluster, "VirtualMachineSnapshot deleted on its cluster")
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(Action::requeue(ctx.settings.tick))
        }
        Cleanup::Wait(why) => {
            if let Some(why) = why
                && status.error.as_deref() != Some(why.as_str())
            {
                let status = crate::api::snapshots::MachineSnapshotStatus {
                    error: Some(super::super::mirror::cut(why)),
                    ..status.clone()
                };
                write_status(&ctx.client, &ns, &s.name_any(), &status).await?;
            }
            Ok(Action::requeue(ctx.settings.tick))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconciler::run::remotes::Unready;

    #[test]
    fn a_remote_snapshot_goes_with_its_virtual_machine_snapshot_there() {
        let away = Site::Wait(Unready {
            reason: "Unreachable".into(),
            message: "cluster dc1: no answer".into(),
        });
        let ours = |deleting| Some(("uid-v".to_owned(), true, deleting));
        let theirs = Some(("uid-x".to_owned(), false, false));
        // (case, cluster recorded, site, there, next)
        let cases = [
            (
                "never taken remotely",
                None,
                Site::Local,
                None,
                Cleanup::Release,
            ),
            (
                "ours there",
                Some("dc1"),
                Site::Local,
                ours(false),
                Cleanup::Delete("uid-v".into()),
            ),
            (
                "ours, going",
                Some("dc1"),
                Site::Local,
                ours(true),
                Cleanup::Wait(None),
            ),
            ("gone", Some("dc1"), Site::Local, None, Cleanup::Release),
            (
                "a stranger's of that name",
                Some("dc1"),
                Site::Local,
                theirs,
                Cleanup::Release,
            ),
        ];
        for (case, cluster, site, there, want) in cases {
            assert_eq!(cleanup(cluster, &site, there), want, "{case}");
        }
        let Cleanup::Wait(Some(why)) = cleanup(Some("dc1"), &away, None) else {
            panic!("an unreachable cluster is waited for");
        };
        assert!(why.contains("no answer (Unreachable)"), "{why}");
        assert!(why.contains(REMOTE_SNAPSHOT_FINALIZER), "{why}");
    }
}
