//! Bad input to the real HTTPS webhook server: every mistake gets a clear answer (an
//! AdmissionReview denial with a reason when there is a uid to answer, otherwise a 4xx with a
//! message), and a concurrent valid request is served meanwhile.

mod common;

use std::time::{Duration, Instant};

use common::{HttpsConn, Server, TestCa, assert_serves, valid_review};
use kubevirt_operator::admission::{MUTATE_PATH, VALIDATE_PATH};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The server's own limits are 10 s for the handshake and for a request once begun; this is the
/// slack a loaded CI machine gets before a slow client counts as not cut off.
const CUT_OFF_WITHIN: Duration = Duration::from_secs(30);

struct Fixture {
    ca: TestCa,
    server: Server,
    client: reqwest::Client,
}

async fn fixture() -> Fixture {
    let ca = TestCa::new("bad input CA");
    let server = Server::start(&ca.issue("bad input serving")).await;
    let client = ca.reqwest_client();
    Fixture { ca, server, client }
}

struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// Sends `body` to `path` while a valid review goes to the server at the same time.
async fn send_alongside_valid(
    f: &Fixture,
    method: reqwest::Method,
    path: &str,
    body: Vec<u8>,
) -> Answer {
    let bad = async {
        let response = f
            .client
            .request(method, f.server.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("the server answers");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.text().await.expect("body");
        Answer {
            status,
            content_type,
            body,
        }
    };
    let (answer, ()) = tokio::join!(bad, assert_serves(&f.client, &f.server, "concurrent"));
    // And still serves after it.
    assert_serves(&f.client, &f.server, "after").await;
    answer
}

/// A 4xx Kubernetes Status (no uid to answer in an AdmissionReview) whose message says `why`.
fn assert_status_4xx(answer: &Answer, code: u16, why: &str) {
    assert_eq!(answer.status, code, "{}", answer.body);
    assert!(
        answer.content_type.starts_with("application/json"),
        "{}",
        answer.content_type
    );
    let status = answer.json();
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["code"], code, "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(why),
        "message {message:?} should say {why:?}"
    );
}

/// An AdmissionReview denial for `uid` whose reason says `why`.
fn assert_denied(answer: &Answer, uid: &str, why: &str) {
    assert_eq!(answer.status, 200, "{}", answer.body);
    let review = answer.json();
    assert_eq!(review["kind"], "AdmissionReview");
    assert_eq!(review["response"]["uid"], uid, "{review}");
    assert_eq!(review["response"]["allowed"], false, "{review}");
    assert!(
        review["response"].get("patch").is_none(),
        "a denial carries no patch"
    );
    let message = review["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains(why),
        "reason {message:?} should say {why:?}"
    );
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON")
}

#[tokio::test]
async fn undecodable_bodies_get_400_with_a_message() {
    let f = fixture().await;
    let mut no_request = valid_review("x");
    no_request.as_object_mut().unwrap().remove("request");
    let mut no_uid = valid_review("x");
    no_uid["request"].as_object_mut().unwrap().remove("uid");
    let mut wrong_version = valid_review("x");
    wrong_version["apiVersion"] = json!("admission.k8s.io/v2");
    let mut wrong_review_kind = valid_review("x");
    wrong_review_kind["kind"] = json!("ConfigMap");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "malformed JSON",
            b"{\"apiVersion\": \"admission.k8s.io/v1\",".to_vec(),
            "not a JSON AdmissionReview",
        ),
        ("empty body", Vec::new(), "not a JSON AdmissionReview"),
        (
            "JSON that is not an object",
            b"[1, 2, 3]".to_vec(),
            "not a JSON AdmissionReview",
        ),
        ("no request", bytes(&no_request), "has no request"),
        ("no uid", bytes(&no_uid), "has no uid"),
        (
            "unknown apiVersion",
            bytes(&wrong_version),
            "admission.k8s.io/v2",
        ),
        (
            "not an AdmissionReview",
            bytes(&wrong_review_kind),
            "ConfigMap",
        ),
    ];
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        for (what, body, why) in &cases {
            let answer = send_alongside_valid(&f, reqwest::Method::POST, path, body.clone()).await;
            assert_status_4xx(&answer, 400, why);
            eprintln!("{path} {what}: {}", answer.body);
        }
    }
}

#[tokio::test]
async fn requests_with_a_uid_are_denied_with_a_reason() {
    let f = fixture().await;
    let mut no_object = valid_review("no-object");
    no_object["request"]
        .as_object_mut()
        .unwrap()
        .remove("object");
    let mut wrong_kind = valid_review("wrong-kind");
    wrong_kind["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    let mut delete = valid_review("delete");
    delete["request"]["operation"] = json!("DELETE");
    delete["request"]["oldObject"] = delete["request"]["object"].take();
    let mut unknown_op = valid_review("unknown-op");
    unknown_op["request"]["operation"] = json!("PATCH");
    let cases = [
        (no_object, "no-object", "has no object"),
        (wrong_kind, "wrong-kind", "Pod is not handled"),
        (delete, "delete", "\"DELETE\" is not handled"),
        (unknown_op, "unknown-op", "\"PATCH\" is not handled"),
    ];
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        for (review, uid, why) in &cases {
            let answer = send_alongside_valid(&f, reqwest::Method::POST, path, bytes(review)).await;
            assert_denied(&answer, uid, why);
        }
    }
}

#[tokio::test]
async fn a_body_over_3_mib_gets_413() {
    let f = fixture().await;
    // A well-formed review whose object carries 3 MiB of cloud-init: only its size is wrong.
    let mut review = valid_review("big");
    review["request"]["object"]["spec"]["cloudInit"] =
        json!({"userData": "x".repeat(3 * 1024 * 1024)});
    let body = bytes(&review);
    assert!(body.len() > 3 * 1024 * 1024);
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        let answer = send_alongside_valid(&f, reqwest::Method::POST, path, body.clone()).await;
        assert_eq!(answer.status, 413, "{}", answer.body);
        assert!(!answer.body.trim().is_empty(), "413 must say why");
    }
    // Just under the limit is read and answered (here: denied, the object is too big for nothing).
    let mut review = valid_review("fits");
    review["request"]["object"]["spec"]["cloudInit"] =
        json!({"userData": "x".repeat(3 * 1024 * 1024 - 2048)});
    // It takes the large lane, which decides at nice 19: while other test binaries saturate
    // the CPU it may answer 503 (saturated, `Retry-After`), which a client retries.
    let mut attempts = 0;
    let answer = loop {
        attempts += 1;
        let answer =
            send_alongside_valid(&f, reqwest::Method::POST, VALIDATE_PATH, bytes(&review)).await;
        if answer.status == 503 && answer.body.contains("saturated") && attempts < 5 {
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            continue;
        }
        break answer;
    };
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["response"]["uid"], "fits");
}

#[tokio::test]
async fn wrong_method_gets_405_and_unknown_path_404_each_with_a_message() {
    let f = fixture().await;
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        for method in [
            reqwest::Method::GET,
            reqwest::Method::PUT,
            reqwest::Method::DELETE,
        ] {
            let body = bytes(&valid_review("m"));
            let answer = send_alongside_valid(&f, method.clone(), path, body).await;
            assert_eq!(answer.status, 405, "{method} {path}");
            assert!(
                !answer.body.trim().is_empty(),
                "{method} {path}: 405 with an empty body; it should say the webhooks take POST"
            );
        }
    }
    let answer = send_alongside_valid(
        &f,
        reqwest::Method::POST,
        "/mutate",
        bytes(&valid_review("p")),
    )
    .await;
    assert_status_4xx(&answer, 404, MUTATE_PATH);
}

#[tokio::test]
async fn a_plain_http_client_on_the_tls_port_gets_a_400_text_reply() {
    let f = fixture().await;
    let plain = async {
        let mut tcp = TcpStream::connect(f.server.addr).await.expect("connect");
        let body = bytes(&valid_review("plain"));
        let head = format!(
            "POST {VALIDATE_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        tcp.write_all(head.as_bytes()).await.expect("write");
        tcp.write_all(&body).await.expect("write");
        let mut reply = Vec::new();
        tokio::time::timeout(CUT_OFF_WITHIN, tcp.read_to_end(&mut reply))
            .await
            .expect("the server answers and closes")
            .expect("read");
        String::from_utf8(reply).expect("a text reply")
    };
    let (reply, ()) = tokio::join!(plain, assert_serves(&f.client, &f.server, "beside plain"));
    assert!(reply.starts_with("HTTP/1.0 400"), "{reply:?}");
    assert!(reply.contains("Content-Type: text/plain"), "{reply:?}");
    assert!(
        reply.contains("HTTP request to an HTTPS server"),
        "{reply:?}"
    );
    assert_serves(&f.client, &f.server, "after plain").await;
}

/// Clients that connect and then stall must be cut off by the server's own timeouts, and must not
/// hold up anyone else. All three stall at once, so the test waits for the timeouts only once.
/// Connects, waits `silent`, sends the first bytes of a TLS record and stalls; how long after
/// connecting the server closed the connection.
async fn stalled_handshake(addr: std::net::SocketAddr, silent: Duration) -> Duration {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let start = Instant::now();
    tokio::time::sleep(silent).await;
    tcp.write_all(&[0x16, 0x03, 0x01, 0x00])
        .await
        .expect("write");
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(CUT_OFF_WITHIN, tcp.read_to_end(&mut sink))
        .await
        .expect("a stalled TLS handshake must be closed by the server");
    start.elapsed()
}

#[tokio::test]
async fn stalled_clients_are_cut_off_while_others_are_served() {
    let f = fixture().await;

    // TLS done, then headers that never end.
    let slow_headers = async {
        let mut conn =
            HttpsConn::connect(f.server.addr, f.ca.client_config(rustls::DEFAULT_VERSIONS))
                .await
                .expect("TLS handshake");
        let start = Instant::now();
        conn.write_raw(
            format!("POST {VALIDATE_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").as_bytes(),
        )
        .await
        .expect("partial headers");
        tokio::time::timeout(CUT_OFF_WITHIN, conn.read_until_closed())
            .await
            .expect("connection with unfinished headers must be closed by the server");
        start.elapsed()
    };
    // The first bytes of a TLS record, then nothing: a handshake that never finishes.
    let slow_handshake = async { stalled_handshake(f.server.addr, Duration::ZERO).await };
    // Connects and never says a word.
    let silent = async {
        let mut tcp = TcpStream::connect(f.server.addr).await.expect("connect");
        let start = Instant::now();
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(CUT_OFF_WITHIN, tcp.read_to_end(&mut sink))
            .await
            .expect("a silent connection must be closed by the server");
        start.elapsed()
    };
    // Silent for 6 s, then the start of a handshake that never finishes: the 10 s handshake
    // deadline counts from the connection, not from the first byte (else 16 s).
    let late_then_stalled =
        async { stalled_handshake(f.server.addr, Duration::from_secs(6)).await };
    // Valid requests keep being answered while the four above hang.
    let meanwhile = async {
        let mut served = 0;
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            assert_serves(&f.client, &f.server, &format!("meanwhile-{served}")).await;
            served += 1;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        served
    };
    let (headers, handshake, silence, late, served) = tokio::join!(
        slow_headers,
        slow_handshake,
        silent,
        late_then_stalled,
        meanwhile
    );
    eprintln!(
        "cut off after: headers {headers:?}, handshake {handshake:?}, silent {silence:?}, late then stalled {late:?}; served {served} meanwhile"
    );
    // HANDSHAKE_TIMEOUT (10 s) from the connection, with room for a loaded machine.
    for (what, took) in [("stalled", handshake), ("silent", silence), ("late", late)] {
        assert!(
            took >= Duration::from_secs(9) && took < Duration::from_millis(12_500),
            "{what} handshake cut after {took:?}"
        );
    }
    assert!(
        served >= 10,
        "only {served} valid requests were served while clients stalled"
    );
    assert_serves(&f.client, &f.server, "after the stalls").await;
}
