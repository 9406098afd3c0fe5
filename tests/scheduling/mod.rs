//! Shared by the schedule e2e tests: a clock the test moves, Machines, and a snapshot context
//! on it.

#![allow(dead_code)] // Not every test binary uses every helper.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use kubevirt_operator::api::Machine;
use kubevirt_operator::api::snapshots::MachineSnapshot;
use kubevirt_operator::reconciler::decide::evidence::OwnershipKey;
use kubevirt_operator::reconciler::run::watches::Scope;
use kubevirt_operator::snapshots::Clock;
use kubevirt_operator::snapshots::context::{Context, Settings};

/// A clock that moves only when told.
pub struct Hands(pub Mutex<DateTime<Utc>>);

impl Clock for Hands {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().expect("clock")
    }
}

impl Hands {
    pub fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().expect("clock") = t;
    }
}

pub async fn machine(client: &Client, ns: &str, name: &str, spec: serde_json::Value) -> Machine {
    let m: Machine = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("machine");
    Api::<Machine>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &m)
        .await
        .expect("create machine")
}

pub async fn names(snaps: &Api<MachineSnapshot>) -> Vec<String> {
    let mut n: Vec<String> = snaps
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|s| s.name_any())
        .collect();
    n.sort();
    n
}

/// The first full hour after `m` was made.
pub fn first_hour(m: &Machine) -> DateTime<Utc> {
    let created = m.metadata.creation_timestamp.as_ref().expect("created").0;
    let created = DateTime::<Utc>::from_timestamp(created.as_second(), 0).expect("time");
    (created + chrono::Duration::hours(1))
        .with_minute(0)
        .and_then(|t| t.with_second(0))
        .expect("hour")
}

pub fn context(client: &Client, clock: Arc<Hands>) -> Context {
    Context {
        client: client.clone(),
        settings: Settings {
            scopes: vec![Scope::All],
            namespace: "unused".into(),
            clock,
            tick: Duration::from_secs(1),
            limits: Default::default(),
            pause_image: kubevirt_operator::snapshots::context::DEFAULT_PAUSE_IMAGE.to_owned(),
            clusters: Default::default(),
            default_kubevirt_config: None,
        },
        key: OwnershipKey::new(&[7; 32], None).expect("key"),
        kubevirt: true,
    }
}

pub fn stamp(machine: &str, t: DateTime<Utc>) -> String {
    format!("{machine}-{}", t.format("%Y%m%d%H%M"))
}
