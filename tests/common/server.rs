//! The real webhook server in-process, on 127.0.0.1:0, and a check that it still serves.

use std::net::SocketAddr;
use std::sync::Arc;

use kubevirt_operator::admission::{Admission, routes};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::macs::LiveMacs;
use kubevirt_operator::tls::{CertSlot, install_crypto_provider, server};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::{LOCALHOST, ServingPair};

/// The real webhook server (built-in templates, default medium) on an ephemeral port.
pub struct Server {
    pub addr: SocketAddr,
    pub slot: Arc<CertSlot>,
    // Dropping the sender starts the server's graceful shutdown.
    _shutdown: oneshot::Sender<()>,
}

impl Server {
    pub async fn start(pair: &ServingPair) -> Server {
        install_crypto_provider();
        let slot = CertSlot::new();
        slot.store(pair.certified_key());
        Self::start_with_slot(slot).await
    }

    /// The server with `catalog` (e.g. MachineClasses besides the built-ins).
    pub async fn start_with_catalog(pair: &ServingPair, catalog: Catalog) -> Server {
        install_crypto_provider();
        let slot = CertSlot::new();
        slot.store(pair.certified_key());
        Self::start_with(slot, catalog).await
    }

    pub async fn start_with_slot(slot: Arc<CertSlot>) -> Server {
        Self::start_with(slot, Catalog::default()).await
    }

    /// The server giving interfaces MAC addresses from `macs` and refusing those it holds.
    pub async fn start_with_macs(
        pair: &ServingPair,
        macs: LiveMacs,
        addresses: kubevirt_operator::addresses::LiveAddresses,
    ) -> Server {
        install_crypto_provider();
        let slot = CertSlot::new();
        slot.store(pair.certified_key());
        let admission = Admission::new(Catalog::default())
            .expect("schema compiles")
            .with_macs(macs)
            .with_addresses(addresses);
        Self::start_admission(slot, admission).await
    }

    async fn start_with(slot: Arc<CertSlot>, catalog: Catalog) -> Server {
        let admission = Admission::new(catalog).expect("schema compiles");
        Self::start_admission(slot, admission).await
    }

    async fn start_admission(slot: Arc<CertSlot>, admission: Admission) -> Server {
        install_crypto_provider();
        let admission = Arc::new(admission);
        let listener = TcpListener::bind((LOCALHOST, 0)).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel::<()>();
        let serving_slot = slot.clone();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            server::serve(listener, serving_slot, routes::router(admission), shutdown)
                .await
                .expect("server runs");
        });
        Server {
            addr,
            slot,
            _shutdown: tx,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

/// A minimal valid CREATE review, for "the server still serves" checks.
pub fn valid_review(uid: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "vitistack.io", "version": "v1alpha1", "kind": "Machine"},
            "resource": {"group": "vitistack.io", "version": "v1alpha1", "resource": "machines"},
            "name": "vm",
            "namespace": "default",
            "operation": "CREATE",
            "object": {
                "apiVersion": "vitistack.io/v1alpha1",
                "kind": "Machine",
                "metadata": {"name": "vm", "namespace": "default"},
                "spec": {"template": "small"}
            }
        }
    })
}

/// Sends [`valid_review`] to the validating webhook with reqwest and asserts it is allowed.
pub async fn assert_serves(client: &reqwest::Client, server: &Server, uid: &str) {
    let response = client
        .post(server.url(kubevirt_operator::admission::VALIDATE_PATH))
        .json(&valid_review(uid))
        .send()
        .await
        .unwrap_or_else(|e| panic!("valid request {uid} failed: {e:?}"));
    assert_eq!(response.status(), 200, "valid request {uid}");
    let body: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(body["response"]["uid"], uid);
    assert_eq!(body["response"]["allowed"], true, "{body}");
}
