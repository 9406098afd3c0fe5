//! Structured JSON logs in a cluster, readable text on a terminal; levels from `RUST_LOG`.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// JSON unless standard error is a terminal.
    Auto,
    Json,
    Text,
}

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = match format {
        LogFormat::Auto => !std::io::stderr().is_terminal(),
        LogFormat::Json => true,
        LogFormat::Text => false,
    };
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second init (tests) is harmless; keep the first subscriber.
    let _ = if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init()
    } else {
        builder.try_init()
    };
}
