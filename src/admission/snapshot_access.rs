//! MachineSnapshot and MachineRestore, after their rules admit them (on CREATE): the author's
//! right on the Machine, asked as the author (`get` to snapshot it, `update` to restore it: a
//! restore rewrites its disks), then whether what they name exists and belongs together (a
//! snapshot of an earlier Machine of the name only with `spec.allowEarlierMachine`). The
//! right is asked first, so that nobody learns whether a Machine exists without it.

use serde_json::Value;

use crate::access::{AccessReviewer, Permission};
use crate::api::names::GROUP;
use crate::api::snapshots::{MachineSnapshot, MachineSnapshotSpec};
use crate::api::{Machine, MachineRestoreSpec};
use crate::machine::{FieldError, FieldPath};

use super::refusals::{forbidden, unchecked};
use super::review::{Request, Verdict};
use super::snapshots::{RESTORE_KIND, SNAPSHOT_KIND};
use super::status::invalid_kind;

fn on_machine(verb: &str, namespace: &str, machine: &str) -> Permission {
    Permission {
        field: "spec.machineName".to_owned(),
        verb: verb.to_owned(),
        group: GROUP.to_owned(),
        resource: "machines".to_owned(),
        subresource: String::new(),
        namespace: namespace.to_owned(),
        name: machine.to_owned(),
        adopted: false,
    }
}

/// The spec of an allowed CREATE, else `None` (nothing more to check).
fn created<S: serde::de::DeserializeOwned>(req: &Request, verdict: &Verdict) -> Option<S> {
    if !verdict.allowed || req.operation != "CREATE" {
        return None;
    }
    if req.sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
        return None;
    }
    let spec = req
        .object
        .as_ref()?
        .get("spec")
        .cloned()
        .unwrap_or(Value::Null);
    serde_json::from_value(spec).ok()
}

fn refused(kind: &str, req: &Request, field: &str, value: &str, why: String) -> Verdict {
    let error = FieldError::invalid(&FieldPath::new(field), value, why);
    Verdict::deny(invalid_kind(kind, &req.name, &[error]))
}

pub async fn check_snapshot(
    reviewer: &AccessReviewer,
    req: &Request,
    verdict: Verdict,
    deadline: tokio::time::Instant,
) -> Verdict {
    let Some(spec) = created::<MachineSnapshotSpec>(req, &verdict) else {
        return verdict;
    };
    let ns = req.namespace.as_deref().unwrap_or_default();
    let machine = spec.machine_name.as_str();
    let user = &req.user_info;
    match reviewer
        .denied(user, vec![on_machine("get", ns, machine)], deadline)
        .await
    {
        Ok(denied) if denied.is_empty() => {}
        Ok(denied) => {
            let status = forbidden(SNAPSHOT_KIND, &req.name, &user.username, &denied);
            return Verdict::deny(status);
        }
        Err(e) => return unchecked(req, &["spec.machineName"], &e),
    }
    match reviewer.read::<Machine>(user, ns, machine, deadline).await {
        Ok(Some(_)) => verdict,
        Ok(None) => refused(
            SNAPSHOT_KIND,
            req,
            "spec.machineName",
            machine,
            format!("Machine {machine} not found in namespace {ns}"),
        ),
        Err(e) => unchecked(req, &["spec.machineName"], &e),
    }
}

pub async fn check_restore(
    reviewer: &AccessReviewer,
    req: &Request,
    verdict: Verdict,
    deadline: tokio::time::Instant,
) -> Verdict {
    let Some(spec) = created::<MachineRestoreSpec>(req, &verdict) else {
        return verdict;
    };
    let ns = req.namespace.as_deref().unwrap_or_default();
    let (machine, snapshot) = (spec.machine_name.as_str(), spec.snapshot_name.as_str());
    let user = &req.user_info;
    match reviewer
        .denied(user, vec![on_machine("update", ns, machine)], deadline)
        .await
    {
        Ok(denied) if denied.is_empty() => {}
        Ok(denied) => {
            let status = forbidden(RESTORE_KIND, &req.name, &user.username, &denied);
            return Verdict::deny(status);
        }
        Err(e) => return unchecked(req, &["spec.machineName"], &e),
    }
    let found = match reviewer.read::<Machine>(user, ns, machine, deadline).await {
        Ok(Some(m)) => m,
        Ok(None) => {
            let why = format!("Machine {machine} not found in namespace {ns}");
            return refused(RESTORE_KIND, req, "spec.machineName", machine, why);
        }
        Err(e) => return unchecked(req, &["spec.machineName"], &e),
    };
    let snap = match reviewer
        .read::<MachineSnapshot>(user, ns, snapshot, deadline)
        .await
    {
        Ok(Some(s)) => s,
        Ok(None) => {
            let why = format!("MachineSnapshot {snapshot} not found in namespace {ns}");
            return refused(RESTORE_KIND, req, "spec.snapshotName", snapshot, why);
        }
        Err(e) => return unchecked(req, &["spec.snapshotName"], &e),
    };
    let taken_of = snap.status.as_ref().and_then(|s| s.machine_uid.as_deref());
    if snap.spec.machine_name != machine {
        let why = format!(
            "MachineSnapshot {snapshot} is a snapshot of Machine {}, not of {machine}",
            snap.spec.machine_name
        );
        return refused(RESTORE_KIND, req, "spec.snapshotName", snapshot, why);
    }
    // One of an earlier Machine of the name only when asked for; whether the operator took it
    // (its proof) is checked by the restore, which holds the key.
    let earlier = taken_of.is_some_and(|uid| Some(uid) != found.metadata.uid.as_deref());
    if earlier && !spec.allow_earlier_machine {
        let why = format!(
            "MachineSnapshot {snapshot} is a snapshot of an earlier Machine named {machine}; \
             set spec.allowEarlierMachine: true to restore it into this one"
        );
        return refused(RESTORE_KIND, req, "spec.snapshotName", snapshot, why);
    }
    verdict
}
