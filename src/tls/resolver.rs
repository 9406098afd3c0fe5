//! The certificate every handshake is served with, swappable at run time: a rotation or a file
//! reload replaces it for new handshakes while open connections keep the one they agreed on.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

#[derive(Debug, Default)]
pub struct CertSlot {
    current: ArcSwapOption<CertifiedKey>,
}

impl CertSlot {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn store(&self, key: Arc<CertifiedKey>) {
        self.current.store(Some(key));
    }

    /// Whether a certificate is loaded (readiness).
    pub fn is_loaded(&self) -> bool {
        self.current.load().is_some()
    }

    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}

impl ResolvesServerCert for CertSlot {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }
}
