//! Open-loop load at a fixed rate with evenly spaced arrivals, over TLS keep-alive.
//!
//! oha's `-q` releases its requests on tokio's 1 ms timer ticks, so at R req/s the server gets
//! bursts of R/1000 requests at once, and the last of each burst waits for all the others: at
//! half of the peak rate that alone puts p99 near 1 ms on two cores, whatever the server does.
//! Here each connection is a thread that sleeps with the OS's high-resolution timer until its
//! next slot (slots interleave across connections), so arrivals are spread the way independent
//! API servers would send them. Latency is measured from the scheduled start, so a late server
//! cannot hide its delay by holding the sender back (coordinated omission).
//!
//! Usage: webhook_load URL CA_FILE BODY_FILE RATE SECONDS CONNECTIONS

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, ca_file, body_file, rate, seconds, connections] = args.as_slice() else {
        bail!("usage: webhook_load URL CA_FILE BODY_FILE RATE SECONDS CONNECTIONS");
    };
    let target = Target::parse(url)?;
    let body = std::fs::read(body_file).with_context(|| format!("reading {body_file}"))?;
    let rate: f64 = rate.parse().context("RATE must be a number")?;
    let seconds: f64 = seconds.parse().context("SECONDS must be a number")?;
    let connections: usize = connections
        .parse()
        .context("CONNECTIONS must be an integer")?;
    if rate <= 0.0 || seconds <= 0.0 || connections == 0 {
        bail!("RATE, SECONDS and CONNECTIONS must be positive");
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in
        CertificateDer::pem_file_iter(ca_file).with_context(|| format!("reading {ca_file}"))?
    {
        roots.add(cert?)?;
    }
    let roots = Arc::new(roots);

    let request = Arc::new(target.request(&body));
    let interval = Duration::from_secs_f64(connections as f64 / rate);
    let per_connection = (rate * seconds / connections as f64).round() as u64;
    let start = Instant::now() + Duration::from_millis(200);
    let workers: Vec<_> = (0..connections)
        .map(|i| {
            let target = target.clone();
            let request = request.clone();
            let roots = roots.clone();
            // Connection i takes slots i, i + C, i + 2C, ...: together an even stream.
            let first = start + Duration::from_secs_f64(i as f64 / rate);
            std::thread::spawn(move || {
                // The default 50 µs timer slack would make every arrival late by up to that much.
                // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's timer slack.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1) };
                let reconnect = || target.connect(&roots);
                run(reconnect, &request, first, interval, per_connection)
            })
        })
        .collect();

    let mut corrected = new_histogram()?;
    let mut service = new_histogram()?;
    let mut failed = 0u64;
    for worker in workers {
        let outcome = worker
            .join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))??;
        corrected.add(&outcome.corrected)?;
        service.add(&outcome.service)?;
        failed += outcome.failed;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
    println!(
        "{{\"offered\": {rate:.0}, \"achieved\": {:.0}, \"requests\": {}, \"failed\": {failed}, \
         \"p50_us\": {:.0}, \"p99_us\": {:.0}, \"p999_us\": {:.0}, \"max_us\": {:.0}, \
         \"service_p50_us\": {:.0}, \"service_p99_us\": {:.0}}}",
        corrected.len() as f64 / elapsed,
        corrected.len(),
        us(&corrected, 0.5),
        us(&corrected, 0.99),
        us(&corrected, 0.999),
        corrected.max() as f64 / 1e3,
        us(&service, 0.5),
        us(&service, 0.99),
    );
    Ok(())
}

fn new_histogram() -> Result<Histogram<u64>> {
    // Nanoseconds, 1 µs to 60 s, 3 significant digits.
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).context("histogram bounds")
}

struct Outcome {
    corrected: Histogram<u64>,
    service: Histogram<u64>,
    failed: u64,
}

/// Sends `count` requests on one connection, opening a new one when the server ends it
/// (`Connection: close`, as the webhook does after 1000 requests), as kube-apiserver would.
fn run(
    connect: impl Fn() -> Result<Conn>,
    request: &[u8],
    first: Instant,
    interval: Duration,
    count: u64,
) -> Result<Outcome> {
    let mut outcome = Outcome {
        corrected: new_histogram()?,
        service: new_histogram()?,
        failed: 0,
    };
    let mut response = Vec::with_capacity(4096);
    let mut conn = connect()?;
    for k in 0..count {
        let scheduled = first + interval * k as u32;
        let now = Instant::now();
        if scheduled > now {
            std::thread::sleep(scheduled - now);
        }
        let sent = Instant::now();
        let (ok, closing) = exchange(&mut conn, request, &mut response)?;
        let done = Instant::now();
        if closing {
            conn = connect()?;
        }
        if !ok {
            outcome.failed += 1;
        }
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1_000);
        outcome.corrected.saturating_record(nanos(done - scheduled));
        outcome.service.saturating_record(nanos(done - sent));
    }
    Ok(outcome)
}

type Conn = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// One request and its response, read into `buf`: whether the status was 200, and whether the
/// server closes the connection after it.
fn exchange(conn: &mut Conn, request: &[u8], buf: &mut Vec<u8>) -> Result<(bool, bool)> {
    conn.write_all(request)?;
    conn.flush()?;
    buf.clear();
    let mut chunk = [0u8; 16 * 1024];
    let (status, need, closing) = loop {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            bail!("server closed the connection");
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut headers);
        if let httparse::Status::Complete(head) = response.parse(buf)? {
            let length = response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .context("response without content-length")?;
            let length: usize = std::str::from_utf8(length.value)?.trim().parse()?;
            let closing = response.headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case("connection") && h.value.eq_ignore_ascii_case(b"close")
            });
            break (response.code, head + length, closing);
        }
    };
    while buf.len() < need {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            bail!("server closed the connection mid-body");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok((status == Some(200), closing))
}

#[derive(Clone)]
struct Target {
    host: String,
    port: u16,
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Self> {
        let rest = url
            .strip_prefix("https://")
            .context("URL must start with https://")?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (host, port) = authority.rsplit_once(':').context("URL must name a port")?;
        Ok(Target {
            host: host.to_owned(),
            port: port.parse().context("URL port")?,
            path: format!("/{path}"),
        })
    }

    fn request(&self, body: &[u8]) -> Vec<u8> {
        let mut r = format!(
            "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.path,
            self.host,
            self.port,
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    }

    fn connect(&self, roots: &Arc<rustls::RootCertStore>) -> Result<Conn> {
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        let name = ServerName::try_from(self.host.clone())?;
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .with_context(|| format!("connecting to {}:{}", self.host, self.port))?;
        tcp.set_nodelay(true)?;
        let tls = rustls::ClientConnection::new(Arc::new(config), name)?;
        Ok(rustls::StreamOwned::new(tls, tcp))
    }
}
