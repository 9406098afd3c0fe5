//! Logging, metrics and the probe endpoints.

pub mod health;
pub mod logging;
pub mod metrics;

pub use metrics::Metrics;
