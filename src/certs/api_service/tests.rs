use super::*;
use crate::certs::config::{Lifetimes, RenewBefore};
use crate::certs::holder::CaBundleHolder;

fn settings() -> Settings {
    let h = |n: u64| std::time::Duration::from_secs(n * 3600);
    let l = Lifetimes::new(h(168), h(24), RenewBefore::Percent(20)).unwrap();
    Settings::new("kubevirt-operator-system", None, l)
        .unwrap()
        .with_api_service(true)
}

/// As the chart and manifests install it: naming `service` in `namespace`, no caBundle.
pub(crate) fn installed(namespace: &str, service: &str) -> APIService {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": { "name": NAME, "resourceVersion": "7" },
        "spec": {
            "group": "subresources.vitistack.io",
            "version": "v1alpha1",
            "service": { "namespace": namespace, "name": service, "port": 8444 },
            "groupPriorityMinimum": 1000,
            "versionPriority": 15,
        }
    }))
    .unwrap()
}

#[test]
fn only_an_api_service_naming_our_service_is_filled() {
    let s = settings();
    let ours = installed("kubevirt-operator-system", "kubevirt-operator-webhook");
    let cases = [
        ("ours", ours.clone(), true),
        (
            "another namespace",
            installed("elsewhere", "kubevirt-operator-webhook"),
            false,
        ),
        (
            "another Service",
            installed("kubevirt-operator-system", "someone-else"),
            false,
        ),
        (
            "no Service (local)",
            {
                let mut a = ours.clone();
                a.spec.as_mut().unwrap().service = None;
                a
            },
            false,
        ),
        ("no spec", APIService::default(), false),
    ];
    for (case, live, want) in cases {
        assert_eq!(calls_us(&live, &s), want, "{case}");
        let filled = fill(&live, &s, b"PEM");
        assert_eq!(filled.is_some(), want, "{case}");
        if let Some(f) = filled {
            let spec = f.spec.as_ref().unwrap();
            assert_eq!(spec.ca_bundle, Some(ByteString(b"PEM".to_vec())), "{case}");
            // Only the caBundle changes: same service, priorities, resourceVersion.
            let mut back = f.clone();
            back.spec.as_mut().unwrap().ca_bundle = None;
            assert_eq!(back, live, "{case}");
            assert_ne!(live.bundles(&s), f.bundles(&s), "{case}");
            let again = fill(&f, &s, b"PEM").unwrap();
            assert_eq!(f.bundles(&s), again.bundles(&s), "{case}");
        }
    }
}

#[test]
fn insecure_skip_tls_verify_gives_way_to_the_ca_bundle() {
    let s = settings();
    let mut live = installed("kubevirt-operator-system", "kubevirt-operator-webhook");
    live.spec.as_mut().unwrap().insecure_skip_tls_verify = Some(true);
    let filled = fill(&live, &s, b"PEM").unwrap();
    assert_eq!(filled.spec.unwrap().insecure_skip_tls_verify, None);
}
