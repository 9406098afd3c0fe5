//! Process metrics as Prometheus' client libraries name them (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, ...), read from `/proc/self` at scrape time. prometheus-client
//! has no process collector, and the whole job is a few reads of text files.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Linux reports times in USER_HZ ticks, which is 100 on every architecture it runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// What one scrape reports; every field is missing when its file could not be read or parsed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub cpu_seconds: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub resident_memory_bytes: Option<i64>,
    pub virtual_memory_bytes: Option<i64>,
    pub threads: Option<i64>,
    pub open_fds: Option<i64>,
    pub max_fds: Option<i64>,
}

/// `/proc/self/stat`: (user + system CPU seconds, start time in seconds after boot).
pub fn parse_stat(stat: &str) -> Option<(f64, f64)> {
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15, starttime 22.
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    Some((
        (field(14)? + field(15)?) / TICKS_PER_SECOND,
        field(22)? / TICKS_PER_SECOND,
    ))
}

/// A `kB` line of `/proc/self/status` (e.g. `VmRSS:  1234 kB`) in bytes, or a plain count.
pub fn status_value(status: &str, key: &str) -> Option<i64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let mut words = line[key.len()..].trim_start_matches(':').split_whitespace();
    let n: i64 = words.next()?.parse().ok()?;
    Some(if words.next() == Some("kB") {
        n * 1024
    } else {
        n
    })
}

/// `btime` of `/proc/stat`: boot time in Unix seconds.
pub fn boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit on open files from `/proc/self/limits`.
pub fn max_open_files(limits: &str) -> Option<i64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Reads the sample of this process.
pub fn sample() -> Sample {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let stat = read("/proc/self/stat").as_deref().and_then(parse_stat);
    let status = read("/proc/self/status").unwrap_or_default();
    let boot = read("/proc/stat").as_deref().and_then(boot_time);
    Sample {
        cpu_seconds: stat.map(|(cpu, _)| cpu),
        start_time_seconds: stat
            .zip(boot)
            .map(|((_, after_boot), boot)| boot + after_boot),
        resident_memory_bytes: status_value(&status, "VmRSS"),
        virtual_memory_bytes: status_value(&status, "VmSize"),
        threads: status_value(&status, "Threads"),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as i64),
        max_fds: read("/proc/self/limits")
            .as_deref()
            .and_then(max_open_files),
    }
}

#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = sample();
        if let Some(v) = s.cpu_seconds {
            // The text encoder appends `_total` to counters.
            let m = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(v).encode(m)?;
        }
        let gauges_f64 = [(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            s.start_time_seconds,
        )];
        for (name, help, value) in gauges_f64 {
            if let Some(v) = value {
                let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(v).encode(m)?;
            }
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                s.resident_memory_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                s.virtual_memory_bytes,
            ),
            (
                "process_threads",
                "Number of OS threads in the process",
                s.threads,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                s.max_fds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(v).encode(m)?;
            }
        }
        Ok(())
    }
}

/// `kubevirt_operator_leader`: 1 while this replica holds the Lease, read at scrape time from
/// whatever the leader election shares (run.rs passes a closure over its state).
pub struct LeaderCollector(pub Box<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for LeaderCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderCollector").finish_non_exhaustive()
    }
}

impl Collector for LeaderCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = encoder.encode_descriptor(
            "kubevirt_operator_leader",
            "1 while this replica is the leader (reconciles), else 0",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::from((self.0)())).encode(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        let stat = "4242 (kubevirt op) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 12345 1000000 500 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((3.0, 123.45)));
        assert_eq!(parse_stat("garbage"), None);
        let status = "Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t7\n";
        assert_eq!(status_value(status, "VmRSS"), Some(1024 * 1024));
        assert_eq!(status_value(status, "VmSize"), Some(2048 * 1024));
        assert_eq!(status_value(status, "Threads"), Some(7));
        assert_eq!(
            boot_time("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000.0)
        );
        let limits = "Limit  Soft Limit  Hard Limit  Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
    }

    #[test]
    fn this_process_is_sampled() {
        let s = sample();
        assert!(s.cpu_seconds.is_some() && s.start_time_seconds.is_some());
        assert!(s.resident_memory_bytes.unwrap_or(0) > 0);
        assert!(s.open_fds.unwrap_or(0) > 0 && s.max_fds.unwrap_or(0) > 0);
    }
}
