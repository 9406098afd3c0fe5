//! A stream of hostile AdmissionReviews sent straight to the operator's validating webhook, as
//! any pod in the cluster could send them (no client certificate required), from another local
//! address than kube-apiserver's so the per-client connection cap does not decide the outcome.
//! Every 20 ms one review, on at most 48 connections (under the per-client cap of 64):
//! alternately one needing 255 distinct access checks, and one at the 16-check limit under a
//! never-seen user and never-seen Secret names (no verdict cached, a turn of its own per user).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Client;
use kube::api::Api;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use kubevirt_operator::admission::VALIDATE_PATH;

const EVERY: Duration = Duration::from_millis(20);

/// The stream, running until [`Stream::stop`].
pub struct Stream {
    stop: Arc<AtomicBool>,
    sender: tokio::task::JoinHandle<Answered>,
}

/// How the webhook answered the stream.
#[derive(Debug, Default)]
pub struct Answered {
    pub sent: usize,
    /// HTTP 200 with an AdmissionReview answer.
    pub answered: usize,
    /// Over-limit reviews denied naming the limit.
    pub over_limit_refused: usize,
    pub over_limit_sent: usize,
    /// At-limit reviews denied (their users hold no right).
    pub at_limit_denied: usize,
    /// The first answer that was not as expected.
    pub unexpected: Option<String>,
}

impl Answered {
    /// The stream really ran (a review every 20 ms for over a second), every review got an
    /// answer, and every over-limit one was refused naming the limit.
    pub fn assert_streamed(&self) {
        assert!(self.sent >= 50, "too short a stream: {self:?}");
        assert_eq!(
            self.answered, self.sent,
            "unanswered hostile reviews: {self:?}"
        );
        assert_eq!(
            self.over_limit_refused, self.over_limit_sent,
            "over-limit reviews not refused at once: {self:?}"
        );
        assert_eq!(
            self.at_limit_denied,
            self.sent - self.over_limit_sent,
            "an at-limit review by a user with no rights was allowed: {self:?}"
        );
    }
}

impl Stream {
    /// Starts sending to the validating webhook the operator registered (URL and CA bundle read
    /// from its ValidatingWebhookConfiguration).
    pub async fn start(admin: &Client, namespace: &str) -> Stream {
        let (url, ca) = validating_webhook(admin).await;
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA bundle"))
            .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        let stop = Arc::new(AtomicBool::new(false));
        let namespace = namespace.to_owned();
        let sender = tokio::spawn(send(http, url, namespace, stop.clone()));
        Stream { stop, sender }
    }

    /// Stops sending and waits for every answer.
    pub async fn stop(self) -> Answered {
        self.stop.store(true, Ordering::SeqCst);
        self.sender.await.expect("stream task")
    }
}

async fn send(
    http: reqwest::Client,
    url: String,
    namespace: String,
    stop: Arc<AtomicBool>,
) -> Answered {
    let counts = Arc::new([(); 3].map(|()| AtomicUsize::new(0)));
    let unexpected = Arc::new(std::sync::Mutex::new(None));
    let connections = Arc::new(tokio::sync::Semaphore::new(48));
    let (mut sent, mut over_limit_sent) = (0, 0);
    let mut tasks = JoinSet::new();
    let mut tick = tokio::time::interval(EVERY);
    while !stop.load(Ordering::SeqCst) {
        tick.tick().await;
        let over_limit = sent % 2 == 0;
        let body = review(sent, &namespace, if over_limit { 255 } else { 16 });
        sent += 1;
        over_limit_sent += usize::from(over_limit);
        let (http, url, counts) = (http.clone(), url.clone(), counts.clone());
        let unexpected = unexpected.clone();
        let Ok(connection) = connections.clone().acquire_owned().await else {
            break;
        };
        tasks.spawn(async move {
            let _connection = connection;
            let answer = match http.post(&url).json(&body).send().await {
                Ok(r) if r.status() == 200 => r.json::<Value>().await.map_err(|e| e.to_string()),
                Ok(r) => Err(format!("HTTP {}", r.status())),
                Err(e) => Err(format!("{e:?}")),
            };
            let answer = match answer {
                Ok(answer) => answer,
                Err(e) => {
                    unexpected.lock().expect("lock").get_or_insert(e);
                    return;
                }
            };
            counts[0].fetch_add(1, Ordering::SeqCst);
            let allowed = answer["response"]["allowed"].as_bool();
            let message = answer["response"]["status"]["message"]
                .as_str()
                .unwrap_or("");
            match (over_limit, allowed) {
                (true, Some(false)) if message.contains("at most 16 are made") => {
                    counts[1].fetch_add(1, Ordering::SeqCst);
                }
                (false, Some(false)) => {
                    counts[2].fetch_add(1, Ordering::SeqCst);
                }
                _ => {
                    let answer = answer["response"].to_string();
                    unexpected.lock().expect("lock").get_or_insert(answer);
                }
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        if let Err(e) = joined {
            unexpected
                .lock()
                .expect("lock")
                .get_or_insert(e.to_string());
        }
    }
    Answered {
        sent,
        answered: counts[0].load(Ordering::SeqCst),
        over_limit_refused: counts[1].load(Ordering::SeqCst),
        over_limit_sent,
        at_limit_denied: counts[2].load(Ordering::SeqCst),
        unexpected: unexpected.lock().expect("lock").take(),
    }
}

/// A CREATE by `mallory-<n>` of a Machine whose `checks` disks each import with a Secret of a
/// name never used before: one distinct access check per disk.
fn review(n: usize, namespace: &str, checks: usize) -> Value {
    let disks: Vec<Value> = (0..checks)
        .map(|i| {
            json!({"name": format!("d{i}"), "size": "1Gi", "source": {"http": {
                "url": "https://example.com/d.qcow2",
                "secretRef": {"name": format!("stolen-{n}-{i}")}}}})
        })
        .collect();
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("hostile-{n}"),
            "kind": {"group": "vitistack.io", "version": "v1alpha1", "kind": "Machine"},
            "resource": {"group": "vitistack.io", "version": "v1alpha1", "resource": "machines"},
            "name": format!("hostile-{n}"), "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": format!("mallory-{n}"), "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
                "metadata": {"name": format!("hostile-{n}"), "namespace": namespace},
                "spec": {"template": "small", "disks": disks}
            },
            "oldObject": null, "dryRun": false
        }
    })
}

/// The validating webhook's URL and CA bundle, as the operator registered them.
async fn validating_webhook(admin: &Client) -> (String, Vec<u8>) {
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    for config in configs.list(&Default::default()).await.expect("list").items {
        for webhook in config.webhooks.unwrap_or_default() {
            let client = webhook.client_config;
            if let (Some(url), Some(ca)) = (client.url, client.ca_bundle)
                && url.ends_with(VALIDATE_PATH)
            {
                return (url, ca.0);
            }
        }
    }
    panic!("no validating webhook registered at a URL");
}
