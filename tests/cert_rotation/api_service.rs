//! The aggregated API's APIService (issue 34): installed without a caBundle, as the chart and
//! manifests install it, filled by the leader's certificate manager with the same bundle as the
//! webhook configurations, filled again when someone empties it, and never touched while it
//! names another Service.

#[allow(unused_imports)]
use crate::*;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DeleteParams, PostParams};
use kubevirt_operator::certs::api_service::NAME;
use kubevirt_operator::certs::config::{Lifetimes, RenewBefore, Settings};
use kubevirt_operator::certs::{CA_BUNDLE_WRITTEN_ANNOTATION, CertManager, Metrics};

fn installed(ns: &str, service: &str) -> APIService {
    serde_json::from_value(json!({
        "metadata": { "name": NAME },
        "spec": {
            "group": "subresources.vitistack.io",
            "version": "v1alpha1",
            "service": { "namespace": ns, "name": service, "port": 8444 },
            "groupPriorityMinimum": 1000,
            "versionPriority": 15,
        }
    }))
    .expect("APIService")
}

fn bundle_in(a: &APIService) -> Vec<Cert> {
    let b = a.spec.as_ref().and_then(|s| s.ca_bundle.as_ref());
    b.map(|b| Cert::all_from_pem(&b.0).0).unwrap_or_default()
}

async fn until_api_service(
    api: &Api<APIService>,
    what: &str,
    done: impl Fn(&APIService) -> bool,
) -> APIService {
    let started = Instant::now();
    loop {
        let live = api.get(NAME).await.expect("get APIService");
        if done(&live) {
            return live;
        }
        assert!(
            started.elapsed() < secs(60),
            "{what}: not within 60s; last: {live:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_service_gets_the_ca_bundle_like_the_webhook_configurations() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-apisvc").await;
    let api: Api<APIService> = Api::all(client.clone());
    let _ = api.delete(NAME, &DeleteParams::default()).await;
    let lifetimes = Lifetimes::new(secs(168 * 3600), secs(24 * 3600), RenewBefore::Percent(20))
        .expect("lifetimes");
    let settings = Settings::new(&ns, None, lifetimes)
        .expect("settings")
        .with_api_service(true);

    // Naming another Service: not ours, left alone while the certificates are made.
    let elsewhere = api
        .create(&PostParams::default(), &installed(&ns, "someone-else"))
        .await
        .expect("create APIService");
    let manager = CertManager::new(client.clone(), settings.clone(), Metrics::new());
    let running = tokio::spawn(manager.run(std::future::pending()));
    let store = Store::new(client.clone(), &ns);
    until_state(&store, "CA and bundle made", secs(60), |o| {
        o.ca.ok().is_some() && !bundle_of(o).is_empty()
    })
    .await;
    let live = api.get(NAME).await.expect("get");
    assert_eq!(
        live.spec, elsewhere.spec,
        "another Service's APIService was changed"
    );

    // Ours (the chart's shape): filled with the bundle, and the write recorded on it.
    api.delete(NAME, &DeleteParams::default())
        .await
        .expect("delete");
    api.create(
        &PostParams::default(),
        &installed(&ns, kubevirt_operator::certs::WEBHOOK_SERVICE),
    )
    .await
    .expect("create ours");
    let filled = until_api_service(&api, "filled", |a| !bundle_in(a).is_empty()).await;
    let o = observed(&store).await;
    assert_eq!(bundle_in(&filled), bundle_of(&o));
    assert!(
        filled
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CA_BUNDLE_WRITTEN_ANNOTATION)),
        "{filled:#?}"
    );

    // Emptied by hand (an `kubectl apply` of the chart's shape): filled again.
    let mut emptied = filled.clone();
    if let Some(spec) = emptied.spec.as_mut() {
        spec.ca_bundle = None;
    }
    api.replace(NAME, &PostParams::default(), &emptied)
        .await
        .expect("empty it");
    let refilled = until_api_service(&api, "filled again", |a| !bundle_in(a).is_empty()).await;
    assert_eq!(bundle_in(&refilled), bundle_of(&o));

    running.abort();
    api.delete(NAME, &DeleteParams::default())
        .await
        .expect("clean up");
}
