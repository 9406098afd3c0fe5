//! Replays every golden AdmissionReview in `webhooks/` through the real HTTPS server, over one
//! keep-alive connection from a client that verifies the server against the test CA.
//!
//! A case is `NN-<endpoint>-<name>.request.json` (endpoint `mutate`, `validate`,
//! `validateclass`, `validatesnapshot` or `validaterestore`), the full
//! expected answer `NN-...response.json`, and, when the answer carries a patch, a readable
//! `NN-...patched.json` with the decoded patch and the object after applying it. All three are
//! checked: the wire answer exactly (base64 patch included), the decoded patch, and the result.
//!
//! `UPDATE_GOLDEN=1 cargo test --test webhook_golden` rewrites the expected files from the
//! server's answers; review every changed file against SPEC.md before committing.

mod common;

use std::path::{Path, PathBuf};

use base64::Engine;
use common::{HttpsConn, Server, TestCa};
use kubevirt_operator::addresses::held::{Held as AddressHeld, Origin};
use kubevirt_operator::addresses::ip::pack;
use kubevirt_operator::addresses::{LiveAddresses, Pool};
use kubevirt_operator::admission::{
    MACHINE_CLASS_VALIDATE_PATH, MUTATE_PATH, RESTORE_VALIDATE_PATH, SNAPSHOT_VALIDATE_PATH,
    VALIDATE_PATH,
};
use kubevirt_operator::api::MachineClass;
use kubevirt_operator::api::network_configuration::Ipam;
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::machine::FieldPath;
use kubevirt_operator::macs::LiveMacs;
use kubevirt_operator::macs::held::Held;
use serde_json::{Value, json};

struct Case {
    name: String,
    path: &'static str,
    request: Value,
    request_bytes: Vec<u8>,
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("webhooks")
}

fn file(name: &str, suffix: &str) -> PathBuf {
    golden_dir().join(format!("{name}.{suffix}.json"))
}

fn load_cases() -> Vec<Case> {
    let mut names: Vec<String> = std::fs::read_dir(golden_dir())
        .expect("webhooks/ exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".request.json").map(str::to_owned))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let endpoint = name.split('-').nth(1).unwrap_or_default();
            let path = match endpoint {
                "mutate" => MUTATE_PATH,
                "validate" => VALIDATE_PATH,
                "validateclass" => MACHINE_CLASS_VALIDATE_PATH,
                "validatesnapshot" => SNAPSHOT_VALIDATE_PATH,
                "validaterestore" => RESTORE_VALIDATE_PATH,
                other => panic!(
                    "{name}: endpoint must be mutate, validate, validateclass, validatesnapshot \
                     or validaterestore, not {other:?}"
                ),
            };
            let request_bytes = std::fs::read(file(&name, "request")).expect("request file");
            let request = serde_json::from_slice(&request_bytes)
                .unwrap_or_else(|e| panic!("{name}.request.json is not JSON: {e}"));
            Case {
                name,
                path,
                request,
                request_bytes,
            }
        })
        .collect()
}

/// The MachineClasses of the `mcNN` cases (`webhooks/machineclasses.yaml`); every other case is
/// answered with the built-ins alone.
fn class_catalog() -> Catalog {
    let text = std::fs::read_to_string(golden_dir().join(CLASSES_FILE)).expect("classes file");
    let classes: Vec<MachineClass> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("a MachineClass"))
        .collect();
    let (catalog, warnings) = Catalog::default().with_class_objects(&classes);
    assert!(warnings.is_empty(), "{warnings:?}");
    catalog
}

const CLASSES_FILE: &str = "machineclasses.yaml";

fn with_classes(case: &Case) -> bool {
    case.name.starts_with("mc")
}

/// `mac*` cases go to a server that assigns MAC addresses (deterministic draws) and knows one
/// in use: 52:54:00:aa:bb:cc, by Machine `default/db`.
fn with_macs(case: &Case) -> bool {
    case.name.starts_with("mac")
}

/// `ip*` cases go to a server of their own (its MAC draws do not shift the `mac*` cases') that
/// also hands out static addresses: the NetworkConfiguration `default/lab` has ipam
/// (10.20.0.0/24, gateway .1, DNS .2, ranges .100-.101), and `default/db` holds 10.20.0.50 and
/// 10.20.0.100 on it.
fn with_addresses(case: &Case) -> bool {
    case.name.starts_with("ip")
}

fn address_index() -> LiveAddresses {
    let ipam: Ipam = serde_json::from_value(json!({
        "subnet": "10.20.0.0/24", "gateway": "10.20.0.1", "dns": ["10.20.0.2"],
        "ranges": [{"start": "10.20.0.100", "end": "10.20.0.101"}]
    }))
    .expect("ipam");
    let pool = Pool::check(&ipam, &FieldPath::new("spec")).expect("pool");
    let live = LiveAddresses::fixed([("default/lab".to_owned(), pool)]);
    let held = ["10.20.0.50", "10.20.0.100"].map(|a| AddressHeld {
        network: "default/lab".into(),
        address: pack(a.parse().expect("ip")),
        origin: Origin::Spec,
    });
    live.with_shared(|s| s.index.set(0, "default/db", held.to_vec()));
    live
}

fn mac_index() -> LiveMacs {
    let macs = LiveMacs::seeded(20);
    let used = kubevirt_operator::macs::index::mac_number("52:54:00:aa:bb:cc").expect("mac");
    macs.with_index(|i| i.set(0, "default/db".to_owned(), vec![Held::spec(used)]));
    macs
}

fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn write_json(path: &Path, value: &Value) {
    let mut text = serde_json::to_string_pretty(value).expect("serialise");
    text.push('\n');
    std::fs::write(path, text).expect("write golden file");
}

/// The decoded patch and the request object with it applied, or None when there is no patch.
fn patched_view(case: &Case, answer: &Value) -> Result<Option<Value>, String> {
    let Some(encoded) = answer.pointer("/response/patch") else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.as_str().ok_or("patch is not a string")?)
        .map_err(|e| format!("patch is not base64: {e}"))?;
    let ops: Value = serde_json::from_slice(&bytes).map_err(|e| format!("patch JSON: {e}"))?;
    let patch: json_patch::Patch =
        serde_json::from_value(ops.clone()).map_err(|e| format!("not a JSON Patch: {e}"))?;
    let mut object = case.request["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).map_err(|e| format!("patch does not apply: {e}"))?;
    Ok(Some(json!({"patch": ops, "object": object})))
}

/// What every answer must satisfy whatever the case: the request's own apiVersion and uid.
fn check_envelope(case: &Case, answer: &Value) -> Result<(), String> {
    let req = &case.request;
    let expect = |what: &str, got: &Value, want: &Value| {
        (got == want)
            .then_some(())
            .ok_or(format!("{what}: got {got}, want {want}"))
    };
    expect("apiVersion", &answer["apiVersion"], &req["apiVersion"])?;
    expect("kind", &answer["kind"], &json!("AdmissionReview"))?;
    expect("uid", &answer["response"]["uid"], &req["request"]["uid"])?;
    let has_patch = answer["response"].get("patch").is_some();
    let patch_type = answer["response"].get("patchType");
    match (has_patch, patch_type) {
        (true, Some(t)) if t == "JSONPatch" => Ok(()),
        (false, None) => Ok(()),
        _ => Err(format!(
            "patch and patchType must come together: {}",
            answer["response"]
        )),
    }
}

fn compare(what: &str, expected: Option<Value>, actual: Option<Value>) -> Result<(), String> {
    if expected == actual {
        return Ok(());
    }
    let show = |v: &Option<Value>| match v {
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_default(),
        None => "(absent)".to_owned(),
    };
    Err(format!(
        "{what} differs\n--- expected\n{}\n--- actual\n{}",
        show(&expected),
        show(&actual)
    ))
}

#[tokio::test]
async fn golden_cases_replay_over_one_verified_keep_alive_connection() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let ca = TestCa::new("golden test CA");
    let server = Server::start(&ca.issue("golden serving")).await;
    let classes = Server::start_with_catalog(&ca.issue("golden classes"), class_catalog()).await;
    let config = ca.client_config(rustls::DEFAULT_VERSIONS);
    let mut conn = HttpsConn::connect(server.addr, config.clone())
        .await
        .expect("verified TLS connection");
    let mut class_conn = HttpsConn::connect(classes.addr, config.clone())
        .await
        .expect("verified TLS connection");
    let macs = Server::start_with_macs(
        &ca.issue("golden macs"),
        mac_index(),
        LiveAddresses::fixed([]),
    )
    .await;
    let mut mac_conn = HttpsConn::connect(macs.addr, config.clone())
        .await
        .expect("verified TLS connection");
    let addresses =
        Server::start_with_macs(&ca.issue("golden ips"), mac_index(), address_index()).await;
    let mut address_conn = HttpsConn::connect(addresses.addr, config)
        .await
        .expect("verified TLS connection");

    let cases = load_cases();
    assert!(
        cases.len() >= 80,
        "expected the full golden set in webhooks/, found {} cases",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        // Every case over the same connection (one per server): a closed one fails here.
        let conn = if with_classes(case) {
            &mut class_conn
        } else if with_macs(case) {
            &mut mac_conn
        } else if with_addresses(case) {
            &mut address_conn
        } else {
            &mut conn
        };
        let response = conn
            .post_json(case.path, &case.request_bytes)
            .await
            .unwrap_or_else(|e| panic!("{}: keep-alive connection failed: {e}", case.name));
        let outcome = (|| {
            if response.status != 200 {
                return Err(format!(
                    "HTTP {}: {}",
                    response.status,
                    String::from_utf8_lossy(&response.body)
                ));
            }
            let content_type = response.header("content-type").unwrap_or_default();
            if content_type != "application/json" {
                return Err(format!("content-type {content_type:?}"));
            }
            let answer = response.json();
            check_envelope(case, &answer)?;
            let view = patched_view(case, &answer)?;
            if update {
                write_json(&file(&case.name, "response"), &answer);
                let patched = file(&case.name, "patched");
                match &view {
                    Some(v) => write_json(&patched, v),
                    None => {
                        let _ = std::fs::remove_file(patched);
                    }
                }
                return Ok(());
            }
            compare(
                "response",
                read_json(&file(&case.name, "response")),
                Some(answer),
            )?;
            compare(
                "decoded patch and patched object",
                read_json(&file(&case.name, "patched")),
                view,
            )
        })();
        if let Err(e) = outcome {
            failures.push(format!("{}: {e}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

/// Dry-run and v1beta1 cases must be answered exactly like the same request as plain v1 (apart
/// from the apiVersion echoed back): the golden files alone would not show that they agree.
#[tokio::test]
async fn dry_run_and_v1beta1_cases_are_answered_like_their_plain_v1_twin() {
    let ca = TestCa::new("twin test CA");
    let server = Server::start(&ca.issue("twin serving")).await;
    let mut conn = HttpsConn::connect(server.addr, ca.client_config(rustls::DEFAULT_VERSIONS))
        .await
        .expect("connect");
    let twins: Vec<Case> = load_cases()
        .into_iter()
        .filter(|c| c.name.contains("dry-run") || c.name.contains("v1beta1"))
        .collect();
    assert_eq!(
        twins.len(),
        4,
        "dry-run and v1beta1 cases for both webhooks"
    );
    for case in twins {
        let mut plain = case.request.clone();
        plain["apiVersion"] = json!("admission.k8s.io/v1");
        plain["request"]["dryRun"] = json!(false);
        let mut answers = Vec::new();
        for body in [&case.request, &plain] {
            let response = conn
                .post_json(case.path, &serde_json::to_vec(body).expect("JSON"))
                .await
                .expect("answer");
            assert_eq!(response.status, 200, "{}", case.name);
            answers.push(response.json());
        }
        assert_eq!(answers[0]["apiVersion"], case.request["apiVersion"]);
        assert_eq!(
            answers[0]["response"], answers[1]["response"],
            "{}: answered differently from its plain v1 twin",
            case.name
        );
    }
}

#[tokio::test]
async fn every_golden_file_belongs_to_a_case() {
    let cases: Vec<String> = load_cases().into_iter().map(|c| c.name).collect();
    for entry in std::fs::read_dir(golden_dir()).expect("webhooks/") {
        let file_name = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("utf-8");
        if file_name == "README.md" || file_name == CLASSES_FILE {
            continue;
        }
        let case = ["request", "response", "patched"]
            .iter()
            .find_map(|s| file_name.strip_suffix(&format!(".{s}.json")));
        assert!(
            case.is_some_and(|c| cases.iter().any(|n| n == c)),
            "webhooks/{file_name} is not part of any case"
        );
    }
    for name in &cases {
        assert!(
            file(name, "response").exists(),
            "{name} has no response file; run UPDATE_GOLDEN=1 and review it"
        );
    }
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_fails_the_handshake() {
    let ca = TestCa::new("serving CA");
    let server = Server::start(&ca.issue("serving")).await;
    let stranger = TestCa::new("some other CA");

    let err = match HttpsConn::connect(
        server.addr,
        stranger.client_config(rustls::DEFAULT_VERSIONS),
    )
    .await
    {
        Ok(_) => panic!("handshake succeeded with an untrusted server certificate"),
        Err(e) => e,
    };
    let inner = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
        .unwrap_or_else(|| panic!("not a rustls error: {err:?}"));
    assert!(
        matches!(
            inner,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)
        ),
        "{inner:?}"
    );

    let via_reqwest = stranger
        .reqwest_client()
        .post(server.url(VALIDATE_PATH))
        .json(&common::valid_review("u"))
        .send()
        .await;
    assert!(
        via_reqwest.is_err_and(|e| e.is_connect()),
        "reqwest must refuse"
    );

    // The same server does answer a client that trusts its CA: the refusal was about trust.
    common::assert_serves(&ca.reqwest_client(), &server, "trusted").await;
}
