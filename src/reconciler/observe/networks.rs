//! Which attachments no Machine uses any more, from the caches: the Machines' briefs on the
//! management cluster, our attachments on the Machine's cluster.

use std::collections::BTreeSet;

use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::reconciler::apis::multus::NetworkAttachmentDefinition;
use crate::reconciler::run::cluster::Cluster;
use crate::reconciler::run::context::Context;
use crate::reconciler::{MANAGED_BY, MANAGED_BY_LABEL};

/// Network names in `ns` that no Machine there names, other than deleting ones and `except`.
/// Only those of our cached attachments are computed (none: no work).
pub fn unused_networks(
    ctx: &Context,
    cluster: &Cluster,
    ns: &str,
    except: &str,
) -> BTreeSet<String> {
    let used = used_in(ctx, ns, except);
    unused_in(ctx, cluster, ns, except)
        .into_iter()
        .map(|n| n.name_any())
        .chain(
            // The leaving Machine's own networks, whether or not the cache holds their attachment.
            ctx.stores
                .machines
                .get(&ObjectRef::new(except).within(ns))
                .map(|m| {
                    m.brief()
                        .networks
                        .iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
                .into_iter()
                .filter(|name| !used.contains(name)),
        )
        .collect()
}

/// Network names that live Machines in `ns` (other than `except`) name (the networks of a
/// resolved spec are the spec's own).
fn used_in(ctx: &Context, ns: &str, except: &str) -> BTreeSet<String> {
    ctx.stores
        .machines
        .state_filter(|m| {
            m.namespace().as_deref() == Some(ns)
                && m.meta().deletion_timestamp.is_none()
                && m.name_any() != except
        })
        .iter()
        .flat_map(|m| m.brief().networks.iter().map(|n| n.to_string()))
        .collect()
}

/// Our cached attachments in `ns` whose network no live Machine there (but `except`) names.
pub fn unused_in(
    ctx: &Context,
    cluster: &Cluster,
    ns: &str,
    except: &str,
) -> Vec<NetworkAttachmentDefinition> {
    let cached = cluster
        .stores
        .nads
        .state_filter(|n| n.namespace().as_deref() == Some(ns));
    if cached.is_empty() {
        return Vec::new();
    }
    let used = used_in(ctx, ns, except);
    cached
        .into_iter()
        .filter(|n| !used.contains(&n.name_any()))
        .filter_map(|n| n.unpack().ok())
        // The cache selects by this label; checked again as the deletion depends on it.
        .filter(|n| n.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY))
        .collect()
}
