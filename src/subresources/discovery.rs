//! The discovery documents of the group: kube-apiserver asks for `/apis/<group>/<version>` to
//! mark the APIService Available and to answer `kubectl api-resources`; `/apis` and
//! `/apis/<group>` are served too, as every aggregated server does.

use serde_json::{Value, json};

use super::{GROUP, VERSION};

/// The subresources of `machines` served so far (`machines/<name>` in discovery).
pub const SERVED: &[&str] = &[
    "pause",
    "unpause",
    "softreboot",
    "stop",
    "forcestop",
    "start",
    "restart",
];
/// The WebSocket streams served (GET with an upgrade: verb `get`).
pub const STREAMS: &[&str] = &["console", "vnc"];

fn group() -> Value {
    let version = json!({ "groupVersion": format!("{GROUP}/{VERSION}"), "version": VERSION });
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [version.clone()],
        "preferredVersion": version,
    })
}

/// `/apis`.
pub fn group_list() -> Value {
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": [group()] })
}

/// `/apis/<group>`.
pub fn api_group() -> Value {
    group()
}

/// `/apis/<group>/<version>`: each served subresource, namespaced, by its verb (PUT: update,
/// a stream: get).
pub fn resource_list() -> Value {
    let resources: Vec<Value> = (SERVED.iter().map(|sub| (*sub, "update")))
        .chain(STREAMS.iter().map(|sub| (*sub, "get")))
        .map(|(sub, verb)| {
            json!({
                "name": format!("machines/{sub}"),
                "singularName": "",
                "namespaced": true,
                "kind": "Machine",
                "verbs": [verb],
            })
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": resources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_names_the_group_and_version() {
        assert_eq!(
            group_list()["groups"][0]["preferredVersion"]["groupVersion"],
            "subresources.vitistack.io/v1alpha1"
        );
        assert_eq!(api_group()["name"], "subresources.vitistack.io");
        let list = resource_list();
        assert_eq!(list["groupVersion"], "subresources.vitistack.io/v1alpha1");
        assert_eq!(list["resources"][0]["name"], "machines/pause");
        assert_eq!(list["resources"][0]["verbs"][0], "update");
        let relayed = super::super::power::Power::ALL.map(|p| p.as_str());
        let through_machine = super::super::power_through_machine::Button::ALL.map(|b| b.as_str());
        assert_eq!(
            SERVED,
            [&relayed[..], &through_machine[..]].concat(),
            "discovery lists what is served"
        );
        let streams = super::super::sessions::Kind::ALL.map(|k| k.as_str());
        assert_eq!(STREAMS, streams, "and the streams");
        let console = list["resources"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["name"] == "machines/console"));
        assert_eq!(console.map(|c| &c["verbs"][0]), Some(&json!("get")));
    }
}
