//! `kubevirt-operator validate -f FILE`: the webhooks' own decisions, offline. MachineClasses in
//! the input are checked as their webhook would, in document order (so a second default is
//! refused), and put in force beside the built-ins; then each Machine, wherever it is in the
//! input, is mutated (defaults, class merge) and validated exactly as kube-apiserver would have
//! the webhooks do it on CREATE, against those classes. CI can so check Machines against a
//! cluster's classes (`kubectl get mc -o yaml`) without the cluster. NetworkConfigurations in
//! the input have their `ipam` checked and hand out addresses to the Machines after them;
//! addresses are unique among the documents. A Machine with `spec.cloneFrom.machine` is filled
//! from the Machine of that name before it in the input, as the webhook fills it from the
//! cluster's; one with `spec.cloneFrom.snapshot` is checked as written (the copies it would be
//! filled from are on the cluster).

use std::io::Read;

use serde::Deserialize;
use serde_json::Value;

use crate::addresses::watch as address_watch;
use crate::addresses::{LiveAddresses, Pool};
use crate::admission::Admission;
use crate::admission::review::{GroupVersionKind, Request, Verdict};
use crate::api::clone_from::Named;
use crate::api::names::{
    GROUP, KUBEVIRT_CONFIG_ANNOTATION, MACHINE_CLASS_KIND, MACHINE_KIND, VERSION,
};
use crate::api::{Machine, MachineClass, MachineSpec, NetworkConfiguration};
use crate::machine::clones::{self, Copies, SourceMachine};
use crate::machine::field_error::join;
use crate::machine::placement;
use crate::machine::{Catalog, FieldPath};

const NETWORK_KIND: &str = "NetworkConfiguration";

/// What became of one document.
#[derive(Debug, PartialEq)]
pub enum Checked {
    /// The defaulted Machine, and any warnings.
    Valid {
        machine: Value,
        warnings: Vec<String>,
    },
    /// Why it was denied, in the webhook's words.
    Invalid { name: String, message: String },
    /// A MachineClass the webhook admits, as given.
    Class { class: Value },
    /// A NetworkConfiguration whose `ipam` is valid, as given: its ranges hand out addresses to
    /// the Machines after it in the stream.
    Network { network: Value },
}

/// Reads `path` (`-` for standard input).
pub fn read_input(path: &std::path::Path) -> std::io::Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        Ok(s)
    } else {
        std::fs::read_to_string(path)
    }
}

/// Checks every document of a YAML stream (JSON is YAML too) against `catalog` and the
/// MachineClasses in the stream. Empty documents are skipped.
pub fn check_documents(input: &str, catalog: &Catalog) -> Result<Vec<Checked>, String> {
    let mut docs = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(input).enumerate() {
        let value = Value::deserialize(doc)
            .map_err(|e| format!("document {}: not YAML or JSON: {e}", i + 1))?;
        if !value.is_null() {
            docs.push((i + 1, value));
        }
    }
    let mut classes: Vec<MachineClass> = Vec::new();
    let mut checked_classes = Vec::new();
    for (index, doc) in &docs {
        if kind_of(doc) != (format!("{GROUP}/{VERSION}").as_str(), MACHINE_CLASS_KIND) {
            continue;
        }
        let (so_far, _) = catalog.with_class_objects(&classes);
        let admission = Admission::new(so_far).map_err(|e| e.to_string())?;
        let verdict = admission.validate_class(&request(doc, *index, MACHINE_CLASS_KIND, "CREATE"));
        let name = name_of(doc);
        let result = match serde_json::from_value::<MachineClass>(doc.clone()) {
            Ok(class) if verdict.allowed => {
                classes.push(class);
                Checked::Class { class: doc.clone() }
            }
            _ => denied(name, &verdict),
        };
        checked_classes.push((*index, result));
    }
    let (catalog, _) = catalog.with_class_objects(&classes);
    let addresses = LiveAddresses::fixed([]);
    let admission = Admission::new(catalog)
        .map_err(|e| e.to_string())?
        .with_addresses(addresses.clone());
    let mut checked_classes = checked_classes.into_iter().peekable();
    let mut out = Vec::with_capacity(docs.len());
    let mut earlier: Vec<Machine> = Vec::new();
    for (index, doc) in docs {
        if let Some((_, class)) = checked_classes.next_if(|(i, _)| *i == index) {
            out.push(class);
            continue;
        }
        if kind_of(&doc) == (format!("{GROUP}/{VERSION}").as_str(), NETWORK_KIND) {
            out.push(check_network(doc, &addresses));
            continue;
        }
        let doc = match filled_clone(doc, &earlier) {
            Ok(doc) => doc,
            Err(refused) => {
                out.push(refused);
                continue;
            }
        };
        let checked = check_one(doc, index, &admission);
        if let Checked::Valid { machine, .. } = &checked
            && let Ok(m) = serde_json::from_value::<Machine>(machine.clone())
        {
            // Later documents see its addresses as held, as the cluster's index would.
            let (key, held) = address_watch::addresses(&m);
            addresses.with_shared(|s| s.index.set(0, &key, held));
            earlier.push(m);
        }
        out.push(checked);
    }
    Ok(out)
}

/// A NetworkConfiguration's `ipam` checked as its webhook does (the bridge and VLAN allow-lists
/// are the cluster's, not checked offline); a valid one's pool is put in force.
fn check_network(doc: Value, addresses: &LiveAddresses) -> Checked {
    let name = name_of(&doc);
    let nc = match serde_json::from_value::<NetworkConfiguration>(doc.clone()) {
        Ok(nc) => nc,
        Err(e) => {
            return Checked::Invalid {
                message: format!("NetworkConfiguration {name}: {e}"),
                name,
            };
        }
    };
    if let Some(ipam) = &nc.spec.ipam {
        let root = FieldPath::new("spec");
        let path = root.child("ipam");
        if let Err(errors) = Pool::check(ipam, &path) {
            return Checked::Invalid {
                message: format!(
                    "NetworkConfiguration.vitistack.io {name:?} is invalid: {}",
                    join(&errors)
                ),
                name,
            };
        }
    }
    let (key, pool) = address_watch::pool(&nc);
    addresses.with_shared(|s| s.set_pool(key, pool));
    Checked::Network { network: doc }
}

/// `doc` filled from the Machine its `spec.cloneFrom.machine` names among `earlier` (valid
/// Machines before it, in its namespace); unchanged when it clones nothing or is malformed
/// (the rules then say why).
fn filled_clone(mut doc: Value, earlier: &[Machine]) -> Result<Value, Checked> {
    let Some(spec) = doc.get("spec") else {
        return Ok(doc);
    };
    let Ok(spec) = serde_json::from_value::<MachineSpec>(spec.clone()) else {
        return Ok(doc);
    };
    // A snapshot's copies are on the cluster: such a clone is checked as written (the webhook
    // fills it there).
    let Some(Named::Machine(source)) = clones::source_of(&spec) else {
        return Ok(doc);
    };
    let name = name_of(&doc);
    let ns = doc.pointer("/metadata/namespace").and_then(Value::as_str);
    let found = earlier.iter().find(|m| {
        m.metadata.name.as_deref() == Some(source) && m.metadata.namespace.as_deref() == ns
    });
    let Some(found) = found else {
        return Err(Checked::Invalid {
            message: format!(
                "Machine.vitistack.io {name:?} is invalid: spec.cloneFrom.machine: Invalid value: \
                 {source:?}: no valid Machine {source} before it in the input (offline, a clone \
                 is filled from an earlier document of its namespace)"
            ),
            name,
        });
    };
    let placed = placement::of(found, None);
    let from = SourceMachine {
        name: source,
        spec: &found.spec,
        cluster: placed.remote(),
        copies: Copies::Claims,
    };
    let cluster = doc
        .pointer(&format!(
            "/metadata/annotations/{}",
            KUBEVIRT_CONFIG_ANNOTATION.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    match clones::fill(&from, &spec, cluster).map(serde_json::to_value) {
        Ok(Ok(filled)) => {
            doc["spec"] = filled;
            Ok(doc)
        }
        Ok(Err(e)) => Err(Checked::Invalid {
            message: format!("internal error: the clone does not encode: {e}"),
            name,
        }),
        Err(errors) => Err(Checked::Invalid {
            message: format!(
                "Machine.vitistack.io {name:?} is invalid: {}",
                join(&errors)
            ),
            name,
        }),
    }
}

fn kind_of(object: &Value) -> (&str, &str) {
    let text = |key| object.get(key).and_then(Value::as_str).unwrap_or_default();
    (text("apiVersion"), text("kind"))
}

fn name_of(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The AdmissionReview request kube-apiserver would send for `object`.
fn request(object: &Value, index: usize, kind: &str, operation: &str) -> Request {
    Request {
        uid: format!("offline-{index}"),
        kind: GroupVersionKind {
            group: GROUP.into(),
            version: VERSION.into(),
            kind: kind.into(),
        },
        name: name_of(object),
        namespace: object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned),
        operation: operation.into(),
        object: Some(object.clone()),
        ..Request::default()
    }
}

fn check_one(object: Value, index: usize, admission: &Admission) -> Checked {
    let name = name_of(&object);
    let (api_version, kind) = kind_of(&object);
    if api_version != format!("{GROUP}/{VERSION}") || kind != MACHINE_KIND {
        return Checked::Invalid {
            name,
            message: format!(
                "document {index}: {api_version}/{kind} is not a vitistack.io/v1alpha1 Machine or MachineClass"
            ),
        };
    }
    let mut request = request(&object, index, MACHINE_KIND, "CREATE");
    let mutated = admission.mutate(&request);
    if !mutated.allowed {
        return denied(name, &mutated);
    }
    if let (Some(patch), Some(object)) = (&mutated.patch, request.object.as_mut())
        && let Err(e) = json_patch::patch(object, patch)
    {
        return Checked::Invalid {
            name,
            message: format!("internal error: the mutation does not apply: {e}"),
        };
    }
    let validated = admission.validate(&request);
    if !validated.allowed {
        return denied(name, &validated);
    }
    Checked::Valid {
        machine: request.object.unwrap_or_default(),
        warnings: validated.warnings,
    }
}

fn denied(name: String, verdict: &Verdict) -> Checked {
    let message = verdict
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_else(|| "denied".to_owned());
    Checked::Invalid { name, message }
}
