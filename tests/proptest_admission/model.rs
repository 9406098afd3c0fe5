//! The model: SPEC.md's resolution of a user's spec, computed independently of the code.

#[allow(unused_imports)]
use crate::*;
use serde_json::{Value, json};

// ------------------------------------------------------------------------------------------
// The model: SPEC.md's resolution of a user's spec, computed independently of the code.

/// A quantity as the resolved spec stores it: the string the user wrote, integers as digits.
pub(crate) fn quantity_string(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.to_string()),
        other => other.clone(),
    }
}

pub(crate) fn with_disk_defaults(d: &Value) -> Value {
    let mut d = d.clone();
    if let Some(size) = d.get("size").map(quantity_string) {
        d["size"] = size;
    }
    // Modes the user left unset stay unset: the reconciler takes them from the StorageProfile.
    d
}

pub(crate) fn model(user: &Value, default_template: &str) -> Value {
    let name = user["template"].as_str().unwrap_or(default_template);
    let t = template(name);
    let user_cpu = &user["resources"]["cpu"];
    let pick = |field: &str, from_template: i64| {
        user_cpu.get(field).cloned().unwrap_or(json!(from_template))
    };
    let memory = user["resources"]["memory"]
        .get("size")
        .map(quantity_string)
        .unwrap_or(json!(t.memory));

    let user_disks = user["disks"].as_array().cloned().unwrap_or_default();
    let mut root = user_disks
        .iter()
        .find(|d| d["name"] == "root")
        .cloned()
        .unwrap_or(json!({"name": "root"}));
    if root.get("size").is_none() {
        root["size"] = json!(t.root);
    }
    let mut disks = vec![with_disk_defaults(&root)];
    disks.extend(
        user_disks
            .iter()
            .filter(|d| d["name"] != "root")
            .map(with_disk_defaults),
    );

    let mut spec = json!({
        "template": name,
        "resources": {
            "cpu": {"cores": pick("cores", t.cores), "threads": pick("threads", 1), "sockets": pick("sockets", 1)},
            "memory": {"size": memory},
        },
        "disks": disks,
        "running": user.get("running").cloned().unwrap_or(json!(true)),
    });
    if let Some(nets) = user["networks"].as_array() {
        let nets: Vec<Value> = nets
            .iter()
            .map(|n| {
                let mut n = n.clone();
                if n.get("model").is_none() {
                    n["model"] = json!("virtio");
                }
                n
            })
            .collect();
        spec["networks"] = json!(nets);
    }
    if let Some(boot) = user.get("bootOrder") {
        spec["bootOrder"] = boot.clone();
    }
    if let Some(ci) = user.get("cloudInit") {
        let mut ci = ci.clone();
        if ci.get("secretRef").is_some() && ci["secretRef"].get("key").is_none() {
            ci["secretRef"]["key"] = json!("userdata");
        }
        spec["cloudInit"] = ci;
    }
    let mut domain = user.get("domain").cloned().unwrap_or(json!({}));
    if domain.get("machine").is_none() {
        domain["machine"] = json!({});
    }
    if domain["machine"].get("type").is_none() {
        domain["machine"]["type"] = json!("pc-q35");
    }
    spec["domain"] = domain;
    spec
}
