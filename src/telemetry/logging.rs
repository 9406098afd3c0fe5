//! Structured JSON logs in a cluster, readable text on a terminal; levels from `RUST_LOG`.
//!
//! In JSON every field of the enclosing spans is lifted to the top level, so a reconcile span's
//! `controller`, `machine`, `namespace` and `phase` sit beside `timestamp`, `level` and
//! `message` (SPEC.md, "Operations"), as log pipelines index them.

use std::io::IsTerminal;

use tracing_subscriber::fmt::time::UtcTime;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// JSON unless standard error is a terminal.
    Auto,
    Json,
    Text,
}

impl LogFormat {
    pub fn is_json(self) -> bool {
        match self {
            LogFormat::Auto => !std::io::stderr().is_terminal(),
            LogFormat::Json => true,
            LogFormat::Text => false,
        }
    }
}

/// The JSON layer, writing to `writer` (standard error in the binary; a buffer in tests).
pub fn json_layer<S, W>(writer: W) -> json_subscriber::JsonLayer<S, W>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + 'static,
{
    let mut layer = json_subscriber::JsonLayer::new(writer);
    layer
        .with_timer("timestamp", UtcTime::rfc_3339())
        .with_target("target")
        .with_flattened_event()
        .with_top_level_flattened_span_list();
    // Lower case, as the Go operators (and SPEC's examples) write it: "info", not "INFO".
    layer.add_dynamic_field("level", |event, _| {
        Some(event.metadata().level().as_str().to_ascii_lowercase())
    });
    layer
}

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // A second init (tests) is harmless; keep the first subscriber.
    let _ = if format.is_json() {
        Registry::default()
            .with(filter)
            .with(json_layer(std::io::stderr))
            .try_init()
    } else {
        Registry::default()
            .with(filter)
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .try_init()
    };
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_lines_carry_the_contracted_fields_at_the_top_level() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = Registry::default().with(json_layer(move || writer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "reconcile",
                controller = "Machine",
                machine = "test-vm",
                namespace = "default"
            );
            let _guard = span.enter();
            tracing::info!(phase = "Creating", "Creating VirtualMachine resource");
        });
        let bytes = buffer.0.lock().unwrap().clone();
        let line: serde_json::Value =
            serde_json::from_slice(bytes.trim_ascii()).expect("one JSON line");
        assert_eq!(line["level"], "info");
        assert_eq!(line["controller"], "Machine");
        assert_eq!(line["machine"], "test-vm");
        assert_eq!(line["namespace"], "default");
        assert_eq!(line["phase"], "Creating");
        assert_eq!(line["message"], "Creating VirtualMachine resource");
        let ts = line["timestamp"].as_str().expect("timestamp");
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{ts}");
    }
}
