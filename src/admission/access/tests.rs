use serde_json::{Value, json};

use super::*;

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(4)
}

/// A reviewer whose API server is at `port` on loopback.
fn reviewer_at(port: u16) -> AccessReviewer {
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().expect("url"));
    AccessReviewer::new(kube::Client::try_from(config).expect("client"))
}

/// A reviewer whose API server refuses connections (a port bound, then freed).
fn unreachable_reviewer() -> AccessReviewer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    reviewer_at(port)
}

fn secret_ref_request() -> Request {
    Request {
        uid: "u".into(),
        operation: "CREATE".into(),
        namespace: Some("team-a".into()),
        object: Some(json!({"spec": {"cloudInit": {"secretRef": {"name": "boot"}}}})),
        ..Default::default()
    }
}

/// An API server that takes the connection and never answers: the check ends at the
/// admission's deadline, denying, instead of outliving the webhook's timeout.
#[tokio::test]
async fn a_silent_api_server_denies_at_the_deadline() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = silent.local_addr().expect("address").port();
    let reviewer = reviewer_at(port);
    let budget = std::time::Duration::from_millis(300);
    let started = tokio::time::Instant::now();
    let verdict = check(
        &reviewer,
        &secret_ref_request(),
        Verdict::allow(),
        started + budget,
    )
    .await;
    let took = started.elapsed();
    assert!(!verdict.allowed);
    assert!(took >= budget && took < budget * 5, "{took:?}");
    drop(silent);
}

/// An API server that refuses connections: the check cannot be made, so the Machine is
/// refused with a message saying why (fail closed), not admitted.
#[tokio::test]
async fn an_unreachable_api_server_denies() {
    let reviewer = unreachable_reviewer();
    let req = secret_ref_request();
    let verdict = check(&reviewer, &req, Verdict::allow(), soon()).await;
    assert!(!verdict.allowed);
    let message = verdict.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message
            .starts_with("cannot check whether the author may use spec.cloudInit.secretRef.name"),
        "{message}"
    );
    // Nothing needed: no call, the verdict stands.
    let plain = Request {
        object: Some(json!({"spec": {}})),
        ..req.clone()
    };
    assert!(
        check(&reviewer, &plain, Verdict::allow(), soon())
            .await
            .allowed
    );
    // A denial stays a denial without asking.
    let denied = Verdict::deny(Status::default());
    assert_eq!(check(&reviewer, &req, denied.clone(), soon()).await, denied);
}

/// Whether a disk's claim exists is read before anything is asked: when it cannot be read,
/// a Machine with disks is refused (fail closed), naming the disks and the claim.
#[tokio::test]
async fn an_unreadable_claim_denies_a_machine_with_disks() {
    let reviewer = unreachable_reviewer();
    let req = Request {
        name: "db".into(),
        object: Some(json!({"metadata": {"name": "db"},
            "spec": {"disks": [{"name": "data", "size": "1Gi"}]}})),
        ..secret_ref_request()
    };
    let verdict = check(&reviewer, &req, Verdict::allow(), soon()).await;
    assert!(!verdict.allowed);
    let status = verdict.status.unwrap_or_default();
    assert_eq!(status.code, Some(500));
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with(
            r#"cannot check whether the author may use spec.disks[0] (cannot read persistentvolumeclaims "db-data" in namespace "team-a": "#
        ),
        "{message}"
    );
    assert!(
        message.ends_with("refused until the check can be made"),
        "{message}"
    );
}

/// 17 distinct checks (17 CD-ROMs with credentials): refused at once, naming the limit,
/// without a single call (the API server here refuses connections, which would be a 500).
#[tokio::test]
async fn more_access_checks_than_the_limit_are_refused_unasked() {
    let reviewer = unreachable_reviewer();
    let cdroms = |n: usize| -> Vec<serde_json::Value> {
        (0..n)
            .map(|i| {
                json!({"name": format!("c{i}"), "source": {"http": {
                "url": "https://a/b.iso", "secretRef": {"name": format!("creds-{i}")}}}})
            })
            .collect()
    };
    let req = |n: usize| Request {
        name: "many".into(),
        object: Some(json!({"metadata": {"name": "many"}, "spec": {"cdroms": cdroms(n)}})),
        ..secret_ref_request()
    };
    let verdict = check(
        &reviewer,
        &req(MAX_ACCESS_CHECKS + 1),
        Verdict::allow(),
        soon(),
    )
    .await;
    let status = verdict.status.unwrap_or_default();
    assert_eq!(status.code, Some(403), "{status:?}");
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("it needs 17 distinct access checks")
            && message.contains("at most 16 are made for one request"),
        "{message}"
    );
    // At the limit, the checks are asked (and fail closed here: no API server).
    let at = check(&reviewer, &req(MAX_ACCESS_CHECKS), Verdict::allow(), soon()).await;
    assert_eq!(at.status.and_then(|s| s.code), Some(500));
}

/// Issue 25: any NetworkConfiguration author got an attachment, a right RBAC gives apart.
#[test]
fn a_network_configuration_needs_create_on_attachments_when_its_spec_changes() {
    let nc = |bridge: &str| json!({"metadata": {"name": "lan"}, "spec": {"bridge": bridge}});
    let req = |op: &str, old: Option<Value>| Request {
        uid: "u".into(),
        name: "lan".into(),
        operation: op.into(),
        namespace: Some("team-a".into()),
        object: Some(nc("br0")),
        old_object: old,
        ..Default::default()
    };
    let needed = network_needs(&req("CREATE", None));
    assert_eq!(
        needed
            .iter()
            .map(|p| (
                p.field.as_str(),
                p.verb.as_str(),
                p.resource.as_str(),
                p.namespace.as_str()
            ))
            .collect::<Vec<_>>(),
        [("spec", "create", "network-attachment-definitions", "team-a")]
    );
    assert_eq!(network_needs(&req("UPDATE", Some(nc("br1")))).len(), 1);
    assert!(network_needs(&req("UPDATE", Some(nc("br0")))).is_empty());
    assert!(network_needs(&req("DELETE", None)).is_empty());
    let s = forbidden("NetworkConfiguration", "lan", "bob", &needed);
    assert_eq!(
        s.message.as_deref(),
        Some(
            r#"NetworkConfiguration.vitistack.io "lan" is forbidden: spec: Forbidden: user "bob" cannot create network-attachment-definitions.k8s.cni.cncf.io in namespace "team-a""#
        )
    );
}

#[test]
fn forbidden_message_names_field_verb_resource_and_namespace() {
    let p = Permission {
        field: "spec.cloudInit.secretRef.name".into(),
        verb: "get".into(),
        group: String::new(),
        resource: "secrets".into(),
        subresource: String::new(),
        namespace: "team-a".into(),
        name: "db".into(),
        adopted: false,
    };
    let s = forbidden("Machine", "vm", "bob", &[p]);
    assert_eq!(s.code, Some(403));
    assert_eq!(
        s.message.as_deref(),
        Some(
            r#"Machine.vitistack.io "vm" is forbidden: spec.cloudInit.secretRef.name: Forbidden: user "bob" cannot get secrets in namespace "team-a""#
        )
    );
}

#[test]
fn on_a_guest_write_the_pins_must_be_what_the_data_sources_point_to_now() {
    use crate::access::data_sources::Target;
    let spec = json!({"disks": [{"name": "root", "source": {"dataSource": {"name": "d"}}}]});
    let resolved = BTreeMap::from([(
        ("team".to_owned(), "d".to_owned()),
        Target::Pvc {
            namespace: "os".into(),
            name: "debian".into(),
        },
    )]);
    let object = |pins: Option<&str>| {
        let mut o = json!({"metadata": {"name": "m"}, "spec": spec});
        if let Some(p) = pins {
            o["metadata"]["annotations"] = json!({CLONE_SOURCES_ANNOTATION: p});
        }
        o
    };
    let none = BTreeSet::new();
    let verdict = |old: Option<&Value>, new: &Value| {
        mispinned(
            "m",
            &Change {
                namespace: "team",
                old,
                new,
                existing_claims: &none,
                data_sources: &resolved,
            },
        )
        .map(|s| s.message.unwrap_or_default())
    };
    let right = object(Some(
        r#"{"root":{"pvc":{"namespace":"os","name":"debian"}}}"#,
    ));
    assert_eq!(verdict(None, &right), None);
    for wrong in [
        object(None),
        object(Some(
            r#"{"root":{"pvc":{"namespace":"hr","name":"payroll"}}}"#,
        )),
        object(Some("garbled")),
    ] {
        let message = verdict(None, &wrong).expect("refused");
        assert!(
            message.contains("metadata.annotations[vitistack.io/clone-sources]")
                && message.contains(r#"{"root":{"pvc":{"namespace":"os","name":"debian"}}}"#),
            "{message}"
        );
    }
    // Nothing the guest sees changes (the stored pins kept): not looked at.
    let stale = object(Some(r#"{"root":{"pvc":{"namespace":"os","name":"old"}}}"#));
    assert_eq!(verdict(Some(&stale), &stale), None);
}
