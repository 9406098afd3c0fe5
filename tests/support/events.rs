//! Events (events.k8s.io/v1) as the tests read them.

use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};

/// Events in `ns` about the object named `name`, as (type, reason, note).
pub async fn events_about(client: &Client, ns: &str, name: &str) -> Vec<(String, String, String)> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}
