//! The leader's gauges of leftovers (I/O): every `--orphan-check-interval` (default 10 min; 0s:
//! off), the local cluster and every ready KubevirtConfig's (the registry's clients) are listed
//! as `check --orphans` lists them, within the watch scopes: lists only, metadata only, in pages.
//! A cluster that cannot be looked at (not ready, a listing that failed) is published as not
//! checked, with no count. The counting is [`super::decide::tally`]; nothing is deleted.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::Client;

use super::decide::{Tally, judged, tally};
use super::scan::{self, LOCAL, Target};
use crate::clusters::{Health, Registry};
use crate::reconciler::run::watches::Scope;
use crate::telemetry::orphans::{ClusterKind, ClusterLabel, Metrics};

/// How long the first look waits for every KubevirtConfig's first probe and the ownership key
/// (made by the reconciler on a fresh install), so a new leader does not report a cluster it
/// simply has not probed yet as not checked for a whole interval.
const FIRST_WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct Settings {
    /// Between two looks; zero: never.
    pub interval: Duration,
    /// The operator's namespace, where its ownership key lives.
    pub namespace: String,
    /// The watch scopes: only their namespaces are listed (the operator may read no others).
    pub scopes: Vec<Scope>,
}

/// Publishes the counts until `stop` resolves, then drops them (the next leader publishes).
pub async fn run(
    client: Client,
    settings: Settings,
    registry: Registry,
    metrics: Metrics,
    stop: impl Future<Output = ()>,
) {
    if settings.interval.is_zero() {
        return;
    }
    let work = async {
        let mut shown = Tally::new();
        first_wait(&client, &settings.namespace, &registry).await;
        loop {
            let now = look(&client, &settings, &registry).await;
            publish(&metrics, &shown, &now);
            shown = now;
            tokio::time::sleep(settings.interval).await;
        }
    };
    tokio::select! {
        () = work => {}
        () = stop => {}
    }
    metrics.clear();
}

/// Every KubevirtConfig listed and probed once, and the key readable; at most [`FIRST_WAIT`].
async fn first_wait(client: &Client, namespace: &str, registry: &Registry) {
    let ready = async {
        loop {
            let probed = registry.listed().is_some_and(|names| {
                let health = registry.subscribe().borrow().clone();
                names.iter().all(|n| health.contains_key(n))
            });
            if probed && scan::key(client, namespace).await.is_ok() {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    };
    let _ = tokio::time::timeout(FIRST_WAIT, ready).await;
}

/// One look at every cluster.
async fn look(client: &Client, settings: &Settings, registry: &Registry) -> Tally {
    let health = registry.subscribe().borrow().clone();
    let mut unchecked: BTreeSet<String> = (registry.listed().unwrap_or_default().into_iter())
        .filter(|n| !health.contains_key(n))
        .collect();
    let key = match scan::key(client, &settings.namespace).await {
        Ok(key) => key,
        Err(e) => {
            tracing::warn!(error = %e, "cannot count leftovers");
            unchecked.insert(LOCAL.to_owned());
            unchecked.extend(health.keys().cloned());
            return tally(&[], &[], &Vec::from_iter(unchecked));
        }
    };
    let mut targets = vec![Target {
        name: LOCAL.to_owned(),
        client: client.clone(),
        key: key.clone(),
    }];
    for (name, h) in health.iter() {
        match h {
            Health::Ready(c) => targets.push(Target {
                name: name.clone(),
                client: c.client.clone(),
                key: key.without_history(),
            }),
            Health::NotReady { .. } => {
                unchecked.insert(name.clone());
            }
        }
    }
    let mut listed = Vec::new();
    for target in &targets {
        match scan::claiming(target, &settings.scopes).await {
            Ok(l) => listed.push((target, l)),
            Err(e) => {
                tracing::warn!(cluster = %target.name, error = %e, "cannot count leftovers there");
                unchecked.insert(target.name.clone());
            }
        }
    }
    // Read after the objects: one made for a Machine created meanwhile finds it.
    let live = match scan::live_machines(client, &settings.scopes).await {
        Ok(live) => live,
        Err(e) => {
            tracing::warn!(error = %e, "cannot count leftovers");
            unchecked.extend(targets.iter().map(|t| t.name.clone()));
            return tally(&[], &[], &Vec::from_iter(unchecked));
        }
    };
    let found: Vec<_> = (listed.iter())
        .flat_map(|(t, l)| judged(&t.name, &t.key, l, &live))
        .collect();
    let checked: Vec<String> = listed.iter().map(|(t, _)| t.name.clone()).collect();
    let now = tally(&found, &checked, &Vec::from_iter(unchecked));
    let leftovers: i64 = (now.values().flatten())
        .flat_map(|kinds| kinds.values())
        .map(|c| c.leftovers)
        .sum();
    tracing::info!(leftovers, clusters = now.len(), "counted leftovers");
    now
}

/// Sets the gauges to `now`, removing the series of `shown` that `now` no longer has.
fn publish(metrics: &Metrics, shown: &Tally, now: &Tally) {
    let series = |t: &Tally| -> BTreeSet<ClusterKind> {
        (t.iter())
            .filter_map(|(c, kinds)| Some((c, kinds.as_ref()?)))
            .flat_map(|(c, kinds)| {
                kinds.keys().map(|k| ClusterKind {
                    cluster: c.clone(),
                    kind: (*k).to_owned(),
                })
            })
            .collect()
    };
    for gone in series(shown).difference(&series(now)) {
        metrics.leftovers.remove(gone);
        metrics.unproven.remove(gone);
    }
    for cluster in shown.keys().filter(|c| !now.contains_key(*c)) {
        metrics.checked.remove(&ClusterLabel {
            cluster: cluster.clone(),
        });
    }
    for (cluster, kinds) in now {
        let label = ClusterLabel {
            cluster: cluster.clone(),
        };
        metrics
            .checked
            .get_or_create(&label)
            .set(i64::from(kinds.is_some()));
        for (kind, count) in kinds.iter().flatten() {
            let labels = ClusterKind {
                cluster: cluster.clone(),
                kind: (*kind).to_owned(),
            };
            metrics
                .leftovers
                .get_or_create(&labels)
                .set(count.leftovers);
            metrics.unproven.get_or_create(&labels).set(count.unproven);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::orphans::decide::Count;

    fn counts(leftovers: i64) -> Option<BTreeMap<&'static str, Count>> {
        Some(BTreeMap::from([(
            "VirtualMachine",
            Count {
                leftovers,
                unproven: 0,
            },
        )]))
    }

    /// What a scrape shows of the three families.
    fn shown(metrics: &Metrics) -> Vec<String> {
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        let mut lines: Vec<String> = (text.lines())
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn a_cluster_that_becomes_unreachable_loses_its_counts_and_says_not_checked() {
        let metrics = Metrics::default();
        let first: Tally = BTreeMap::from([
            ("local".to_owned(), counts(2)),
            ("dc1".to_owned(), counts(1)),
        ]);
        publish(&metrics, &Tally::new(), &first);
        assert_eq!(
            shown(&metrics),
            [
                r#"kubevirt_operator_orphans_checked{cluster="dc1"} 1"#,
                r#"kubevirt_operator_orphans_checked{cluster="local"} 1"#,
                r#"kubevirt_operator_orphans_unproven{cluster="dc1",kind="VirtualMachine"} 0"#,
                r#"kubevirt_operator_orphans_unproven{cluster="local",kind="VirtualMachine"} 0"#,
                r#"kubevirt_operator_orphans{cluster="dc1",kind="VirtualMachine"} 1"#,
                r#"kubevirt_operator_orphans{cluster="local",kind="VirtualMachine"} 2"#,
            ]
        );
        let second: Tally =
            BTreeMap::from([("local".to_owned(), counts(0)), ("dc1".to_owned(), None)]);
        publish(&metrics, &first, &second);
        assert_eq!(
            shown(&metrics),
            [
                r#"kubevirt_operator_orphans_checked{cluster="dc1"} 0"#,
                r#"kubevirt_operator_orphans_checked{cluster="local"} 1"#,
                r#"kubevirt_operator_orphans_unproven{cluster="local",kind="VirtualMachine"} 0"#,
                r#"kubevirt_operator_orphans{cluster="local",kind="VirtualMachine"} 0"#,
            ]
        );
        // A KubevirtConfig deleted: its series go.
        let third: Tally = BTreeMap::from([("local".to_owned(), counts(0))]);
        publish(&metrics, &second, &third);
        assert!(shown(&metrics).iter().all(|l| !l.contains("dc1")));
        metrics.clear();
        assert!(shown(&metrics).is_empty());
    }
}
