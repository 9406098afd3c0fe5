//! Logging, metrics and the probe endpoints.

pub mod certs;
pub mod health;
pub mod logging;
pub mod metrics;
pub mod orphans;
pub mod process;
pub mod sessions;

pub use metrics::Metrics;
