//! A full CA rotation under load, and `certs rotate` / `certs status` on demand.

use crate::support::Fixture;
#[allow(unused_imports)]
use crate::*;
use kubevirt_operator::certs::config::{Lifetimes, RenewBefore};
use kubevirt_operator::certs::store::Store;
use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhooks_keep_working_through_a_full_ca_rotation() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-rotation").await;
    // CA 90 seconds, serving 30 seconds, each renewed at 80%.
    let lifetimes =
        Lifetimes::new(secs(90), secs(30), RenewBefore::Percent(20)).expect("lifetimes");
    let op = Operator::start(&client, &ns, lifetimes).await;
    let store = Store::new(client.clone(), &ns);
    let warmup = wait_for_webhooks(&client, &ns).await;
    let first = observed(&store).await;
    let first_ca = ca_of(&first).expect("a CA was created");

    let started = Instant::now();
    let load = Load::start(&client, &ns);
    // A full rotation: a new CA, serving certificates from it, and the first CA gone from the
    // bundle and the webhook configurations once it expired.
    let waited = until_state(&store, "full CA rotation", secs(200), |o| {
        let bundle = bundle_of(o);
        ca_of(o).is_some_and(|ca| ca != first_ca)
            && !bundle.contains(&first_ca)
            && mutating_bundle(o) == bundle
            && settled(o, &op)
    })
    .await;
    // Keep going past the switch for a couple of serving renewals from the new CA.
    tokio::time::sleep(secs(5)).await;
    let outcomes = load.finish().await;
    let t = tally(&outcomes, started, Instant::now());
    let rotations = op.counter("kubevirt_operator_certificate_rotations_total");
    let reloads = op.counter("kubevirt_operator_certificate_reloads_total");
    eprintln!(
        "full CA rotation: warm-up {warmup:?}; rotation complete after {waited:?}; {} Machine creates, {} failed, {} not mutated; wall {:?}\n{rotations}\n{reloads}",
        t.made,
        t.failed.len(),
        t.unmutated,
        started.elapsed()
    );
    assert!(t.made > 100, "the load kept creating Machines: {}", t.made);
    assert!(
        t.failed.is_empty(),
        "failed admissions during rotation: {:?}",
        t.failed
    );
    assert_eq!(
        t.unmutated, 0,
        "every create went through the mutating webhook"
    );
    assert!(
        rotations.contains("certificate=\"ca\",reason=\"renewal_due\""),
        "{rotations}"
    );
    assert!(
        rotations.contains("certificate=\"serving\",reason=\"ca_rotated\""),
        "{rotations}"
    );
    assert!(
        rotations.contains("certificate=\"serving\",reason=\"renewal_due\""),
        "{rotations}"
    );
}

fn binary() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
}

async fn run_cli(ns: &str, args: &[&str]) -> (bool, String, String) {
    let cp = Fixture::new().with_machine_crds().shared().await;
    let mut cmd = binary();
    cmd.args(["certs"])
        .args(args)
        .env("KUBECONFIG", cp.admin_kubeconfig())
        .env("NAMESPACE", ns)
        .env("LOG_FORMAT", "text");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("join")
        .expect("run kubevirt-operator certs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn certs_rotate_on_demand_and_status() {
    let _turn = TAKE_TURNS.lock().await;
    let (client, ns) = cluster("certs-rotate").await;
    // KubeVirt's defaults: nothing would rotate by itself during this test.
    let lifetimes = Lifetimes::new(secs(168 * 3600), secs(24 * 3600), RenewBefore::Percent(20))
        .expect("lifetimes");
    let op = Operator::start(&client, &ns, lifetimes).await;
    let store = Store::new(client.clone(), &ns);
    wait_for_webhooks(&client, &ns).await;
    let before = observed(&store).await;
    let (ca0, serving0) = (
        ca_of(&before).expect("CA"),
        serving_of(&before).expect("serving"),
    );

    let started = Instant::now();
    let load = Load::start(&client, &ns);

    let (ok, out, err) = run_cli(&ns, &["rotate", "--timeout", "60s"]).await;
    assert!(ok, "certs rotate failed:\n{out}\n{err}");
    assert!(out.contains("new serving certificate issued"), "{out}");
    let mid = observed(&store).await;
    assert_eq!(
        ca_of(&mid).as_ref(),
        Some(&ca0),
        "serving rotation keeps the CA"
    );
    assert_ne!(serving_of(&mid).as_ref(), Some(&serving0));

    let t_ca = Instant::now();
    let (ok, out, err) = run_cli(&ns, &["rotate", "--ca", "--timeout", "60s"]).await;
    let ca_rotation_took = t_ca.elapsed();
    assert!(ok, "certs rotate --ca failed:\n{out}\n{err}");
    assert!(out.contains("new CA issued"), "{out}");
    assert!(out.contains("new serving certificate issued"), "{out}");
    let after = observed(&store).await;
    let ca1 = ca_of(&after).expect("CA");
    assert_ne!(ca1, ca0);
    // The old CA stays trusted until it expires; the serving certificate comes from the new one.
    assert_eq!(bundle_of(&after), vec![ca0.clone(), ca1.clone()]);
    assert_eq!(
        after.serving.ok().and_then(|s| s.issuer_ca.clone()),
        Some(ca1.clone())
    );
    until_state(
        &store,
        "replica serves the new certificate",
        secs(10),
        |o| settled(o, &op),
    )
    .await;
    tokio::time::sleep(secs(2)).await;

    let outcomes = load.finish().await;
    let t = tally(&outcomes, started, Instant::now());
    eprintln!(
        "certs rotate: {} Machine creates, {} failed, {} not mutated; `rotate --ca` took {ca_rotation_took:?}; wall {:?}",
        t.made,
        t.failed.len(),
        t.unmutated,
        started.elapsed()
    );
    assert!(t.made > 20, "{}", t.made);
    assert!(t.failed.is_empty(), "failed admissions: {:?}", t.failed);
    assert_eq!(t.unmutated, 0);

    let (ok, out, err) = run_cli(&ns, &["status"]).await;
    assert!(ok, "certs status failed:\n{out}\n{err}");
    for expected in [
        format!("Namespace: {ns}"),
        format!("Subject:     {}", ca1.subject),
        format!("Serial:      {}", ca0.serial),
        "  [2]".to_owned(),
        format!("SANs:        kubevirt-operator-webhook, kubevirt-operator-webhook.{ns}"),
        "127.0.0.1".to_owned(),
        "MutatingWebhookConfiguration: caBundle = the bundle (2 CA(s))".to_owned(),
        "ValidatingWebhookConfiguration: caBundle = the bundle (2 CA(s))".to_owned(),
        "APIService: not installed".to_owned(),
        "kube-apiserver trusts the serving certificate (checked for 127.0.0.1).".to_owned(),
    ] {
        assert!(out.contains(&expected), "status lacks {expected:?}:\n{out}");
    }

    // No leader in a namespace without certificates: a clear error, not a hang.
    let (ok, _, err) = run_cli("default", &["rotate", "--timeout", "5s"]).await;
    assert!(!ok);
    assert!(err.contains("does not exist"), "{err}");
}
