//! The shell of the reconciler's placement check ([`decide::placement`]): the KubevirtConfig's
//! `namespaceSelector` from its ready connection, the labels of the Machine's namespace read by
//! name (`get namespaces`; only when a selector decides, so Machines of a KubevirtConfig without
//! one, and local Machines, cost no request).

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;

use super::context::Context;
use super::remotes::Unready;
use crate::reconciler::decide::placement::{self as decide, PLACEMENT_FORBIDDEN, Placed};
use crate::reconciler::error::Error;

/// Why a Machine in `namespace` (`deleting` or not) must not be worked on on remote cluster
/// `cluster` now, or `None`.
pub async fn forbidden(
    ctx: &Context,
    namespace: &str,
    deleting: bool,
    cluster: &str,
) -> Result<Option<Unready>, Error> {
    // As the ready connection was made with: when not ready, nothing is worked on there anyway.
    let health = ctx.settings.clusters.get(cluster);
    let selector =
        (health.as_ref().and_then(|h| h.ready())).and_then(|c| c.namespace_selector.clone());
    let placed = Placed {
        namespace,
        deleting,
        selector: selector.as_ref(),
    };
    if !placed.asks_labels() {
        return Ok(None);
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let labels = (api.get_metadata_opt(namespace).await?)
        .and_then(|n| n.metadata.labels)
        .unwrap_or_default();
    Ok(decide::forbidden(&placed, &labels).map(|message| Unready {
        reason: PLACEMENT_FORBIDDEN.to_owned(),
        message,
    }))
}
