//! `kubevirt-operator webhook` as a child process.

use std::net::SocketAddr;

use super::{ServingPair, TestCa};

/// `kubevirt-operator webhook` as a child process serving a pair issued by `ca`, on an ephemeral
/// port that it logs (JSON) and that is read back here.
pub struct WebhookProcess {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    /// Where `/healthz` and `/readyz` answer (plain HTTP).
    pub probes: SocketAddr,
    /// Where `/metrics` answers (plain HTTP).
    pub metrics: SocketAddr,
    _dir: tempfile::TempDir,
}

impl WebhookProcess {
    pub fn start(ca: &TestCa) -> WebhookProcess {
        Self::start_with(ca, &[])
    }

    /// With `extra` arguments after the defaults (e.g. `--drain-period 2s`).
    pub fn start_with(ca: &TestCa, extra: &[&str]) -> WebhookProcess {
        Self::start_serving(&ca.issue("webhook process"), extra)
    }

    /// Serving `pair`, with `extra` arguments after the defaults.
    pub fn start_serving(pair: &ServingPair, extra: &[&str]) -> WebhookProcess {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir().expect("temp dir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, &pair.cert_pem).expect("write cert");
        std::fs::write(&key, &pair.key_pem).expect("write key");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
            .args(["webhook", "--cert-file"])
            .arg(&cert)
            .arg("--key-file")
            .arg(&key)
            .args(["--listen", "127.0.0.1:0"])
            .args(["--metrics-bind-address", "127.0.0.1:0"])
            .args(["--health-probe-bind-address", "127.0.0.1:0"])
            .args(extra)
            .env("LOG_FORMAT", "json")
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("webhook starts");
        let stderr = child.stderr.take().expect("stderr");
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (probes_tx, probes_rx) = std::sync::mpsc::channel();
        let (metrics_tx, metrics_rx) = std::sync::mpsc::channel();
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let Ok(log) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                let field = |name: &str| log[name].as_str().unwrap_or_default().to_owned();
                if log["message"] == "serving admission webhooks over HTTPS" {
                    let _ = addr_tx.send(field("address"));
                } else if log["message"] == "serving metrics and probes over HTTP" {
                    let _ = probes_tx.send(field("probes"));
                    let _ = metrics_tx.send(field("metrics"));
                }
            }
        });
        let logged = |rx: std::sync::mpsc::Receiver<String>, what: &str| -> SocketAddr {
            rx.recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("the webhook logs the address of its {what}"))
                .parse()
                .expect("a socket address")
        };
        WebhookProcess {
            child,
            addr: logged(addr_rx, "webhooks"),
            probes: logged(probes_rx, "probes"),
            metrics: logged(metrics_rx, "metrics"),
            _dir: dir,
        }
    }

    pub fn sigterm(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// Waits up to 30 s for the process to exit; panics with `what` if it does not.
    pub fn wait_for_exit(&mut self, what: &str) -> std::process::ExitStatus {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "{what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
