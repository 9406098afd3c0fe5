//! TLS for the webhook server: PEM parsing, the swappable certificate, file reloading, the
//! HTTPS server and the accept loop (limits, drain) every listener shares.

pub mod admit;
pub mod client_auth;
pub mod deadlines;
pub mod file_reload;
pub mod h2;
pub mod keypair;
pub mod limits;
pub mod listener;
pub mod resolver;
pub mod server;
pub mod streams;

pub use resolver::CertSlot;

/// Installs ring as the process-wide rustls provider; a second provider would panic at run time.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
