//! Logging (and, as they land, metrics).

pub mod logging;
