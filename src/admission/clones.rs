//! The mutating webhook's clone step (`spec.cloneFrom`), on CREATE: the author must be allowed
//! to `get` the source (the Machine; for a snapshot, the MachineSnapshot and then its Machine),
//! asked before each is read, so nobody learns whether one exists without the right. The source
//! is read, the new Machine filled from it ([`clones::fill`], pure) and decided again as if
//! written that way, so MACs, addresses and the class are its own. The validating webhook then
//! asks the author CDI's clone right on each claim or VolumeSnapshot (the filled disks are `pvc`
//! or `snapshot` clones) and `get` on the named source again. Any failure denies: a Machine that
//! says it is a clone is never stored as something else.

use std::collections::BTreeMap;

use json_patch::{AddOperation, Patch, PatchOperation, jsonptr::PointerBuf};
use serde_json::Value;

use crate::access::needs::{source_machine, source_snapshot};
use crate::access::{AccessError, AccessReviewer, Permission};
use crate::api::clone_from::Named;
use crate::api::names::KUBEVIRT_CONFIG_ANNOTATION;
use crate::api::snapshots::MachineSnapshot;
use crate::api::{Machine, MachineSpec};
use crate::machine::clones::{self, Copies, FROM, FROM_MACHINE, FROM_SNAPSHOT, SourceMachine};
use crate::machine::placement;
use crate::machine::{FieldError, FieldPath};
use crate::reconciler::apis::snapshot::{VirtualMachineSnapshot, VirtualMachineSnapshotContent};
use crate::snapshots::copies;

use super::decide::{Admission, invalid};
use super::refusals::{forbidden, unchecked};
use super::review::{Request, Verdict};
use super::status::internal;

/// The spec a CREATE names a clone source in; `None` for anything else (left to `verdict`).
fn requested(req: &Request) -> Option<MachineSpec> {
    let subresource = req.sub_resource.as_deref().is_some_and(|s| !s.is_empty());
    if req.operation != "CREATE" || subresource {
        return None;
    }
    let spec = req.object.as_ref()?.get("spec")?;
    spec.get("cloneFrom")?;
    let spec: MachineSpec = serde_json::from_value(spec.clone()).ok()?;
    // Rules on the field itself first (a malformed name is never looked up): the decision
    // already made refuses it.
    (clones::source_of(&spec).is_some() && clones::errors(&spec).is_empty()).then_some(spec)
}

/// `verdict` for a write that clones nothing; else the decision on the Machine filled from its
/// source, or why it cannot be.
pub async fn expand(
    admission: &Admission,
    reviewer: &AccessReviewer,
    req: &Request,
    verdict: Verdict,
    deadline: tokio::time::Instant,
) -> Verdict {
    let Some(spec) = requested(req) else {
        return verdict;
    };
    let reader = Reader {
        reviewer,
        req,
        deadline,
    };
    let found = match clones::source_of(&spec) {
        Some(Named::Machine(name)) => reader.machine(name, FROM_MACHINE).await,
        Some(Named::Snapshot(name)) => reader.snapshot(name).await,
        None => return verdict,
    };
    let (machine, snapshot) = match found {
        Ok(found) => found,
        Err(denial) => return *denial,
    };
    let placed = placement::of(&machine, None);
    // Where the new Machine goes, as the mutating webhook places it (its annotation, else the
    // default KubevirtConfig).
    let raw = req.object.as_ref().unwrap_or(&Value::Null);
    let annotation = (raw.pointer("/metadata/annotations"))
        .and_then(|a| a.get(KUBEVIRT_CONFIG_ANNOTATION))
        .and_then(Value::as_str);
    let target = placement::placement(annotation, None, false, admission.default_cluster());
    let name = machine.metadata.name.clone().unwrap_or_default();
    let copies = match &snapshot {
        None => Copies::Claims,
        Some((snapshot, volumes)) => Copies::Snapshot { snapshot, volumes },
    };
    let from = SourceMachine {
        name: &name,
        spec: &machine.spec,
        cluster: placed.remote(),
        copies,
    };
    let filled = match clones::fill(&from, &spec, target.remote()) {
        Ok(filled) => filled,
        Err(errors) => return Verdict::deny(invalid(&req.name, &errors)),
    };
    let filled = match serde_json::to_value(&filled) {
        Ok(v) => v,
        Err(e) => return Verdict::deny(internal(&e.to_string())),
    };
    let mut written = req.clone();
    if let Some(object) = written.object.as_mut().and_then(Value::as_object_mut) {
        object.insert("spec".to_owned(), filled.clone());
    }
    with_spec(admission.mutate(&written), filled)
}

/// Without a cluster to read the source from (the standalone `webhook` command), a clone is
/// refused rather than stored unfilled.
pub fn unfilled(req: &Request, verdict: Verdict) -> Verdict {
    if !verdict.allowed || requested(req).is_none() {
        return verdict;
    }
    let field = FieldPath::new(FROM);
    let error = FieldError::forbidden(
        &field,
        "this webhook has no cluster access to read the source (the standalone webhook \
         command): a clone is made only where kubevirt-operator runs with `run`",
    );
    Verdict::deny(invalid(&req.name, &[error]))
}

/// A refusal, as the webhook answers it.
type Denied = Box<Verdict>;

/// Reads for the author's request, each asked of them first.
struct Reader<'a> {
    reviewer: &'a AccessReviewer,
    req: &'a Request,
    deadline: tokio::time::Instant,
}

impl Reader<'_> {
    fn namespace(&self) -> &str {
        self.req.namespace.as_deref().unwrap_or_default()
    }

    /// Denied unless the author holds `need`.
    async fn ask(&self, need: Permission) -> Result<(), Denied> {
        let (user, field) = (&self.req.user_info, need.field.clone());
        match self.reviewer.denied(user, vec![need], self.deadline).await {
            Ok(denied) if denied.is_empty() => Ok(()),
            Ok(denied) => Err(Box::new(Verdict::deny(forbidden(
                "Machine",
                &self.req.name,
                &user.username,
                &denied,
            )))),
            Err(e) => Err(self.unchecked(&field, &e)),
        }
    }

    fn unchecked(&self, field: &str, e: &AccessError) -> Denied {
        Box::new(unchecked(self.req, &[field], e))
    }

    fn refused(&self, field: &str, value: &str, why: String) -> Denied {
        let error = FieldError::invalid(&FieldPath::new(field), value, why);
        Box::new(Verdict::deny(invalid(&self.req.name, &[error])))
    }

    /// `kind` `name` of the namespace, `None` when there is none.
    async fn read<K>(&self, field: &str, name: &str) -> Result<Option<K>, Denied>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let user = &self.req.user_info;
        (self
            .reviewer
            .read::<K>(user, self.namespace(), name, self.deadline)
            .await)
            .map_err(|e| self.unchecked(field, &e))
    }

    /// The source Machine `name`, its author allowed to `get` it.
    async fn machine(&self, name: &str, field: &str) -> Result<(Machine, Option<Snap>), Denied> {
        let need = Permission {
            field: field.to_owned(),
            ..source_machine(self.namespace(), name)
        };
        self.ask(need).await?;
        match self.read::<Machine>(field, name).await? {
            Some(m) => Ok((m, None)),
            None => {
                let ns = self.namespace();
                Err(self.refused(
                    field,
                    name,
                    format!("Machine {name} not found in namespace {ns}"),
                ))
            }
        }
    }

    /// The MachineSnapshot `name`'s Machine and each disk's VolumeSnapshot in it, its author
    /// allowed to `get` both.
    async fn snapshot(&self, name: &str) -> Result<(Machine, Option<Snap>), Denied> {
        let field = FROM_SNAPSHOT;
        self.ask(source_snapshot(self.namespace(), name)).await?;
        let Some(snap) = self.read::<MachineSnapshot>(field, name).await? else {
            let ns = self.namespace();
            let why = format!("MachineSnapshot {name} not found in namespace {ns}");
            return Err(self.refused(field, name, why));
        };
        let vm_snapshot = copies::usable(&snap).map_err(|why| self.refused(field, name, why))?;
        let of = snap.spec.machine_name.as_str();
        let need = Permission {
            field: field.to_owned(),
            ..source_machine(self.namespace(), of)
        };
        self.ask(need).await?;
        let machine = self.read::<Machine>(field, of).await?;
        let machine = copies::taken_of(&snap, machine.as_ref())
            .map_err(|why| self.refused(field, name, why))?
            .clone();
        let vm_snap = self
            .read::<VirtualMachineSnapshot>(field, vm_snapshot)
            .await?;
        let content = copies::content_name(&snap, vm_snap.as_ref())
            .map_err(|why| self.refused(field, name, why))?;
        let content = self
            .read::<VirtualMachineSnapshotContent>(field, content)
            .await?;
        let volumes = copies::volumes(vm_snapshot, content.as_ref())
            .map_err(|why| self.refused(field, name, why))?;
        Ok((machine, Some((name.to_owned(), volumes))))
    }
}

/// A MachineSnapshot's name and each disk's VolumeSnapshot in it.
type Snap = (String, BTreeMap<String, String>);

/// A verdict on the filled object, as a patch of the object as written: the filled spec is
/// added whenever the decision left the spec alone (only the spec differs between the two).
fn with_spec(mut verdict: Verdict, filled: Value) -> Verdict {
    if !verdict.allowed {
        return verdict;
    }
    let spec = PointerBuf::from_tokens(["spec"]);
    let patch = verdict.patch.get_or_insert_with(|| Patch(Vec::new()));
    let replaces = patch
        .0
        .iter()
        .any(|op| matches!(op, PatchOperation::Add(a) if a.path == spec));
    if !replaces {
        patch.0.insert(
            0,
            PatchOperation::Add(AddOperation {
                path: spec,
                value: filled,
            }),
        );
    }
    verdict
}
