//! The floor of the reconciler benchmark: the operator's writes for each Machine, made directly
//! by a client built like the operator's, so the operator's time can be read against it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use kubevirt_operator::api::Machine;
use kubevirt_operator::machine::{Catalog, resolve};
use kubevirt_operator::reconciler::act::{self, apply};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::decide::desired::{self, Inputs};
use kubevirt_operator::reconciler::decide::status::{self, Reconciled};
use kubevirt_operator::reconciler::store::last_write::LastWrite;

use super::fresh;

/// The floor: the operator's writes for each Machine, made directly by an identical client.
pub async fn floor(n: usize, qps: f64, burst: u32) -> Result<Duration> {
    let (cp, admin, ns) = fresh(n).await?;
    let client = kubevirt_operator::client::client(Some(cp.admin_kubeconfig()), qps, burst).await?;
    let machines: Vec<Machine> = Api::<Machine>::namespaced(admin.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let started = Instant::now();
    let placed = machines.into_iter().map(|m| (m, client.clone()));
    write_all(placed, &client, &ns).await?;
    let took = started.elapsed();
    drop(cp);
    Ok(took)
}

/// Each Machine's claims and VM written with the client of its cluster, then its status with
/// `status`, five Machines at a time like `MAX_CONCURRENT_RECONCILES`.
pub async fn write_all(
    placed: impl Iterator<Item = (Machine, Client)>,
    status: &Client,
    ns: &str,
) -> Result<()> {
    let catalog = Catalog::default();
    stream::iter(placed)
        .map(|(m, objects)| retried(m, objects, status.clone(), ns, catalog.clone()))
        .buffer_unordered(5)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// [`write_one`], again after a server-side failure (an etcd timeout on a starved machine), as
/// the operator requeues a failed reconcile: every write is idempotent, and a floor that gave up
/// where the operator retries would be no floor.
async fn retried(
    m: Machine,
    client: Client,
    status_client: Client,
    ns: &str,
    catalog: Catalog,
) -> Result<()> {
    let mut delay = Duration::from_millis(250);
    for _ in 0..6 {
        match write_one(
            m.clone(),
            client.clone(),
            status_client.clone(),
            ns,
            catalog.clone(),
        )
        .await
        {
            Err(e) if server_side(&e) => {
                eprintln!("  floor: {} again after {e}", m.name_any());
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            done => return done,
        }
    }
    write_one(m, client, status_client, ns, catalog).await
}

fn server_side(e: &anyhow::Error) -> bool {
    e.chain().any(
        |c| matches!(c.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if s.code >= 500),
    )
}

/// One Machine's writes: PVC and VM concurrently, then the status, as few round trips as the
/// operator's.
async fn write_one(
    m: Machine,
    client: Client,
    status_client: Client,
    ns: &str,
    catalog: Catalog,
) -> Result<()> {
    let spec = resolve(&m.spec, None, &catalog).spec;
    let d = desired::derive(&Inputs {
        machine: &m,
        spec: &spec,
        network_configurations: &BTreeMap::new(),
        storage_classes: &Default::default(),
        source_secret: None,
        network_policy: catalog.networks(),
        eviction_strategy: catalog.eviction_strategy(),
        label_prefixes: catalog.label_prefixes(),
        copy_user_data: false,
        hardware: &Default::default(),
        pins: &kubevirt_operator::api::clone_sources::read(m.metadata.annotations.as_ref())
            .unwrap_or_default(),
    });
    let pvcs = Api::namespaced(client.clone(), ns);
    let vms = Api::<VirtualMachine>::namespaced(client.clone(), ns);
    let claims_written = futures::future::try_join_all(d.pvcs.into_iter().map(|p| {
        let pvcs = pvcs.clone();
        async move {
            let name = p.name_any();
            let applied = apply::ensure(&pvcs, p, None, &LastWrite::default()).await?;
            anyhow::Ok((name, Some(applied)))
        }
    }));
    let vm_written = async {
        match d.vm {
            Some(vm) => anyhow::Ok(Some(
                apply::ensure(&vms, vm, None, &LastWrite::default()).await?,
            )),
            None => Ok(None),
        }
    };
    let (claims, vm) = futures::try_join!(claims_written, vm_written)?;
    let obs = Reconciled {
        running: true,
        problems: &[],
        vm: vm.as_ref(),
        vmi: None,
        claims: claims
            .iter()
            .map(|(n, p)| (n.clone(), p.as_ref()))
            .collect(),
        networks: 0,
        spec_networks: &[],
        provisioning: None,
        disks: Vec::new(),
        retain: false,
        last_restart: None,
        last_restart_generation: None,
        restoring: None,
        snapshots: None,
        cluster: None,
        cluster_identity: None,
        eviction: None,
        node: None,
        restart_pending: None,
        hotplug: None,
    };
    let s = status::compute(None, m.metadata.generation, &obs, Timestamp::now());
    act::status::write_status(&Api::namespaced(status_client, ns), &m.name_any(), &s).await?;
    Ok(())
}
