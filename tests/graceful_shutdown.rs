//! A rollout as kube-apiserver sees it: on SIGTERM `/readyz` fails at once, the webhook server
//! keeps accepting and answering for the drain period (`--drain-period`), then stops accepting,
//! finishes the requests in flight and exits cleanly.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kubevirt_operator::admission::MUTATE_PATH;

const DRAIN: Duration = Duration::from_secs(3);

async fn readyz(client: &reqwest::Client, probes: std::net::SocketAddr) -> Option<u16> {
    let url = format!("http://{probes}/readyz");
    client
        .get(url)
        .send()
        .await
        .ok()
        .map(|r| r.status().as_u16())
}

#[tokio::test]
async fn an_in_flight_admission_call_is_answered_after_sigterm() {
    let ca = common::TestCa::new("shutdown CA");
    let mut webhook = common::WebhookProcess::start_with(&ca, &["--drain-period", "2s"]);
    let addr = webhook.addr;

    // Headers and half of the body, then SIGTERM.
    let body = serde_json::to_vec(&common::valid_review("in-flight")).unwrap();
    let mut conn = common::HttpsConn::connect(addr, ca.client_config(&[&rustls::version::TLS13]))
        .await
        .expect("TLS connection");
    let head = format!(
        "POST {MUTATE_PATH} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_raw(head.as_bytes()).await.expect("headers");
    let (first, rest) = body.split_at(body.len() / 2);
    conn.write_raw(first).await.expect("first half");
    tokio::time::sleep(Duration::from_millis(200)).await;
    webhook.sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Draining: new connections are still accepted and answered.
    let during = ca
        .reqwest_client()
        .post(format!("https://{addr}{MUTATE_PATH}"))
        .json(&common::valid_review("during-drain"))
        .send()
        .await
        .expect("answered while draining");
    assert_eq!(during.status(), 200);
    assert_eq!(
        during.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..]),
        "answers while draining close their connection"
    );

    // After the drain, new connections are refused (waited for: a busy machine may close the
    // listener late, never early); the process waits for the request in flight.
    let drained = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            Instant::now() < drained,
            "the listener must be closed after the drain"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

/// Clients keep sending admissions, over kept-alive connections and over fresh ones, while the
/// process gets SIGTERM: none fails during the drain period, `/readyz` fails at once, and the
/// process then exits cleanly.
#[tokio::test]
async fn sigterm_during_a_stream_of_admissions_fails_none_within_the_drain_period() {
    let ca = common::TestCa::new("drain CA");
    let mut webhook = common::WebhookProcess::start_with(&ca, &["--drain-period", "3s"]);
    let (addr, probes) = (webhook.addr, webhook.probes);
    let plain = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    assert_eq!(readyz(&plain, probes).await, Some(200));

    let answered = Arc::new(AtomicUsize::new(0));
    let answered_after_sigterm = Arc::new(AtomicUsize::new(0));
    let sigterm_at = Arc::new(std::sync::OnceLock::<Instant>::new());
    let mut senders = Vec::new();
    for sender in 0..6 {
        // Half reuse their connections, half open a new one per request.
        let client = if sender % 2 == 0 {
            ca.reqwest_client()
        } else {
            reqwest::Client::builder()
                .use_rustls_tls()
                .tls_built_in_root_certs(false)
                .add_root_certificate(
                    reqwest::Certificate::from_pem(ca.cert_pem().as_bytes()).expect("CA PEM"),
                )
                .pool_max_idle_per_host(0)
                .http1_only()
                .no_proxy()
                .build()
                .expect("client")
        };
        let (answered, after, sigterm_at) = (
            answered.clone(),
            answered_after_sigterm.clone(),
            sigterm_at.clone(),
        );
        senders.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut n = 0;
            loop {
                // Stop a little before the drain ends: after it, refusals are correct.
                if sigterm_at
                    .get()
                    .is_some_and(|t| t.elapsed() > DRAIN - Duration::from_millis(500))
                {
                    return failures;
                }
                n += 1;
                let uid = format!("s{sender}-{n}");
                let sent = client
                    .post(format!("https://{addr}{MUTATE_PATH}"))
                    .json(&common::valid_review(&uid))
                    .send()
                    .await;
                match sent {
                    Ok(r) if r.status() == 200 => {
                        answered.fetch_add(1, Ordering::Relaxed);
                        if sigterm_at.get().is_some() {
                            after.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(r) => failures.push(format!("{uid}: status {}", r.status())),
                    Err(e) => failures.push(format!("{uid}: {e:?}")),
                }
            }
        }));
    }

    tokio::time::sleep(Duration::from_secs(1)).await;
    webhook.sigterm();
    let _ = sigterm_at.set(Instant::now());
    let not_ready_after = {
        let start = Instant::now();
        while readyz(&plain, probes).await == Some(200) {
            assert!(start.elapsed() < Duration::from_secs(1), "/readyz still ok");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        start.elapsed()
    };
    assert_eq!(readyz(&plain, probes).await, Some(500));

    let mut failures = Vec::new();
    for sender in senders {
        failures.extend(sender.await.expect("sender"));
    }
    let after = answered_after_sigterm.load(Ordering::Relaxed);
    eprintln!(
        "{} admissions answered, {after} after SIGTERM; /readyz failed {not_ready_after:?} after it",
        answered.load(Ordering::Relaxed)
    );
    assert!(
        failures.is_empty(),
        "failed during the drain: {failures:#?}"
    );
    assert!(after > 0, "admissions went on after SIGTERM");

    let status = webhook.wait_for_exit("did not exit after the drain");
    assert!(status.success(), "{status}");
}
