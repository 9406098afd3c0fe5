//! A bad configuration value stops `kubevirt-operator run` at start-up: non-zero exit, and one
//! error line that names the setting and the value (SPEC.md, "Operations"). Checks that need the
//! cluster (a port taken) run with a kubeconfig for a real control plane; the others fail before
//! any connection, with no kubeconfig at all.

mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

use support::Fixture;

/// Runs `kubevirt-operator` with exactly `env` (plus an empty HOME, so no ~/.kube/config) and
/// `args`; returns the one error line, after checking the exit status.
fn start_up_error(env: &[(&str, &str)], args: &[&str]) -> String {
    let home = tempfile::tempdir().expect("temporary HOME");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"));
    cmd.env_clear()
        .env("HOME", home.path())
        .env("LOG_FORMAT", "text")
        .envs(env.iter().copied())
        .args(args);
    let out = cmd.output().expect("run kubevirt-operator");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let context = format!(
        "{env:?} {args:?}: exit {}\nstdout:\n{}\nstderr:\n{stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!out.status.success(), "start-up succeeded: {context}");
    assert_ne!(out.status.code(), None, "killed by a signal: {context}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.to_lowercase().contains("error"))
        .collect();
    assert_eq!(errors.len(), 1, "exactly one error line: {context}");
    errors[0].to_owned()
}

fn assert_names(line: &str, setting: &str, value: &str) {
    assert!(
        line.contains(setting),
        "the error does not name the setting {setting}: {line}"
    );
    assert!(
        line.contains(value),
        "the error does not name the value {value}: {line}"
    );
}

#[test]
fn unparsable_duration() {
    let line = start_up_error(&[("RECONCILE_INTERVAL", "soon")], &["run"]);
    assert_names(&line, "RECONCILE_INTERVAL", "soon");
}

#[test]
fn bad_drain_period_and_api_timeout() {
    for (setting, value) in [
        ("DRAIN_PERIOD", "a while"),
        ("DRAIN_PERIOD", "-5s"),
        ("KUBE_API_TIMEOUT", "0s"),
    ] {
        let line = start_up_error(&[(setting, value)], &["run"]);
        assert_names(&line, setting, value);
    }
    let files = ["webhook", "--cert-file", "tls.crt", "--key-file", "tls.key"];
    let line = start_up_error(&[("DRAIN_PERIOD", "soon")], &files);
    assert_names(&line, "DRAIN_PERIOD", "soon");
}

#[test]
fn per_client_connection_caps_outside_one_to_the_listener_cap() {
    for (setting, value, range) in [
        ("WEBHOOK_MAX_CONNECTIONS_PER_CLIENT", "0", "1..=256"),
        ("WEBHOOK_MAX_CONNECTIONS_PER_CLIENT", "257", "1..=256"),
        ("METRICS_MAX_CONNECTIONS_PER_CLIENT", "33", "1..=32"),
        ("HEALTH_PROBE_MAX_CONNECTIONS_PER_CLIENT", "many", "many"),
    ] {
        let line = start_up_error(&[(setting, value)], &["run"]);
        assert_names(&line, setting, value);
        assert!(line.contains(range), "{line}");
    }
    let files = ["webhook", "--cert-file", "tls.crt", "--key-file", "tls.key"];
    let line = start_up_error(&[("WEBHOOK_MAX_CONNECTIONS_PER_CLIENT", "0")], &files);
    assert_names(&line, "WEBHOOK_MAX_CONNECTIONS_PER_CLIENT", "0");
}

#[test]
fn lease_shorter_than_ten_seconds() {
    let line = start_up_error(&[("LEADER_ELECTION_LEASE_DURATION", "5s")], &["run"]);
    assert_names(&line, "LEADER_ELECTION_LEASE_DURATION", "5s");
    assert!(line.contains("at least 10s"), "{line}");
}

#[test]
fn qps_zero() {
    let line = start_up_error(&[("KUBE_API_QPS", "0")], &["run"]);
    assert_names(&line, "KUBE_API_QPS", "'0'");
}

#[test]
fn unknown_log_format() {
    let line = start_up_error(&[("LOG_FORMAT", "xml")], &["run"]);
    assert_names(&line, "LOG_FORMAT", "xml");
}

#[test]
fn a_default_eviction_strategy_kubevirt_does_not_know() {
    let line = start_up_error(&[("DEFAULT_EVICTION_STRATEGY", "Migrate")], &["run"]);
    assert_names(&line, "DEFAULT_EVICTION_STRATEGY", "Migrate");
    let line = start_up_error(&[], &["run", "--default-eviction-strategy", "Drain"]);
    assert_names(&line, "--default-eviction-strategy", "Drain");
}

/// Issue 22: the remote clusters' settings.
#[test]
fn kubevirt_config_settings() {
    for (setting, value) in [
        ("KUBEVIRT_CONFIG_PROBE_INTERVAL", "often"),
        ("KUBEVIRT_CONFIG_PROBE_INTERVAL", "0s"),
        ("DEFAULT_KUBEVIRT_CONFIG", "DC_1"),
    ] {
        let line = start_up_error(&[(setting, value)], &["run"]);
        assert_names(&line, setting, value);
    }
    let line = start_up_error(&[], &["run", "--default-kubevirt-config", "dc 1"]);
    assert_names(&line, "--default-kubevirt-config", "dc 1");
}

#[test]
fn a_label_prefix_no_label_key_can_start_with() {
    let line = start_up_error(
        &[("PROPAGATE_LABEL_PREFIXES", "team.example.com/a/b")],
        &["run"],
    );
    assert_names(&line, "PROPAGATE_LABEL_PREFIXES", "team.example.com/a/b");
    let line = start_up_error(&[], &["run", "--propagate-label-prefixes", "ok/,team a"]);
    assert_names(&line, "--propagate-label-prefixes", "team a");
}

#[test]
fn allowed_bridge_that_is_no_interface_name() {
    let line = start_up_error(&[("ALLOWED_BRIDGES", "br0,br/host")], &["run"]);
    assert_names(&line, "ALLOWED_BRIDGES", "br/host");
}

#[test]
fn allowed_vlans_and_machine_types_that_parse_not() {
    for (setting, value, flag) in [
        ("ALLOWED_VLANS", "100-4095", "--allowed-vlans"),
        ("ALLOWED_VLANS", "199-100", "--allowed-vlans"),
        (
            "ALLOWED_MACHINE_TYPES",
            "q35[0-9]",
            "--allowed-machine-types",
        ),
        ("ALLOWED_MACHINE_TYPES", ",", "--allowed-machine-types"),
    ] {
        let line = start_up_error(&[(setting, value)], &["run"]);
        assert_names(&line, setting, value);
        // The same from the flag, and for the other commands that admit.
        for command in ["run", "webhook"] {
            let line = start_up_error(&[], &[command, flag, value]);
            assert_names(&line, flag, value);
        }
    }
    let line = start_up_error(
        &[],
        &["validate", "-f", "-", "--allowed-machine-types", "pc/"],
    );
    assert_names(&line, "--allowed-machine-types", "pc/");
}

#[test]
fn unknown_default_template() {
    let line = start_up_error(&[], &["run", "--default-template", "gigantic"]);
    assert_names(&line, "--default-template", "gigantic");
}

#[test]
fn cert_duration_longer_than_ca_duration() {
    let line = start_up_error(
        &[],
        &["run", "--ca-duration", "24h", "--cert-duration", "48h"],
    );
    assert_names(&line, "--cert-duration", "48h");
    assert_names(&line, "--ca-duration", "24h");
}

#[test]
fn renew_before_longer_than_a_lifetime() {
    let line = start_up_error(
        &[],
        &["run", "--cert-duration", "24h", "--renew-before", "36h"],
    );
    assert_names(&line, "--renew-before", "36h");
}

#[test]
fn cert_file_without_key_file() {
    let line = start_up_error(&[], &["run", "--cert-file", "/nonexistent/tls.crt"]);
    assert_names(&line, "--cert-file", "/nonexistent/tls.crt");
    assert!(line.contains("--key-file"), "{line}");
}

#[test]
fn key_file_without_cert_file() {
    let line = start_up_error(&[("KEY_FILE", "/nonexistent/tls.key")], &["run"]);
    assert_names(&line, "KEY_FILE", "/nonexistent/tls.key");
    assert!(line.contains("--cert-file"), "{line}");
}

#[tokio::test]
async fn metrics_port_in_use() {
    let cp = Fixture::new().shared().await;
    let kubeconfig: PathBuf = cp.admin_kubeconfig().to_owned();
    let held = TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let address = held.local_addr().expect("address").to_string();
    let line = tokio::task::spawn_blocking(move || {
        start_up_error(
            &[],
            &[
                "run",
                "--kubeconfig",
                kubeconfig.to_str().expect("utf-8 path"),
                "--leader-election",
                "false",
                "--listen",
                "127.0.0.1:0",
                "--health-probe-bind-address",
                "127.0.0.1:0",
                "--metrics-bind-address",
                &address,
            ],
        )
    })
    .await
    .expect("join");
    assert_names(
        &line,
        "--metrics-bind-address",
        &held.local_addr().unwrap().to_string(),
    );
    assert!(line.contains("METRICS_BIND_ADDRESS"), "{line}");
}

/// Accepted once, then a panic in the rate limiter (a wait longer than any Duration).
#[test]
fn a_request_rate_near_zero() {
    let line = start_up_error(&[("KUBE_API_QPS", "1e-20")], &["run"]);
    assert_names(&line, "KUBE_API_QPS", "1e-20");
    assert!(line.contains("slowest rate"), "{line}");
}

#[test]
fn a_webhook_service_name_that_is_no_service_name() {
    let line = start_up_error(&[("WEBHOOK_SERVICE_NAME", "Hooks.example")], &["run"]);
    assert_names(&line, "WEBHOOK_SERVICE_NAME", "Hooks.example");
}

#[test]
fn a_watched_namespace_that_is_no_namespace_name() {
    let line = start_up_error(&[("WATCH_NAMESPACES", "team-a,Team_B")], &["run"]);
    assert_names(&line, "WATCH_NAMESPACES", "Team_B");
}

/// The standalone server cannot ask kube-apiserver, and says so where its users look.
#[test]
fn webhook_help_says_it_skips_the_access_check() {
    let out = Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
        .args(["webhook", "--help"])
        .output()
        .expect("run kubevirt-operator webhook --help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(
        help.contains("SKIPS the access check") && help.contains("spec.cloudInit.secretRef"),
        "{help}"
    );
}

#[test]
fn a_restore_pause_image_that_names_no_image() {
    for (env, args, setting) in [
        (
            vec![("RESTORE_PAUSE_IMAGE", "registry.k8s.io/pause 3.10")],
            vec!["run"],
            "RESTORE_PAUSE_IMAGE",
        ),
        (
            vec![],
            vec!["run", "--restore-pause-image", "https://mirror/pause:3.10"],
            "--restore-pause-image",
        ),
    ] {
        let line = start_up_error(&env, &args);
        assert_names(&line, setting, "is not an image reference");
    }
}

/// Issue 33: the restart budget's settings refuse what is no count or duration, naming them.
#[test]
fn restart_budget_settings_that_parse_not() {
    for (setting, value) in [
        ("MAX_CONCURRENT_RESTARTS", "-1"),
        ("MAX_CONCURRENT_RESTARTS", "many"),
        ("MAX_CONCURRENT_RESTARTS_PER_NAMESPACE", "two"),
        ("RESTART_TIMEOUT", "soon"),
    ] {
        let line = start_up_error(&[(setting, value)], &["run"]);
        assert_names(&line, setting, value);
    }
}

/// Issue 33: `ORPHAN_CHECK_INTERVAL` refuses what is no duration, naming itself.
#[test]
fn an_orphan_check_interval_that_parses_not() {
    for value in ["soon", "-1m"] {
        let line = start_up_error(&[("ORPHAN_CHECK_INTERVAL", value)], &["run"]);
        assert_names(&line, "ORPHAN_CHECK_INTERVAL", value);
    }
}
