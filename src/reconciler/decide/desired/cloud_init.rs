//! Cloud-init as KubeVirt's `cloudInitNoCloud` volume. Inline data is written as is; user data
//! from a Secret is referenced, never copied into the VM. KubeVirt reads the key `userdata`, so a
//! Secret that keeps it under another key is copied into a Secret derived for the Machine. Network
//! data over virt-api's inline limit (2048 bytes) goes into that derived Secret too, under
//! `networkdata`, named by `networkDataSecretRef`: virt-api refuses it inline.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use crate::api::machine::CloudInit;
use crate::api::{Machine, MachineSpec, NetworkConfiguration};
use crate::machine::resolve::DEFAULT_SECRET_KEY;
use crate::machine::validation::MAX_INLINE_NETWORK_DATA;
use crate::reconciler::apis::kubevirt::{CloudInitNoCloud, LocalObjectReference, Volume};
use crate::reconciler::{CLOUD_INIT_VOLUME, NETWORKDATA_KEY, USERDATA_KEY};

use super::Problem;
use super::meta::{derived_secret_name, owned_by_machine};

/// What was found for the Machine's `cloudInit.secretRef` in its own namespace.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SecretData<'a> {
    Missing,
    KeyMissing,
    Present(&'a [u8]),
}

impl std::fmt::Debug for SecretData<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretData::Missing => f.write_str("Missing"),
            SecretData::KeyMissing => f.write_str("KeyMissing"),
            SecretData::Present(_) => f.write_str("Present(<redacted>)"),
        }
    }
}

/// The Secret and key the VM's user data comes from, when it comes from a Secret at all
/// (inline user data wins over a secretRef).
pub fn secret_source(ci: Option<&CloudInit>) -> Option<(&str, &str)> {
    let ci = ci?;
    if ci.user_data.is_some() {
        return None;
    }
    let r = ci.secret_ref.as_ref()?;
    Some((
        r.name.as_str(),
        r.key.as_deref().unwrap_or(DEFAULT_SECRET_KEY),
    ))
}

/// What the user's Secret holds under the key the spec's user data comes from, when it comes
/// from a Secret (`source`: that Secret in the Machine's namespace, if it exists).
pub fn secret_data<'a>(
    ci: Option<&CloudInit>,
    source: Option<&'a Secret>,
) -> Option<SecretData<'a>> {
    let (_, key) = secret_source(ci)?;
    Some(match source {
        None => SecretData::Missing,
        Some(s) => (s.data.as_ref())
            .and_then(|d| d.get(key))
            .map_or(SecretData::KeyMissing, |b| SecretData::Present(&b.0)),
    })
}

/// The derived Secret `decide` writes for `machine` (its resolved `spec`, the user's `source`
/// Secret, the NetworkConfigurations its addresses are drawn from), on a `remote` cluster or
/// not: what a remembered one must hold for observe to take it without a read
/// (`observe::Derived`). `None` when none is wanted.
pub fn derived_secret(
    machine: &Machine,
    spec: &MachineSpec,
    (source, remote): (Option<&Secret>, bool),
    network_configurations: &BTreeMap<String, NetworkConfiguration>,
) -> Option<Secret> {
    let ci = spec.cloud_init.as_ref();
    let network_config = super::network::network_config(&spec.networks, network_configurations);
    let data = (secret_data(ci, source), remote);
    let mut secret = plan(machine, ci, data, network_config).derived_secret?;
    if remote {
        // As `decide::remote` writes it there: no owner reference crosses clusters.
        secret.metadata.owner_references = None;
    }
    Some(secret)
}

/// The cloud-init volume, a derived Secret when one is needed, or what is missing.
pub struct CloudInitPlan {
    pub volume: Option<Volume>,
    pub derived_secret: Option<Secret>,
    pub problem: Option<Problem>,
}

/// `secret`: what was found of the user's Secret, and whether to copy it even under `userdata`
/// (a remote cluster, where the user's Secret is not).
/// `network_config`: the one derived from the Machine's addresses (`crate::addresses`), used
/// when the user wrote no network data (theirs wins; admission refused it if it contradicts).
pub fn plan(
    machine: &Machine,
    ci: Option<&CloudInit>,
    (secret, copy): (Option<SecretData>, bool),
    network_config: Option<String>,
) -> CloudInitPlan {
    let mut out = CloudInitPlan {
        volume: None,
        derived_secret: None,
        problem: None,
    };
    let none = CloudInit::default();
    let ci = match (ci, &network_config) {
        (Some(ci), _) => ci,
        (None, Some(_)) => &none,
        (None, None) => return out,
    };
    let derived = derived_secret_name(&machine.name_any());
    let mut data = BTreeMap::new();
    let mut source = CloudInitNoCloud {
        user_data: ci.user_data.clone(),
        network_data: ci.network_data.clone(),
        ..CloudInitNoCloud::default()
    };
    // Through the derived Secret, like long user network data: addresses stay out of the VM
    // object, and one place holds what the guest is given.
    if let Some(config) = network_config.filter(|_| ci.network_data.is_none()) {
        data.insert(NETWORKDATA_KEY.to_owned(), ByteString(config.into_bytes()));
        source.network_data_secret_ref = Some(LocalObjectReference {
            name: derived.clone(),
        });
    }
    if let Some(network) = ci
        .network_data
        .as_ref()
        .filter(|d| d.len() > MAX_INLINE_NETWORK_DATA)
    {
        data.insert(
            NETWORKDATA_KEY.to_owned(),
            ByteString(network.as_bytes().to_vec()),
        );
        source.network_data = None;
        source.network_data_secret_ref = Some(LocalObjectReference {
            name: derived.clone(),
        });
    }
    if let Some((name, key)) = secret_source(Some(ci)) {
        match secret {
            None | Some(SecretData::Missing) => {
                out.problem = Some(Problem::SecretNotFound {
                    name: name.to_owned(),
                });
                return out;
            }
            Some(SecretData::KeyMissing) => {
                out.problem = Some(Problem::SecretKeyNotFound {
                    name: name.to_owned(),
                    key: key.to_owned(),
                });
                return out;
            }
            Some(SecretData::Present(_)) if key == USERDATA_KEY && !copy => {
                source.user_data_secret_ref = Some(LocalObjectReference {
                    name: name.to_owned(),
                });
            }
            Some(SecretData::Present(bytes)) => {
                data.insert(USERDATA_KEY.to_owned(), ByteString(bytes.to_vec()));
                source.user_data_secret_ref = Some(LocalObjectReference {
                    name: derived.clone(),
                });
            }
        }
    }
    if !data.is_empty() {
        out.derived_secret = Some(Secret {
            metadata: owned_by_machine(machine, derived),
            type_: Some("Opaque".to_owned()),
            data: Some(data),
            ..Secret::default()
        });
    }
    if source == CloudInitNoCloud::default() {
        return out;
    }
    out.volume = Some(Volume {
        name: CLOUD_INIT_VOLUME.to_owned(),
        cloud_init_no_cloud: Some(source),
        ..Volume::default()
    });
    out
}
