//! SIGTERM while an admission request is in flight: the server stops accepting, finishes the
//! request it is reading, answers it, and only then exits.

mod common;

use std::time::Duration;

#[tokio::test]
async fn an_in_flight_admission_call_is_answered_after_sigterm() {
    let ca = common::TestCa::new("shutdown CA");
    let mut webhook = common::WebhookProcess::start(&ca);
    let addr = webhook.addr;

    // Headers and half of the body, then SIGTERM.
    let body = serde_json::to_vec(&common::valid_review("in-flight")).unwrap();
    let mut conn = common::HttpsConn::connect(addr, ca.client_config(&[&rustls::version::TLS13]))
        .await
        .expect("TLS connection");
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        kubevirt_operator::admission::MUTATE_PATH,
        body.len()
    );
    conn.write_raw(head.as_bytes()).await.expect("headers");
    let (first, rest) = body.split_at(body.len() / 2);
    conn.write_raw(first).await.expect("first half");
    tokio::time::sleep(Duration::from_millis(200)).await;
    webhook.sigterm();
    tokio::time::sleep(Duration::from_millis(500)).await;

    // New connections are refused once shutdown has begun.
    let refused = tokio::net::TcpStream::connect(addr).await;
    assert!(
        refused.is_err(),
        "the listener must be closed after SIGTERM"
    );
    assert!(
        webhook.child.try_wait().expect("wait").is_none(),
        "must not exit with a request in flight"
    );

    conn.write_raw(rest).await.expect("second half");
    let answer = String::from_utf8_lossy(&conn.read_until_closed().await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""uid":"in-flight""#), "{answer}");
    assert!(answer.contains(r#""allowed":true"#), "{answer}");

    let status = webhook.wait_for_exit("did not exit after the last answer");
    assert!(status.success(), "{status}");
}
