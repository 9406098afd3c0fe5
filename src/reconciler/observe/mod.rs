//! Observe: everything `decide` needs about one Machine, gathered from the watch caches, our own
//! recent writes, and by-name GETs where a label-selected cache cannot hold the object (one
//! made by someone else, without our labels, under a name we want).
//!
//! This folder does I/O (cache reads, by-name GETs); its tests are in `observe/tests.rs`.

use crate::reconciler::decide::storage_defaults;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use crate::api::operations::run_strategy;
use crate::api::{Machine, MachineSpec, NetworkConfiguration};

use crate::machine::classes::Class;
use crate::machine::validation::MAX_INLINE_NETWORK_DATA;
use crate::machine::{Catalog, FieldError};
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::decide::desired::cloud_init::{self, secret_source};
use crate::reconciler::decide::desired::meta::{derived_secret_name, pvc_name};
use crate::reconciler::decide::desired::vm::references_secret;
use crate::reconciler::decide::eviction;
use crate::reconciler::decide::hotplug::NotServed;
use crate::reconciler::decide::node::NodeReady;
use crate::reconciler::decide::ownership::{MachineRef, Verdicts};
use crate::reconciler::decide::problem::Kind;
use crate::reconciler::decide::remote_clones;
use crate::reconciler::decide::remote_secrets::{self, copies_of};
use crate::reconciler::decide::spec::Sized;
use crate::reconciler::decide::volumes::{Wanted, removed_cdroms, wanted};
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::run::watches::key_of;
use lookup::lookup;

/// What was observed of one Machine and its surroundings.
#[derive(Clone, Debug)]
pub struct Observed {
    pub machine: Machine,
    /// The resolved spec (class, overrides and defaults applied, as the webhook would).
    pub spec: MachineSpec,
    /// The run strategy its spec asks for (`runStrategy`, else `running`).
    pub run_strategy: String,
    /// The eviction strategy in force (`decide::eviction::strategy`): its own, else the
    /// operator's default; `None` leaves KubeVirt's cluster-wide one.
    pub eviction_strategy: Option<String>,
    /// The class that sizes it: as recorded in it, else as it is now; or why there is none.
    pub class: Result<Class, FieldError>,
    /// What is wrong with the spec (it bypassed admission): nothing is made then.
    pub spec_errors: Vec<FieldError>,
    /// The ownership of every object below, judged once, when read.
    pub verdicts: Verdicts,
    /// The DataVolumes its spec wants (disks with a source, then CD-ROMs), in spec order.
    pub sourced: Vec<Wanted>,
    /// NetworkConfigurations in the Machine's namespace that exist, by name: those the Machine
    /// names, and those of [`Observed::unused_attachments`].
    pub network_configurations: BTreeMap<String, NetworkConfiguration>,
    /// Names of the StorageClasses the disks name that exist.
    pub storage_classes: BTreeSet<String>,
    /// The user's cloud-init Secret, when the spec takes user data from one.
    pub source_secret: Option<Secret>,
    /// Objects with the names we want, by name, whoever made them.
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    pub vm: Option<VirtualMachine>,
    /// The VMI named like the Machine, if any (whether its VM controls it is decided later).
    pub vmi: Option<VirtualMachineInstance>,
    pub attachments: BTreeMap<String, NetworkAttachmentDefinition>,
    pub derived_secret: Derived,
    /// Whether the NetworkAttachmentDefinition API is served.
    pub multus_installed: bool,
    /// DataVolumes with the names we want (disks with a source, CD-ROMs), whoever made them.
    pub data_volumes: BTreeMap<String, DataVolume>,
    /// Whether CDI's DataVolume API is served.
    pub cdi_installed: bool,
    /// Cached DataVolumes labelled for this Machine of CD-ROMs its live VM mounts but the spec no
    /// longer names.
    pub unwanted_data_volumes: Vec<DataVolume>,
    /// On a remote cluster, each credential copy its disk sources ask for, with its source and
    /// the object of its name found there.
    pub credentials: Vec<(remote_secrets::Wanted, remote_secrets::Found)>,
    /// On a remote cluster, the credential copies each of those read (see
    /// `decide::remote_secrets`), by DataVolume: deleted with it.
    pub removed_copies: BTreeMap<String, Vec<(Kind, ObjectMeta)>>,
    /// Our attachments in the namespace that no live Machine names any more.
    pub unused_attachments: Vec<NetworkAttachmentDefinition>,
    /// A MachineRestore holding this Machine's VM and disks: its name and step.
    pub restoring: Option<(String, String)>,
    /// The Machine's MachineSnapshots and whether KubeVirt can take them.
    pub snapshots: crate::reconciler::decide::status::snapshots::Seen,
    /// Its VM lives on a remote cluster: owner references cannot reach the Machine there.
    pub remote: bool,
    /// A remote Machine's DataSources, read on its cluster (`None` for a local Machine, whose
    /// clones admission pinned).
    pub remote_clones: Option<remote_clones::Found>,
    /// What each `dataSource` volume clones (see `decide::remote_clones::pins`), resolved once.
    pub clone_sources: remote_clones::Resolved,
    /// The `Ready` condition of the Node the VMI runs on, when that Node is cached.
    pub node: Option<NodeReady>,
    /// `--node-unreachable-grace`.
    pub node_grace: std::time::Duration,
    /// Whether its cluster's KubeVirt serves declarative disk hot-plug (`decide::hotplug`).
    pub hotplug: Result<(), NotServed>,
    /// When this was observed.
    pub now: k8s_openapi::jiff::Timestamp,
}

/// What is observed of `machine`, `sized` (its resolved spec and class) by `catalog`.
pub async fn observe(
    machine: &Machine,
    sized: Sized,
    catalog: &Catalog,
    ctx: &Context,
    cluster: &Cluster,
) -> Result<Observed, kube::Error> {
    let Sized { spec, class } = sized;
    let ns = machine.namespace().unwrap_or_default();
    let name = machine.name_any();
    let uid = machine.uid();
    let stores = &cluster.stores;
    let written = &cluster.written;
    let defaults = storage::defaults(&spec, stores);
    let spec = storage_defaults::fill(spec, &defaults);
    let client = &cluster.client;

    let mut network_configurations = BTreeMap::new();
    for n in &spec.networks {
        if let Some(nc) =
            (ctx.stores.network_configurations).get(&ObjectRef::new(&n.network_name).within(&ns))
        {
            network_configurations.insert(n.network_name.clone(), nc.as_ref().clone());
        }
    }
    let storage_classes = spec
        .disks
        .iter()
        .filter_map(|d| d.storage_class.clone())
        .filter(|sc| stores.storage_classes.get(&ObjectRef::new(sc)).is_some())
        .collect();
    // Secrets are read one at a time, in the Machine's own namespace only, and never cached:
    // the user's where the Machine is, the derived one where its VM is.
    let sources: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let source_secret = match secret_source(spec.cloud_init.as_ref()) {
        Some((secret_name, _)) => sources.get_opt(secret_name).await?,
        None => None,
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let mut claims = BTreeMap::new();
    // A CD-ROM's claim is CDI's, named like its DataVolume; its status is read like a disk's.
    let volumes = spec.disks.iter().map(|d| d.name.as_str());
    let volumes: Vec<&str> = volumes
        .chain(spec.cdroms.iter().map(|c| c.name.as_str()))
        .collect();
    for volume in &volumes {
        let claim = pvc_name(&name, volume);
        if let Some(p) = lookup(
            cluster,
            (&stores.pvcs, &stores.pvc_names, &written.pvcs),
            &pvcs,
            &ns,
            &claim,
        )
        .await?
        {
            claims.insert(claim, p);
        }
    }
    let mut data_volumes = BTreeMap::new();
    let wanted = wanted(&name, &spec);
    let sourced: Vec<String> = wanted.iter().map(|v| v.claim_name.clone()).collect();
    if cluster.apis.cdi && !sourced.is_empty() {
        let dvs: Api<DataVolume> = Api::namespaced(client.clone(), &ns);
        for dv_name in sourced.iter().cloned() {
            let caches = (
                &stores.data_volumes,
                &stores.dv_names,
                &*written.data_volumes,
            );
            if let Some(dv) = lookup(cluster, caches, &dvs, &ns, &dv_name).await? {
                data_volumes.insert(dv_name, dv);
            }
        }
    }
    let remote_clones = data_sources::remote(cluster, machine, &spec, &data_volumes).await?;
    let annotations = machine.metadata.annotations.as_ref();
    let clone_sources = remote_clones::pins(annotations, &ns, &spec, remote_clones.as_ref());
    let vms: Api<VirtualMachine> = Api::namespaced(client.clone(), &ns);
    let vm = lookup(
        cluster,
        (&stores.vms, &stores.vm_names, &written.vms),
        &vms,
        &ns,
        &name,
    )
    .await?;
    // A hot-plugged disk removed from the spec: its claim or DataVolume, to be kept (released).
    let found = hotplug::unplugged(cluster, &ns, &spec, vm.as_ref()).await?;
    claims.extend(found.claims);
    data_volumes.extend(found.data_volumes);
    // A removed CD-ROM's DataVolume, from our cache; one that does not decode is left alone
    // (only ever a reason not to delete).
    let unwanted_data_volumes: Vec<DataVolume> = removed_cdroms(vm.as_ref(), &sourced)
        .into_iter()
        .filter_map(|dv| stores.data_volumes.get(&ObjectRef::new(dv).within(&ns)))
        .filter(|dv| dv.brief().as_deref() == Some(name.as_str()))
        .filter_map(|dv| dv.unpack().ok())
        .collect();
    // On a remote cluster with CDI, the credential copies its sources ask for, and those each
    // removed CD-ROM's DataVolume read: judged below, with the rest.
    let (mut credentials, mut removed_copies) = (Vec::new(), BTreeMap::new());
    if !cluster.is_local() && cluster.apis.cdi {
        let wanted = remote_secrets::wanted_copies(&name, &spec.disks, &spec.cdroms);
        credentials = copies::read((&ctx.client, client), &ns, wanted).await?;
        for dv in &unwanted_data_volumes {
            let found = lookup::copies_found(client, &ns, copies_of([dv.name_any()])).await?;
            removed_copies.insert(dv.name_any(), found);
        }
    }
    let spec_errors = judged::spec_errors(&name, &spec, class.as_ref(), catalog);
    let me = MachineRef {
        name: &name,
        uid: uid.as_deref(),
    };
    let derived = derived_secret_name(&name);
    // Network data over the inline limit lives in the derived Secret too.
    let large_network_data = spec
        .cloud_init
        .as_ref()
        .and_then(|ci| ci.network_data.as_ref())
        .is_some_and(|d| d.len() > MAX_INLINE_NETWORK_DATA);
    // So do the addresses' network-config (`crate::addresses`).
    let addressed = spec.networks.iter().any(|n| !n.addresses.is_empty());
    let derived_secret = if source_secret.is_some()
        || large_network_data
        || addressed
        || vm
            .as_ref()
            .is_some_and(|vm| references_secret(vm, &derived))
    {
        // What decide would write (nothing while the spec is invalid): a remembered Secret
        // that may not hold it is read, and judged below with the rest.
        let remote = !cluster.is_local();
        // As decide reads them: none without Multus (no VM is made then).
        let no_networks = BTreeMap::new();
        let configurations = if cluster.apis.multus || spec.networks.is_empty() {
            &network_configurations
        } else {
            &no_networks
        };
        let source = (source_secret.as_ref(), remote);
        let want = (spec_errors.is_empty())
            .then(|| cloud_init::derived_secret(machine, &spec, source, configurations))
            .flatten();
        let key = key_of(machine);
        let for_whom = (key.as_str(), me, &cluster.key);
        derived::known(ctx, for_whom, &secrets, &derived, want.as_ref()).await?
    } else {
        Derived::NotLooked
    };
    let vmi = match stores.vmis.get(&ObjectRef::new(&name).within(&ns)) {
        Some(v) => match v.unpack() {
            Ok(v) => Some(v),
            Err(_) => Api::namespaced(client.clone(), &ns).get_opt(&name).await?,
        },
        None => None,
    };

    let multus_installed = cluster.apis.multus;
    let mut attachments = BTreeMap::new();
    let mut unused_attachments = Vec::new();
    if multus_installed {
        let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(client.clone(), &ns);
        for n in &spec.networks {
            if attachments.contains_key(&n.network_name) {
                continue;
            }
            let found = lookup(
                cluster,
                (&stores.nads, &stores.nad_names, &written.nads),
                &nads,
                &ns,
                &n.network_name,
            );
            if let Some(nad) = found.await? {
                attachments.insert(n.network_name.clone(), nad);
            }
        }
        // This Machine is live, so its own networks count as used.
        unused_attachments = unused_in(ctx, cluster, &ns, "");
        for nad in &unused_attachments {
            if let Some(nc) = (ctx.stores.network_configurations)
                .get(&ObjectRef::new(&nad.name_any()).within(&ns))
            {
                network_configurations.insert(nad.name_any(), nc.as_ref().clone());
            }
        }
    }

    // Judged once, here, on what was just read, for the Machine's name and uid.
    let found = judged::Found {
        remote: !cluster.is_local(),
        vm: vm.as_ref(),
        vmi: vmi.as_ref(),
        derived_secret: derived_secret.meta(),
        claims: &claims,
        data_volumes: &data_volumes,
        unwanted_data_volumes: &unwanted_data_volumes,
        attachments: &attachments,
        unused_attachments: &unused_attachments,
        network_configurations: &network_configurations,
        credentials: &credentials,
        copies: &removed_copies,
    };
    let verdicts = judged::verdicts(&found, me, &cluster.key);
    let spec_has_schedule = spec.snapshots.is_some();
    Ok(Observed {
        machine: machine.clone(),
        run_strategy: run_strategy(spec.run_strategy.as_deref(), spec.running).to_owned(),
        eviction_strategy: eviction::strategy(&spec, catalog.eviction_strategy())
            .map(str::to_owned),
        spec,
        class,
        spec_errors,
        verdicts,
        sourced: wanted,
        network_configurations,
        storage_classes,
        source_secret,
        claims,
        vm,
        attachments,
        derived_secret,
        multus_installed,
        data_volumes,
        cdi_installed: cluster.apis.cdi,
        unwanted_data_volumes,
        credentials,
        removed_copies,
        unused_attachments,
        restoring: snapshots::holding(ctx, &ns, me),
        snapshots: snapshots::of(ctx, cluster, machine, spec_has_schedule),
        remote: !cluster.is_local(),
        remote_clones,
        clone_sources,
        node: (vmi.as_ref())
            .and_then(|v| v.status.as_ref()?.node_name.as_deref())
            .and_then(|n| nodes::ready(&cluster.stores.nodes, n)),
        node_grace: ctx.settings.node_unreachable_grace,
        hotplug: hotplug::served(cluster),
        now: k8s_openapi::jiff::Timestamp::now(),
        vmi,
    })
}

pub mod cleanup;
mod copies;
mod data_sources;
mod derived;
mod hotplug;
pub mod judged;
mod lookup;
mod networks;
pub mod nodes;
pub mod snapshots;
mod storage;

pub use derived::Derived;
pub use networks::{unused_in, unused_networks};
#[cfg(test)]
mod tests;
