//! When the reconciler's watch caches are filled: reconciles wait for it (bounded), and the
//! leader's `/readyz` reports it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::clusters::Apis;
use crate::reconciler::run::cluster::ClusterStores;
use crate::reconciler::run::context::Stores;
use crate::reconciler::run::readiness::State;

/// How long a reconcile waits for the caches before it works with what they hold.
pub const CACHE_WAIT: Duration = Duration::from_secs(10);

impl ClusterStores {
    /// Every cache's first list; those of an optional API the cluster does not serve are not
    /// waited for, as nothing will ever fill them.
    pub async fn filled(&self, apis: Apis) -> Result<(), ()> {
        futures::try_join!(
            async { self.vms.wait_until_ready().await.map_err(drop) },
            async { self.vmis.wait_until_ready().await.map_err(drop) },
            async { self.pvcs.wait_until_ready().await.map_err(drop) },
            if_served(apis.multus, self.nads.wait_until_ready()),
            async { self.storage_classes.wait_until_ready().await.map_err(drop) },
            if_served(apis.cdi, self.data_volumes.wait_until_ready()),
            if_served(apis.cdi, self.dv_names.wait_until_ready()),
            if_served(
                apis.storage_profiles,
                self.storage_profiles.wait_until_ready()
            ),
            async { self.vm_names.wait_until_ready().await.map_err(drop) },
            async { self.pvc_names.wait_until_ready().await.map_err(drop) },
            if_served(apis.multus, self.nad_names.wait_until_ready()),
            if_served(apis.kubevirt_installs, self.kubevirts.wait_until_ready()),
        )
        .map(drop)
    }
}

impl Stores {
    /// Waits for every cache's first list, the local cluster's included, and then opens `ready`
    /// (and marks `state` synced).
    /// kube's `Store::wait_until_ready` wakes only one of several waiters (the last to poll), so
    /// each store has one caller: this task, except for the Machine store, whose caller is the
    /// `Controller` itself; its first list is reported through `machines_listed` instead.
    /// Reconciles wait on `ready`. A cache whose API is absent (KubeVirt not installed) never
    /// fills (those of Multus and CDI, optional, are not waited for then): after [`CACHE_WAIT`] the reconciles go on with what the caches
    /// hold, and writing to that API fails with a message in the Machine's status instead of
    /// hanging; `state` says synced only once every cache has filled.
    pub async fn track_readiness(
        self,
        (local, apis): (ClusterStores, Apis),
        mut machines_listed: watch::Receiver<bool>,
        state: Arc<State>,
        ready: watch::Sender<bool>,
        restores: bool,
    ) {
        let all = async {
            futures::try_join!(
                async {
                    machines_listed
                        .wait_for(|l| *l)
                        .await
                        .map(drop)
                        .map_err(drop)
                },
                async {
                    self.network_configurations
                        .wait_until_ready()
                        .await
                        .map_err(drop)
                },
                if_served(restores, self.restores.wait_until_ready()),
                if_served(restores, self.snapshots.wait_until_ready()),
                local.filled(apis),
            )
            .map(drop)
        };
        tokio::pin!(all);
        match tokio::time::timeout(CACHE_WAIT, &mut all).await {
            Ok(Ok(())) => {
                state.set_caches_synced(true);
                ready.send_replace(true);
                return;
            }
            Ok(Err(_)) => return, // The controller is stopping.
            Err(_) => {
                tracing::warn!(
                    "some watch caches are not filled yet; reconciling with what they hold"
                );
                ready.send_replace(true);
            }
        }
        if all.await.is_ok() {
            state.set_caches_synced(true);
            tracing::info!("all watch caches filled");
        }
    }
}

/// `wait`, when the optional API its cache watches is served; at once otherwise, as nothing
/// will ever fill that cache.
async fn if_served<E>(served: bool, wait: impl Future<Output = Result<(), E>>) -> Result<(), ()> {
    match served {
        true => wait.await.map_err(drop),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use kube::runtime::watcher;

    /// kube's `Store::wait_until_ready` wakes only the last of several waiters. The Controller
    /// waits on the Machine store itself; readiness must not be a second waiter there, or
    /// every reconcile stalls for `CACHE_WAIT` at start-up when the Controller polls last.
    #[tokio::test]
    async fn caches_open_while_the_controller_waits_on_the_machine_store() {
        let (stores, w) = Stores::new();
        let (local, cw) = ClusterStores::new();
        let machines = stores.machines.clone();
        let (mut machines_w, mut vms_w, mut vmis_w, mut pvcs_w) =
            (w.machines, cw.vms, cw.vmis, cw.pvcs);
        let (mut ncs_w, mut nads_w, mut scs_w) =
            (w.network_configurations, cw.nads, cw.storage_classes);
        let names = [
            local.vm_names.clone(),
            local.pvc_names.clone(),
            local.nad_names.clone(),
        ];
        let apis = Apis {
            multus: true,
            ..Apis::default()
        };
        let (listed_tx, listed) = watch::channel(false);
        let (ready_tx, mut ready) = watch::channel(false);
        let state = Arc::new(State::default());
        let tracker = tokio::spawn(stores.track_readiness(
            (local, apis),
            listed,
            state.clone(),
            ready_tx,
            false,
        ));
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The Controller's own wait, polled after the tracker's.
        let controller = tokio::spawn(async move { machines.wait_until_ready().await });
        tokio::time::sleep(Duration::from_millis(20)).await;

        vms_w.apply_watcher_event(&watcher::Event::InitDone);
        vmis_w.apply_watcher_event(&watcher::Event::InitDone);
        pvcs_w.apply_watcher_event(&watcher::Event::InitDone);
        ncs_w.apply_watcher_event(&watcher::Event::InitDone);
        nads_w.apply_watcher_event(&watcher::Event::InitDone);
        scs_w.apply_watcher_event(&watcher::Event::InitDone);
        for n in &names {
            n.apply(watcher::Event::<PersistentVolumeClaim>::InitDone);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The Machine list, the largest, completes last: nothing else wakes the tracker.
        machines_w.apply_watcher_event(&watcher::Event::InitDone);
        listed_tx.send_replace(true); // as the Machine stream reports it

        let soon = Duration::from_secs(2);
        assert!(soon < CACHE_WAIT);
        tokio::time::timeout(soon, ready.wait_for(|r| *r))
            .await
            .expect("reconciles released well before CACHE_WAIT")
            .expect("ready channel open");
        tokio::time::timeout(soon, controller)
            .await
            .expect("the Controller's wait is woken too")
            .expect("task")
            .expect("store ready");
        tokio::time::timeout(soon, tracker)
            .await
            .expect("tracker finished")
            .expect("task");
        assert!(state.caches_synced());
    }
}
