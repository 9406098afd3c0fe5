//! Cache entries kept as compact JSON, decoded when a reconcile reads them.
//!
//! A typed Kubernetes object in memory is several times its JSON: every optional field takes its
//! full width, and every map with one entry allocates a whole B-tree node. At 10,000 Machines the
//! typed caches of VMs and claims alone held 65 MB. [`Packed`] keeps decoded what the watch
//! machinery reads (name, namespace, uid, resourceVersion, owner references and deletion time:
//! the Store's keys, the Controller's owner triggers, scans for live Machines) and a small
//! [`Brief`] of what is read in bulk (gauges, triggers); the rest of the object is LZ4-compressed
//! JSON. The JSON was encoded from a decoded object, so decoding it again cannot meet a shape the
//! first decode did not accept; should it fail anyway, readers treat the entry as unknown and ask
//! the API server, never as absent.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::api::Machine;

use crate::reconciler::MACHINE_LABEL;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use crate::reconciler::apis::multus::NetworkAttachmentDefinition;

/// What a packed object keeps decoded, for readers that scan the whole cache.
pub trait Brief {
    type Brief: Clone + Default + fmt::Debug + Send + Sync + 'static;
    fn brief(&self) -> Self::Brief;
}

/// A cached object: routing metadata, a brief, and the object as JSON.
pub struct Packed<K: Brief> {
    metadata: ObjectMeta,
    brief: K::Brief,
    json: Arc<[u8]>,
    _kind: PhantomData<fn() -> K>,
}

impl<K: Brief> Clone for Packed<K> {
    fn clone(&self) -> Self {
        Packed {
            metadata: self.metadata.clone(),
            brief: self.brief.clone(),
            json: self.json.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K: Brief> fmt::Debug for Packed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packed")
            .field("name", &self.metadata.name)
            .field("namespace", &self.metadata.namespace)
            .field("resource_version", &self.metadata.resource_version)
            .field("brief", &self.brief)
            .field("bytes", &self.json.len())
            .finish()
    }
}

impl<K: Resource<DynamicType = ()> + Brief> Resource for Packed<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    /// Changes only the routing copy, never the packed object: nothing in the reconciler
    /// mutates cached objects (objects are slimmed before they are packed).
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The metadata kept decoded, which the packed bytes therefore leave out.
const ROUTING: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "ownerReferences",
    "deletionTimestamp",
];

/// Why a packed object could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("packed bytes do not decompress: {0}")]
    Decompress(#[from] lz4_flex::block::DecompressError),
    #[error("packed object does not decode: {0}")]
    Decode(#[from] serde_json::Error),
}

impl<K: Resource + Serialize + Brief> Packed<K> {
    pub fn pack(obj: &K) -> Result<Self, serde_json::Error> {
        let m = obj.meta();
        let metadata = ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            owner_references: m.owner_references.clone(),
            deletion_timestamp: m.deletion_timestamp.clone(),
            ..Default::default()
        };
        let mut value = serde_json::to_value(obj)?;
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in ROUTING {
                meta.remove(*field);
            }
        }
        // LZ4: Kubernetes JSON repeats its keys; a few microseconds per object halve it.
        let json = lz4_flex::block::compress_prepend_size(&serde_json::to_vec(&value)?);
        Ok(Packed {
            metadata,
            brief: obj.brief(),
            json: json.into(),
            _kind: PhantomData,
        })
    }
}

impl<K: Resource + DeserializeOwned + Brief> Packed<K> {
    /// The object, decoded.
    pub fn unpack(&self) -> Result<K, UnpackError> {
        let bytes = lz4_flex::block::decompress_size_prepended(&self.json)?;
        let mut obj: K = serde_json::from_slice(&bytes)?;
        let (m, kept) = (obj.meta_mut(), &self.metadata);
        m.name.clone_from(&kept.name);
        m.namespace.clone_from(&kept.namespace);
        m.uid.clone_from(&kept.uid);
        m.resource_version.clone_from(&kept.resource_version);
        m.owner_references.clone_from(&kept.owner_references);
        m.deletion_timestamp.clone_from(&kept.deletion_timestamp);
        Ok(obj)
    }
}

impl<K: Brief> Packed<K> {
    pub fn brief(&self) -> &K::Brief {
        &self.brief
    }

    /// A copy whose packed bytes are cut short (they no longer decode), for tests of readers.
    #[cfg(test)]
    pub fn damaged(&self) -> Self {
        let mut copy = self.clone();
        copy.json = self.json[..self.json.len() / 2].into();
        copy
    }
}

/// Decodes as `K`, then packs (kube's Controller asks its object type to be deserialisable).
impl<'de, K> Deserialize<'de> for Packed<K>
where
    K: Resource + Serialize + DeserializeOwned + Brief,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let obj = K::deserialize(d)?;
        Packed::pack(&obj).map_err(serde::de::Error::custom)
    }
}

/// What scans over every Machine read (the gauges; the triggers of NetworkConfigurations,
/// attachments and StorageClasses; which attachments are still used), so that none of them
/// decodes 10,000 Machines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineBrief {
    pub phase: Option<Box<str>>,
    pub template: Option<Box<str>>,
    /// `spec.networks[].networkName`.
    pub networks: Box<[Box<str>]>,
    /// `spec.disks[].storageClass`.
    pub storage_classes: Box<[Box<str>]>,
    /// The KubevirtConfig whose cluster runs it (see `machine::placement`; the default is not
    /// applied here: the webhook writes it into the annotation).
    pub cluster: Option<Box<str>>,
    /// `metadata.generation` is not the one the status says it describes (or there is no
    /// status): a spec change no reconcile has answered yet. A new leader takes these first
    /// (see `run::first_pass`).
    pub spec_ahead: bool,
}

impl Brief for Machine {
    type Brief = MachineBrief;
    fn brief(&self) -> MachineBrief {
        MachineBrief {
            phase: self
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref().map(Into::into)),
            template: self.spec.template.as_deref().map(Into::into),
            networks: self
                .spec
                .networks
                .iter()
                .map(|n| n.network_name.as_str().into())
                .collect(),
            storage_classes: self
                .spec
                .disks
                .iter()
                .filter_map(|d| d.storage_class.as_deref().map(Into::into))
                .collect(),
            cluster: crate::machine::placement::of(self, None)
                .remote()
                .map(Into::into),
            spec_ahead: self.status.as_ref().and_then(|s| s.observed_generation)
                != self.metadata.generation,
        }
    }
}

/// The VM's `printableStatus`, for the gauges.
impl Brief for VirtualMachine {
    type Brief = Option<Box<str>>;
    fn brief(&self) -> Option<Box<str>> {
        self.status
            .as_ref()
            .and_then(|s| s.printable_status.as_deref().map(Into::into))
    }
}

/// What a VMI's cache entry keeps decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmiBrief {
    /// The Machine its labels name (KubeVirt copies them from the VM's template), for the
    /// trigger.
    pub machine: Option<Box<str>>,
    /// The node it runs on: a Node's change wakes the Machines on it.
    pub node: Option<Box<str>>,
}

impl Brief for VirtualMachineInstance {
    type Brief = VmiBrief;
    fn brief(&self) -> VmiBrief {
        VmiBrief {
            machine: machine_label(&self.metadata),
            node: (self.status.as_ref())
                .and_then(|s| s.node_name.as_deref())
                .filter(|n| !n.is_empty())
                .map(Into::into),
        }
    }
}

fn machine_label(meta: &ObjectMeta) -> Option<Box<str>> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(MACHINE_LABEL))
        .map(|m| m.as_str().into())
}

/// The Machine the DataVolume's label names, for the trigger (a released disk has no owner).
impl Brief for DataVolume {
    type Brief = Option<Box<str>>;
    fn brief(&self) -> Option<Box<str>> {
        machine_label(&self.metadata)
    }
}

impl Brief for NetworkAttachmentDefinition {
    type Brief = ();
    fn brief(&self) {}
}

impl Brief for PersistentVolumeClaim {
    type Brief = ();
    fn brief(&self) {}
}

#[cfg(test)]
mod tests;
