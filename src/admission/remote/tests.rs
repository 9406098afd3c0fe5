//! What the placement checks cost, counted on a fake kube-apiserver that records every request:
//! a local Machine costs nothing more (no KubevirtConfig, Namespace or `use` review), a remote
//! one a list of its KubevirtConfig, its Namespace when a selector is set, and one `use` review,
//! remembered like the other reviews.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::access::{AccessReviewer, UserInfo};
use crate::admission::access::check;
use crate::admission::review::{Request, Verdict};

type Seen = Arc<Mutex<Vec<String>>>;

struct Fake {
    seen: Seen,
    /// KubevirtConfig dc1's namespaceSelector.
    selector: Option<Value>,
}

fn json_answer(code: StatusCode, body: Value) -> Response {
    let headers = [(header::CONTENT_TYPE, "application/json")];
    (code, headers, body.to_string()).into_response()
}

async fn answer(State(fake): State<Arc<Fake>>, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    if let Ok(mut seen) = fake.seen.lock() {
        seen.push(format!("{method} {path}"));
    }
    let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": "NotFound", "code": 404});
    match path.as_str() {
        "/apis/authorization.k8s.io/v1/subjectaccessreviews" => {
            let mut review: Value = serde_json::from_slice(&body).unwrap_or_default();
            review["status"] = json!({"allowed": true});
            json_answer(StatusCode::CREATED, review)
        }
        "/apis/vitistack.io/v1alpha1/kubevirtconfigs" => {
            let mut spec = json!({"kubeconfigSecretRef": "k", "secretNamespace": "ops"});
            if let Some(selector) = &fake.selector {
                spec["namespaceSelector"] = selector.clone();
            }
            json_answer(
                StatusCode::OK,
                json!({"apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfigList",
                    "metadata": {}, "items": [{"apiVersion": "vitistack.io/v1alpha1",
                    "kind": "KubevirtConfig", "metadata": {"name": "dc1"}, "spec": spec}]}),
            )
        }
        "/api/v1/namespaces/team-a" => json_answer(
            StatusCode::OK,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                "metadata": {"name": "team-a", "labels": {"tenant": "a"}}}),
        ),
        _ => json_answer(StatusCode::NOT_FOUND, not_found),
    }
}

/// A reviewer talking to a fake API server, and what that server saw.
async fn fake_api(selector: Option<Value>) -> (AccessReviewer, Seen) {
    let seen = Seen::default();
    let fake = Arc::new(Fake {
        seen: seen.clone(),
        selector,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let app = axum::Router::new().fallback(answer).with_state(fake);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().expect("url"));
    let client = kube::Client::try_from(config).expect("client");
    (AccessReviewer::new(client), seen)
}

fn create(name: &str, cluster: Option<&str>) -> Request {
    let annotations = cluster.map_or(json!({}), |c| json!({"vitistack.io/kubevirt-config": c}));
    Request {
        uid: name.into(),
        name: name.into(),
        operation: "CREATE".into(),
        namespace: Some("team-a".into()),
        object: Some(
            json!({"metadata": {"name": name, "annotations": annotations},
            "spec": {"cloudInit": {"secretRef": {"name": "boot"}}}}),
        ),
        user_info: UserInfo {
            username: "bob".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn deadline() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(4)
}

/// The requests seen since the last call, cleared.
fn taken(seen: &Seen) -> Vec<String> {
    seen.lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default()
}

const REVIEW: &str = "POST /apis/authorization.k8s.io/v1/subjectaccessreviews";
const CONFIG: &str = "GET /apis/vitistack.io/v1alpha1/kubevirtconfigs";
const NAMESPACE: &str = "GET /api/v1/namespaces/team-a";

#[tokio::test]
async fn a_local_machine_asks_nothing_about_placement() {
    let (reviewer, seen) = fake_api(Some(json!({"matchLabels": {"tenant": "a"}}))).await;
    let verdict = check(
        &reviewer,
        &create("near", None),
        Verdict::allow(),
        deadline(),
    )
    .await;
    assert!(verdict.allowed, "{verdict:?}");
    // Its cloud-init Secret, as before: one review, no KubevirtConfig, no Namespace.
    assert_eq!(taken(&seen), [REVIEW]);
}

#[tokio::test]
async fn a_remote_placement_is_one_review_remembered_like_the_others() {
    let (reviewer, seen) = fake_api(None).await;
    let verdict = check(
        &reviewer,
        &create("a", Some("dc1")),
        Verdict::allow(),
        deadline(),
    )
    .await;
    assert!(verdict.allowed, "{verdict:?}");
    // No selector: no Namespace read; the Secret's and the placement's reviews.
    assert_eq!(taken(&seen), [CONFIG, REVIEW, REVIEW]);
    // The same author on the same cluster again: both verdicts remembered.
    let verdict = check(
        &reviewer,
        &create("b", Some("dc1")),
        Verdict::allow(),
        deadline(),
    )
    .await;
    assert!(verdict.allowed, "{verdict:?}");
    assert_eq!(taken(&seen), [CONFIG]);
    // An update leaves the placement alone: nothing about it is read or asked.
    let update = Request {
        operation: "UPDATE".into(),
        old_object: create("b", Some("dc1")).object,
        ..create("b", Some("dc1"))
    };
    let verdict = check(&reviewer, &update, Verdict::allow(), deadline()).await;
    assert!(verdict.allowed, "{verdict:?}");
    assert!(taken(&seen).is_empty());
}

#[tokio::test]
async fn a_selector_reads_the_namespace_and_refuses_outside_it() {
    let (reviewer, seen) = fake_api(Some(json!({"matchLabels": {"tenant": "a"}}))).await;
    let verdict = check(
        &reviewer,
        &create("a", Some("dc1")),
        Verdict::allow(),
        deadline(),
    )
    .await;
    assert!(verdict.allowed, "{verdict:?}");
    assert_eq!(taken(&seen), [CONFIG, NAMESPACE, REVIEW, REVIEW]);
    let (reviewer, seen) = fake_api(Some(json!({"matchLabels": {"tenant": "b"}}))).await;
    let verdict = check(
        &reviewer,
        &create("a", Some("dc1")),
        Verdict::allow(),
        deadline(),
    )
    .await;
    let message = verdict.status.and_then(|s| s.message).unwrap_or_default();
    assert_eq!(
        message,
        "Machine.vitistack.io \"a\" is forbidden: metadata.annotations[vitistack.io/kubevirt-config]: \
         Forbidden: KubevirtConfig dc1's namespaceSelector does not select namespace \"team-a\": \
         Machines of this namespace cannot use it"
    );
    // Refused before any review.
    assert_eq!(taken(&seen), [CONFIG, NAMESPACE]);
}

/// A Machine on `cluster` whose root disk clones through DataSource `golden`, pinned by hand.
fn cloning(cluster: Option<&str>) -> Request {
    let mut req = create("c", cluster);
    if let Some(object) = req.object.as_mut() {
        object["spec"] =
            json!({"disks": [{"name": "root", "source": {"dataSource": {"name": "golden"}}}]});
        object["metadata"]["annotations"][crate::api::names::CLONE_SOURCES_ANNOTATION] =
            json!(r#"{"root":{"pvc":{"namespace":"team-a","name":"payroll"}}}"#);
    }
    req
}

#[tokio::test]
async fn a_remote_machines_data_source_is_not_read_here_and_a_pin_is_removed() {
    let (reviewer, seen) = fake_api(None).await;
    let unpinned = |req: &Request| {
        let mut object = req.object.clone().unwrap_or_default();
        if let Some(a) = object["metadata"]["annotations"].as_object_mut() {
            a.remove(crate::api::names::CLONE_SOURCES_ANNOTATION);
        }
        Request {
            object: Some(object),
            ..req.clone()
        }
    };
    // Mutate: the hand-written pin removed, nothing read.
    let remote = cloning(Some("dc1"));
    let verdict =
        crate::admission::pins::pin(&reviewer, &remote, Verdict::allow(), deadline()).await;
    let mut patched = remote.object.clone().unwrap_or_default();
    json_patch::patch(&mut patched, &verdict.patch.unwrap_or_default()).expect("patch");
    assert_eq!(patched, unpinned(&remote).object.unwrap_or_default());
    // An update changing nothing the guest sees leaves a stored pin (the reconciler ignores it
    // for a remote Machine): its author is not asked everything again for a label.
    let update = Request {
        operation: "UPDATE".into(),
        old_object: remote.object.clone(),
        ..remote.clone()
    };
    let verdict =
        crate::admission::pins::pin(&reviewer, &update, Verdict::allow(), deadline()).await;
    assert!(verdict.patch.is_none(), "{verdict:?}");
    assert!(taken(&seen).is_empty());
    // Validate: the pin refused if kept; without it, CDI's right for any PVC of the namespace
    // and `use`, and no DataSource read here.
    let verdict = check(&reviewer, &remote, Verdict::allow(), deadline()).await;
    let message = verdict.status.and_then(|s| s.message).unwrap_or_default();
    assert!(message.contains("vitistack.io/clone-sources"), "{message}");
    taken(&seen);
    let verdict = check(&reviewer, &unpinned(&remote), Verdict::allow(), deadline()).await;
    assert!(verdict.allowed, "{verdict:?}");
    // The clone right, the root claim's update and delete, `use`.
    assert_eq!(taken(&seen), [CONFIG, REVIEW, REVIEW, REVIEW, REVIEW]);
    // A local one's is read (and the pin checked against it): the path unchanged.
    let verdict = check(&reviewer, &cloning(None), Verdict::allow(), deadline()).await;
    assert!(!verdict.allowed);
    assert_eq!(
        taken(&seen),
        ["GET /apis/cdi.kubevirt.io/v1beta1/namespaces/team-a/datasources/golden"]
    );
}
