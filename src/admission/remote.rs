//! The validating webhook's checks of a Machine placed on a remote cluster
//! ([`crate::access::placement`]), before what every Machine is asked: a clone from another
//! namespace there needs its KubevirtConfig's `allowCrossNamespaceClones`; on CREATE (the
//! placement never changes after), the KubevirtConfig's `namespaceSelector` must select the
//! Machine's namespace. `use` on it is asked with the author's other permissions
//! (`super::access::check`). Local Machines never come here: none of this costs them a call.

use crate::access::AccessReviewer;
use crate::access::needs::{Change, cross_namespace_clones};
use crate::api::names::KUBEVIRT_CONFIG_ANNOTATION;
use crate::machine::FieldError;
use crate::machine::field_error::ErrorType;
use crate::machine::namespace_selector::selects;

use super::refusals::{machine_forbidden, unchecked};
use super::review::{Request, Verdict};

/// A denial of the placement of `change` on `cluster`, or `None` when nothing here refuses it.
pub async fn refused(
    reviewer: &AccessReviewer,
    req: &Request,
    change: &Change<'_>,
    cluster: &str,
    deadline: tokio::time::Instant,
) -> Option<Verdict> {
    let cross = cross_namespace_clones(change);
    let create = req.operation == "CREATE";
    if cross.is_empty() && !create {
        return None;
    }
    let annotation = format!("metadata.annotations[{KUBEVIRT_CONFIG_ANNOTATION}]");
    let config = match reviewer.kubevirt_config(cluster, deadline).await {
        Ok(config) => config,
        Err(e) => {
            let mut fields: Vec<&str> = cross.iter().map(|(f, _)| f.as_str()).collect();
            fields.push(&annotation);
            return Some(unchecked(req, &fields, &e));
        }
    };
    let allows_cross =
        (config.as_ref()).is_some_and(|c| c.allow_cross_namespace_clones == Some(true));
    if !cross.is_empty() && !allows_cross {
        let why = match config {
            None => format!("KubevirtConfig {cluster} does not exist"),
            Some(_) => {
                format!("KubevirtConfig {cluster} does not set allowCrossNamespaceClones: true")
            }
        };
        let errors: Vec<FieldError> = cross
            .iter()
            .map(|(field, ns)| FieldError {
                kind: ErrorType::Forbidden,
                field: field.clone(),
                value: serde_json::Value::Null,
                detail: format!(
                    "a clone from namespace {ns:?} on cluster {cluster}: {why} (the author \
                     cannot be asked about that cluster)"
                ),
            })
            .collect();
        return Some(Verdict::deny(machine_forbidden(&req.name, &errors)));
    }
    let selector = config.as_ref().and_then(|c| c.namespace_selector.as_ref());
    if !create || selector.is_none() {
        return None;
    }
    let labels = match reviewer.namespace_labels(change.namespace, deadline).await {
        Ok(labels) => labels,
        Err(e) => return Some(unchecked(req, &[&annotation], &e)),
    };
    if selects(selector, &labels) {
        return None;
    }
    let error = FieldError {
        kind: ErrorType::Forbidden,
        field: annotation,
        value: cluster.into(),
        detail: format!(
            "KubevirtConfig {cluster}'s namespaceSelector does not select namespace {:?}: \
             Machines of this namespace cannot use it",
            change.namespace
        ),
    };
    Some(Verdict::deny(machine_forbidden(&req.name, &[error])))
}

#[cfg(test)]
mod tests;
