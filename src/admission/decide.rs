//! The admission decisions, as plain functions of the request: the HTTP layer only decodes,
//! calls [`Admission::mutate`] or [`Admission::validate`], and encodes.

use serde_json::Value;

use crate::access::AccessReviewer;
use crate::addresses::LiveAddresses;
use crate::api::names::CLASS_ANNOTATION;
use crate::classes::LiveCatalog;
use crate::machine::placement;
use crate::machine::resolve::resolve_in;
use crate::machine::update_rules::validate_update;
use crate::machine::validation::resources::running_update_errors;
use crate::machine::{Catalog, DEFAULTS_ANNOTATION};
use crate::macs::LiveMacs;

use super::addresses::{self, FillError};
use super::macs;
pub use super::patch_ops::annotation_op;
use super::patch_ops::{annotations_op, finalizer_op};
use super::review::{Request, Verdict};
use super::schema::{SchemaCheck, SchemaError};
use super::sizing::{Stored, stored_class};
pub use super::status::{bad_request, invalid, invalid_kind, too_large};
use super::status::{internal, unavailable};

mod admit;

use admit::{Admitted, record_for};

const GROUP: &str = "vitistack.io";
const KIND: &str = "Machine";

/// Everything the decisions need: the classes in force (a snapshot per request), the compiled
/// CRD schema and, when there is a cluster to ask, the access check made as the requesting user.
pub struct Admission {
    catalog: LiveCatalog,
    schema: SchemaCheck,
    access: Option<AccessReviewer>,
    /// The MAC addresses in use; none: interfaces keep what their author wrote (offline).
    macs: Option<LiveMacs>,
    /// The static addresses in use and the networks' pools; none: addresses are checked
    /// against nothing but the static rules (offline).
    addresses: Option<LiveAddresses>,
    /// `--default-kubevirt-config`: written into new Machines that name no cluster.
    default_cluster: Option<String>,
}

/// Until its first list of MachineClasses, a replica cannot tell which class a Machine gets.
const CLASSES_NOT_LOADED: &str = "this replica of kubevirt-operator has not read the MachineClasses yet (is it allowed to list and watch machineclasses.vitistack.io?); retry shortly";

impl Admission {
    /// Decisions on a catalog that never changes (no cluster).
    pub fn new(catalog: Catalog) -> Result<Self, SchemaError> {
        Self::with_catalog(LiveCatalog::fixed(catalog))
    }

    /// Decisions on the catalog `catalog` holds at each request (fed by the MachineClass watch).
    pub fn with_catalog(catalog: LiveCatalog) -> Result<Self, SchemaError> {
        Ok(Admission {
            catalog,
            schema: SchemaCheck::machine()?,
            access: None,
            macs: None,
            addresses: None,
            default_cluster: None,
        })
    }

    /// Validation also asks kube-apiserver whether the author may read what the Machine refers to.
    pub fn with_access(mut self, reviewer: AccessReviewer) -> Self {
        self.access = Some(reviewer);
        self
    }

    /// Interfaces without a MAC address get a stable one, unique among the Machines `macs`
    /// follows, and a new address another Machine uses is refused.
    pub fn with_macs(mut self, macs: LiveMacs) -> Self {
        self.macs = Some(macs);
        self
    }

    /// Interfaces on a network with ipam get a free address of its ranges, and an address
    /// another Machine holds on the same network is refused.
    pub fn with_addresses(mut self, addresses: LiveAddresses) -> Self {
        self.addresses = Some(addresses);
        self
    }

    /// New Machines that name no KubevirtConfig get `default` (`--default-kubevirt-config`).
    pub fn with_default_cluster(mut self, default: Option<String>) -> Self {
        self.default_cluster = default;
        self
    }

    /// `--default-kubevirt-config`, which new Machines naming no cluster are placed on.
    pub fn default_cluster(&self) -> Option<&str> {
        self.default_cluster.as_deref()
    }

    pub fn access(&self) -> Option<&AccessReviewer> {
        self.access.as_ref()
    }

    /// The catalog in force now.
    pub fn catalog(&self) -> arc_swap::Guard<std::sync::Arc<Catalog>> {
        self.catalog.load()
    }

    /// Defaults and merges the class into the object, as a JSON Patch.
    pub fn mutate(&self, req: &Request) -> Verdict {
        let catalog = self.catalog.load();
        if !catalog.loaded() {
            return Verdict::deny(unavailable(CLASSES_NOT_LOADED));
        }
        let stored = Stored::of(req);
        let Admitted {
            parsed,
            errors,
            unchanged,
            class,
            ..
        } = match self.admit(req, &catalog, stored.as_ref()) {
            Ok(a) => a,
            Err(verdict) => return *verdict,
        };
        if !errors.is_empty() {
            // An unchanged spec that no longer validates (stored before a rule existed) must not
            // block metadata updates such as finalizer removal: leave it alone.
            return if unchanged {
                Verdict::allow()
            } else {
                Verdict::deny(invalid(&parsed.name, &errors))
            };
        }
        let Some(class) = class else {
            return Verdict::deny(internal("no MachineClass was chosen and none refused"));
        };
        let mut resolved = resolve_in(
            &parsed.spec,
            record_for(&parsed, stored.as_ref()).as_ref(),
            &class.name,
            Some(class),
        );
        let mut warnings = Vec::new();
        if let Some(macs) = &self.macs {
            let key = macs::machine_key(req, &parsed.name);
            let old = req.old_object.as_ref();
            match macs::fill(&mut resolved.spec.networks, old, &key, macs) {
                Ok(given_up) => warnings = given_up,
                Err(e) => return Verdict::deny(internal(&e)),
            }
        }
        if let Some(live) = &self.addresses {
            let key = macs::machine_key(req, &parsed.name);
            let ns = req.namespace.as_deref().unwrap_or_default();
            let old = req.old_object.as_ref();
            match addresses::fill(&mut resolved.spec.networks, old, ns, &key, live) {
                Ok(()) => {}
                Err(FillError::NotLoaded) => {
                    return Verdict::deny(unavailable(addresses::ADDRESSES_NOT_LOADED));
                }
                Err(FillError::Exhausted(e)) => {
                    return Verdict::deny(invalid(&parsed.name, &[e]));
                }
            }
        }
        let (spec, record) = match (
            serde_json::to_value(&resolved.spec),
            serde_json::to_string(&resolved.from_template),
        ) {
            (Ok(spec), Ok(record)) => (spec, record),
            (Err(e), _) | (_, Err(e)) => {
                return Verdict::deny(internal(&format!(
                    "cannot encode the resolved Machine: {e}"
                )));
            }
        };
        // Only spec, the records and (on CREATE) the finalizer change. The spec is replaced
        // whole when it differs: the API server applies the patch to the object it sent, so
        // this is exact, and comparing is far cheaper than computing a minimal diff.
        let raw = req.object.as_ref().unwrap_or(&Value::Null);
        let mut patch = json_patch::Patch(Vec::with_capacity(4));
        if raw.get("spec") != Some(&spec) {
            patch
                .0
                .push(json_patch::PatchOperation::Add(json_patch::AddOperation {
                    path: json_patch::jsonptr::PointerBuf::from_tokens(["spec"]),
                    value: spec,
                }));
        }
        // The class as it is now goes into the Machine: editing or deleting the class later
        // never changes it.
        let mut records = vec![
            (DEFAULTS_ANNOTATION, record),
            (CLASS_ANNOTATION, class.record.clone()),
        ];
        // A new Machine names its cluster for good: the default in force when it was created.
        let create = req.operation == "CREATE";
        records.extend(placement::defaulted(
            create,
            raw,
            self.default_cluster.as_deref(),
        ));
        patch.0.extend(annotations_op(raw, records));
        // CREATE only: on UPDATE a finalizer that is missing was removed on purpose (by a user,
        // or by the reconciler finishing a deletion), and must not come back. After the
        // annotation ops, which create `metadata` when the object has none.
        if req.operation == "CREATE" {
            patch.0.extend(finalizer_op(raw));
        }
        Verdict {
            patch: Some(patch),
            ..Verdict::allow()
        }
        .with_warnings(warnings)
    }

    /// Every rule, all errors at once; warnings for what is accepted but ignored.
    pub fn validate(&self, req: &Request) -> Verdict {
        let catalog = self.catalog.load();
        if !catalog.loaded() {
            return Verdict::deny(unavailable(CLASSES_NOT_LOADED));
        }
        let stored = Stored::of(req);
        let Admitted {
            parsed,
            mut errors,
            warnings,
            unchanged,
            class,
        } = match self.admit(req, &catalog, stored.as_ref()) {
            Ok(a) => a,
            Err(verdict) => return *verdict,
        };
        if unchanged {
            return Verdict::allow();
        }
        if let Some(macs) = &self.macs {
            let key = macs::machine_key(req, &parsed.name);
            let old = req.old_object.as_ref();
            match macs::duplicate_errors(&parsed.spec.networks, old, &key, macs) {
                Ok(duplicates) => errors.extend(duplicates),
                Err(why) => return Verdict::deny(unavailable(why)),
            }
        }
        if let Some(live) = &self.addresses {
            let key = macs::machine_key(req, &parsed.name);
            let ns = req.namespace.as_deref().unwrap_or_default();
            let old = req.old_object.as_ref();
            match addresses::errors(&parsed.spec.networks, old, ns, &key, live) {
                Ok(taken) => errors.extend(taken),
                Err(why) => return Verdict::deny(unavailable(why)),
            }
        }
        errors.extend(addresses::network_data_errors(
            &parsed.spec.networks,
            parsed.spec.cloud_init.as_ref(),
        ));
        if let (Some(old), Some(class)) = (stored.as_ref(), class) {
            // The stored disks are the truth: every stored value counts as set, so nothing a
            // class says today can make an unchanged disk look resized.
            let (old_name, old_class) = stored_class(old, &catalog);
            let old_resolved = resolve_in(&old.spec, None, old_name, old_class);
            let new_resolved = resolve_in(
                &parsed.spec,
                record_for(&parsed, stored.as_ref()).as_ref(),
                &class.name,
                Some(class),
            );
            errors.extend(validate_update(
                &old_resolved.spec,
                &new_resolved.spec,
                &old.hotplugged,
            ));
            if old.running {
                errors.extend(running_update_errors(
                    &old_resolved.spec,
                    &new_resolved.spec,
                ));
            }
        }
        if errors.is_empty() {
            Verdict::allow().with_warnings(warnings)
        } else {
            Verdict::deny(invalid(&parsed.name, &errors)).with_warnings(warnings)
        }
    }
}

#[cfg(test)]
mod tests;
