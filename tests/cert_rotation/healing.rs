//! Deleted, corrupted and edited objects heal without failed admissions.

#[allow(unused_imports)]
use crate::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kubevirt_operator::certs::config::{Lifetimes, RenewBefore};
use kubevirt_operator::certs::observed::{Observed, Stored};
use kubevirt_operator::certs::store::Store;
use kubevirt_operator::certs::x509::Cert;
use kubevirt_operator::certs::{
    BUNDLE_CONFIGMAP, BUNDLE_KEY, CA_SECRET, SERVING_SECRET, TLS_CERT_KEY, WEBHOOK_CONFIGURATION,
    issue,
};
use std::time::{Duration, Instant};

/// Replaces `key` of a managed Secret with garbage, keeping the label (ours, but broken).
async fn corrupt_secret(secrets: &Api<Secret>, name: &str) {
    let mut s = secrets.get(name).await.expect("get Secret");
    s.data.get_or_insert_default().insert(
        TLS_CERT_KEY.to_owned(),
        ByteString(b"-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n".to_vec()),
    );
    secrets
        .replace(name, &PostParams::default(), &s)
        .await
        .expect("corrupt Secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleted_corrupted_and_edited_objects_heal_without_failed_admissions() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-heal").await;
    let lifetimes = Lifetimes::new(secs(168 * 3600), secs(24 * 3600), RenewBefore::Percent(20))
        .expect("lifetimes");
    let mut op = Operator::start(&client, &ns, lifetimes).await;
    let store = Store::new(client.clone(), &ns);
    wait_for_webhooks(&client, &ns).await;
    until_state(&store, "settled", secs(30), |o| settled(o, &op)).await;
    tokio::time::sleep(secs(3)).await; // past the first CA's publish grace

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let other_ca = issue::issue_ca(chrono::Utc::now(), chrono::TimeDelta::hours(1)).expect("CA");

    let started = Instant::now();
    let load = Load::start(&client, &ns);
    let mut windows: Vec<(&str, Instant, Instant)> = Vec::new();
    let dp = DeleteParams::default();

    macro_rules! scenario {
        ($name:expr, $break_it:expr, $healed:expr) => {{
            let before = observed(&store).await;
            let t0 = Instant::now();
            $break_it;
            let took = until_state(&store, $name, secs(60), |o| $healed(&before, o)).await;
            until_state(&store, concat!($name, " (settled)"), secs(30), |o| {
                settled(o, &op)
            })
            .await;
            eprintln!("{}: healed in {took:?}", $name);
            windows.push(($name, t0, Instant::now()));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }};
    }

    let new_serving = |b: &Observed, o: &Observed| {
        serving_of(o).is_some_and(|s| Some(&s) != serving_of(b).as_ref())
    };
    let new_ca = |b: &Observed, o: &Observed| {
        ca_of(o).is_some_and(|c| Some(&c) != ca_of(b).as_ref())
            && o.serving.ok().and_then(|s| s.issuer_ca.clone()) == ca_of(o)
    };
    let bundle_back = |b: &Observed, o: &Observed| {
        matches!(o.bundle, Stored::Ok(_)) && ca_of(b).is_some_and(|c| bundle_of(o).contains(&c))
    };

    scenario!(
        "serving Secret deleted",
        secrets.delete(SERVING_SECRET, &dp).await.expect("delete"),
        new_serving
    );
    scenario!(
        "serving Secret corrupted",
        corrupt_secret(&secrets, SERVING_SECRET).await,
        new_serving
    );
    scenario!(
        "serving Secret replaced by an Opaque one",
        {
            secrets.delete(SERVING_SECRET, &dp).await.expect("delete");
            let opaque = Secret {
                metadata: ObjectMeta {
                    name: Some(SERVING_SECRET.to_owned()),
                    labels: Some(kubevirt_operator::certs::managed_labels()),
                    ..ObjectMeta::default()
                },
                type_: Some("Opaque".to_owned()),
                data: Some([("junk".to_owned(), ByteString(b"x".to_vec()))].into()),
                ..Secret::default()
            };
            secrets
                .create(&PostParams::default(), &opaque)
                .await
                .expect("create");
        },
        |b: &Observed, o: &Observed| new_serving(b, o)
    );
    assert_eq!(
        secrets
            .get(SERVING_SECRET)
            .await
            .expect("get")
            .type_
            .as_deref(),
        Some("kubernetes.io/tls"),
        "a Secret of another type is replaced, not patched"
    );
    scenario!(
        "CA Secret deleted",
        secrets.delete(CA_SECRET, &dp).await.expect("delete"),
        new_ca
    );
    scenario!(
        "CA Secret corrupted",
        corrupt_secret(&secrets, CA_SECRET).await,
        new_ca
    );
    scenario!(
        "bundle ConfigMap corrupted",
        {
            let mut cm = configmaps.get(BUNDLE_CONFIGMAP).await.expect("get");
            cm.data = Some([(BUNDLE_KEY.to_owned(), "garbage".to_owned())].into());
            configmaps
                .replace(BUNDLE_CONFIGMAP, &PostParams::default(), &cm)
                .await
                .expect("corrupt");
        },
        bundle_back
    );
    scenario!(
        "bundle ConfigMap deleted",
        configmaps
            .delete(BUNDLE_CONFIGMAP, &dp)
            .await
            .expect("delete"),
        bundle_back
    );
    scenario!(
        "ValidatingWebhookConfiguration caBundle edited (extra CA)",
        {
            let mut v = validating.get(WEBHOOK_CONFIGURATION).await.expect("get");
            for h in v.webhooks.iter_mut().flatten() {
                let mut pem = h.client_config.ca_bundle.clone().unwrap_or_default().0;
                pem.extend_from_slice(other_ca.cert_pem.as_bytes());
                h.client_config.ca_bundle = Some(ByteString(pem));
            }
            validating
                .replace(WEBHOOK_CONFIGURATION, &PostParams::default(), &v)
                .await
                .expect("edit");
        },
        |_: &Observed, o: &Observed| o.validating.ok().is_some_and(|v| {
            v.webhooks.iter().flatten().all(|h| {
                h.client_config
                    .ca_bundle
                    .as_ref()
                    .map(|b| Cert::all_from_pem(&b.0).0)
                    == Some(bundle_of(o))
            })
        })
    );
    let benign_end = Instant::now();

    // An edit that breaks trust: kube-apiserver refuses to call the webhook until the operator
    // has put the bundle back. Requests in that window can fail; none may fail after it.
    let broke_at = Instant::now();
    {
        let mut m = mutating.get(WEBHOOK_CONFIGURATION).await.expect("get");
        for h in m.webhooks.iter_mut().flatten() {
            h.client_config.ca_bundle = Some(ByteString(other_ca.cert_pem.clone().into_bytes()));
        }
        mutating
            .replace(WEBHOOK_CONFIGURATION, &PostParams::default(), &m)
            .await
            .expect("edit");
    }
    let healed_in = until_state(&store, "mutating caBundle restored", secs(30), |o| {
        mutating_bundle(o) == bundle_of(o)
    })
    .await;
    // kube-apiserver sees the restored configuration through its own informer, a moment later.
    let healed_at = Instant::now() + secs(1);
    tokio::time::sleep(secs(3)).await;

    // A foreign object is reported and left alone: stop the manager, replace the bundle
    // ConfigMap with an unlabelled one, start a manager again.
    op.stop_manager();
    let kept_bundle = observed(&store).await;
    configmaps
        .delete(BUNDLE_CONFIGMAP, &dp)
        .await
        .expect("delete");
    let foreign = ConfigMap {
        metadata: ObjectMeta {
            name: Some(BUNDLE_CONFIGMAP.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([(BUNDLE_KEY.to_owned(), "someone else's".to_owned())].into()),
        ..ConfigMap::default()
    };
    configmaps
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign ConfigMap");
    op.start_manager(&client, &ns, lifetimes);
    let problems = async {
        let started = Instant::now();
        loop {
            let p = op.counter("kubevirt_operator_certificate_problems");
            if p.contains("object=\"bundle_configmap\"} 1") {
                return p;
            }
            assert!(
                started.elapsed() < secs(20),
                "foreign ConfigMap not reported: {p}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    .await;
    tokio::time::sleep(secs(2)).await;
    let cm = configmaps.get(BUNDLE_CONFIGMAP).await.expect("get");
    assert_eq!(
        cm.data
            .as_ref()
            .and_then(|d| d.get(BUNDLE_KEY))
            .map(String::as_str),
        Some("someone else's")
    );
    assert!(
        cm.metadata.labels.is_none(),
        "never labelled or overwritten"
    );
    let now = observed(&store).await;
    assert_eq!(
        mutating_bundle(&now),
        bundle_of(&kept_bundle),
        "webhooks keep the last published bundle"
    );
    tokio::time::sleep(secs(2)).await;

    let outcomes = load.finish().await;
    let end = Instant::now();
    let benign = tally(&outcomes, started, benign_end);
    let broken = tally(&outcomes, broke_at, healed_at);
    let after = tally(&outcomes, healed_at, end);
    for (name, from, to) in &windows {
        let t = tally(&outcomes, *from, *to);
        eprintln!(
            "  {name}: {} creates, {} failed, {} not mutated",
            t.made,
            t.failed.len(),
            t.unmutated
        );
    }
    eprintln!(
        "healing: {} creates with {} failed and {} not mutated while Secrets, the bundle and webhook configurations were deleted, corrupted and edited; breaking caBundle edit healed in {healed_in:?} with {} of {} creates failing in that window; {} creates afterwards (incl. a foreign bundle ConfigMap, {problems}) with {} failed; wall {:?}",
        benign.made,
        benign.failed.len(),
        benign.unmutated,
        broken.failed.len(),
        broken.made,
        after.made,
        after.failed.len(),
        started.elapsed()
    );
    assert!(
        benign.failed.is_empty(),
        "failed admissions: {:?}",
        benign.failed
    );
    assert!(
        after.failed.is_empty(),
        "failed admissions after healing: {:?}",
        after.failed
    );
    assert!(
        healed_in < secs(5),
        "breaking caBundle edit healed in {healed_in:?}"
    );
}
