//! Certificate settings: lifetimes, when to renew, and the names the serving certificate must
//! carry. Durations are written the Go way (`168h`, `90m`, `1h30m`, `45s`, `1.5h`), as
//! KubeVirt's `caRotateInterval`/`certRotateInterval` are, with [`crate::config::parse_duration`],
//! the parser every duration setting uses.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use axum::http::Uri;
use chrono::TimeDelta;
use clap::Args;

use super::WEBHOOK_SERVICE;

/// When to renew a certificate: a share of its own lifetime (KubeVirt's 80% rule is `20%`), or
/// a fixed time before it expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenewBefore {
    /// Percent of the lifetime left when renewal starts (1-99).
    Percent(u8),
    Fixed(Duration),
}

impl Default for RenewBefore {
    fn default() -> Self {
        RenewBefore::Percent(20)
    }
}

impl fmt::Display for RenewBefore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenewBefore::Percent(p) => write!(f, "{p}%"),
            RenewBefore::Fixed(d) => write!(f, "{}", format_duration(*d)),
        }
    }
}

impl RenewBefore {
    /// `20%` or a Go duration such as `4h`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            return match p.trim().parse::<u8>() {
                Ok(p) if (1..=99).contains(&p) => Ok(RenewBefore::Percent(p)),
                _ => Err(format!(
                    "{s:?} is not a percentage between 1% and 99% of the lifetime"
                )),
            };
        }
        parse_duration(s).map(RenewBefore::Fixed)
    }

    /// How long before `lifetime` ends renewal starts.
    pub fn before(&self, lifetime: TimeDelta) -> TimeDelta {
        match self {
            RenewBefore::Percent(p) => lifetime * i32::from(*p) / 100,
            RenewBefore::Fixed(d) => TimeDelta::from_std(*d).unwrap_or(TimeDelta::MAX),
        }
    }
}

/// Lifetimes and renewal windows take the one duration syntax of every setting.
pub use crate::config::parse_duration;

/// Formats like Go's `time.Duration.String` for whole seconds: `168h0m0s` reads as `168h`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Flags for `kubevirt-operator run`; flatten into its arguments with `#[command(flatten)]`.
#[derive(Args, Debug, Clone)]
pub struct CertificateArgs {
    /// Lifetime of the self-managed CA (Go duration, e.g. 168h).
    #[arg(long, env = "CA_DURATION", value_name = "CA_DURATION", default_value = "168h", value_parser = parse_duration)]
    pub ca_duration: Duration,
    /// Lifetime of the webhook serving certificate (Go duration, e.g. 24h).
    #[arg(long, env = "CERT_DURATION", value_name = "CERT_DURATION", default_value = "24h", value_parser = parse_duration)]
    pub cert_duration: Duration,
    /// When to renew each certificate: a share of its lifetime (20% = at 80% of the lifetime)
    /// or a duration before it expires (e.g. 4h).
    #[arg(long, env = "RENEW_BEFORE", value_name = "RENEW_BEFORE", default_value = "20%", value_parser = RenewBefore::parse)]
    pub renew_before: RenewBefore,
}

impl Default for CertificateArgs {
    fn default() -> Self {
        CertificateArgs {
            ca_duration: Duration::from_secs(168 * 3600),
            cert_duration: Duration::from_secs(24 * 3600),
            renew_before: RenewBefore::default(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "--cert-duration (CERT_DURATION) {cert} is longer than --ca-duration (CA_DURATION) {ca}: a serving certificate cannot outlive the CA that signs it"
    )]
    CertOutlivesCa { cert: String, ca: String },
    #[error(
        "--renew-before (RENEW_BEFORE) {renew} is not shorter than the {which} lifetime {lifetime}: the certificate would be renewed as soon as it is issued"
    )]
    RenewBeforeTooLong {
        renew: String,
        which: &'static str,
        lifetime: String,
    },
    #[error(
        "--webhook-url {url:?}: {reason} (expected e.g. https://127.0.0.1:8443 or https://webhook.example.com)"
    )]
    WebhookUrl { url: String, reason: &'static str },
    #[error("NAMESPACE / --namespace {0:?} is not a valid namespace name")]
    Namespace(String),
    #[error("WEBHOOK_SERVICE_NAME / --webhook-service-name {0:?} is not a valid Service name")]
    Service(String),
    #[error(
        "WEBHOOK_CONFIGURATION_NAME / --webhook-configuration-name {0:?} is not a valid object name"
    )]
    WebhookConfiguration(String),
}

/// Checked lifetimes: the serving certificate never outlives its CA and neither is renewed as
/// soon as it is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    pub ca: TimeDelta,
    pub serving: TimeDelta,
    pub renew_before: RenewBefore,
}

impl Lifetimes {
    pub fn new(
        ca: Duration,
        serving: Duration,
        renew_before: RenewBefore,
    ) -> Result<Self, ConfigError> {
        if serving > ca {
            return Err(ConfigError::CertOutlivesCa {
                cert: format_duration(serving),
                ca: format_duration(ca),
            });
        }
        if let RenewBefore::Fixed(d) = renew_before {
            for (which, lifetime) in [("serving certificate", serving), ("CA", ca)] {
                if d >= lifetime {
                    return Err(ConfigError::RenewBeforeTooLong {
                        renew: format_duration(d),
                        which,
                        lifetime: format_duration(lifetime),
                    });
                }
            }
        }
        // parse_duration bounds both, so these conversions cannot fail for parsed values.
        let delta = |d: Duration| TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX);
        Ok(Lifetimes {
            ca: delta(ca),
            serving: delta(serving),
            renew_before,
        })
    }
}

impl CertificateArgs {
    pub fn lifetimes(&self) -> Result<Lifetimes, ConfigError> {
        Lifetimes::new(self.ca_duration, self.cert_duration, self.renew_before)
    }
}

/// Where kube-apiserver reaches the webhooks out of cluster: `--webhook-url https://HOST[:PORT]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookUrl {
    /// Scheme, authority and any path prefix, without a trailing slash.
    base: String,
    host: String,
}

impl WebhookUrl {
    pub fn parse(url: &str) -> Result<Self, ConfigError> {
        let err = |reason| ConfigError::WebhookUrl {
            url: url.to_owned(),
            reason,
        };
        let uri: Uri = url.parse().map_err(|_| err("not a URL"))?;
        if uri.scheme_str() != Some("https") {
            return Err(err("kube-apiserver calls webhooks over https only"));
        }
        if uri.query().is_some() {
            return Err(err("a query string is not allowed"));
        }
        let authority = uri.authority().ok_or_else(|| err("no host"))?;
        if authority.as_str().contains('@') {
            return Err(err("user information is not allowed"));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err(err("no host"));
        }
        let path = uri.path().trim_end_matches('/');
        Ok(WebhookUrl {
            base: format!("https://{authority}{path}"),
            host,
        })
    }

    /// The full URL of one webhook path (e.g. `/mutate-vitistack-io-v1alpha1-machine`).
    pub fn join(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Whether `url` is one of this base's webhook URLs (the base itself or a path under it).
    pub fn covers(&self, url: &str) -> bool {
        url.strip_prefix(&self.base)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    pub fn host(&self) -> &str {
        &self.host
    }
}

/// Everything the certificate manager decides with, besides the stored state and the clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub namespace: String,
    pub service: String,
    pub webhook_url: Option<WebhookUrl>,
    pub lifetimes: Lifetimes,
    /// How long after a new CA is issued (and only once it is in the bundle and both webhook
    /// configurations) serving certificates switch to it: time for every kube-apiserver's
    /// informer to see the new caBundle.
    pub publish_grace: TimeDelta,
    /// `--watch-namespaces`: the webhooks are called for these namespaces only.
    pub namespaces: crate::config::WatchScope,
    /// `--webhook-configuration-name`: the Mutating- and ValidatingWebhookConfiguration (one
    /// name for both) the chart or manifests install and the operator fills with its caBundle.
    pub webhook_configuration: String,
    /// The aggregated API is served (`--subresources-listen`): the APIService
    /// `v1alpha1.subresources.vitistack.io` is read, filled and waited for like the webhook
    /// configurations.
    pub api_service: bool,
}

/// Longest [`Settings::publish_grace`]. Informers deliver in well under a second; 10s covers a
/// busy API server without delaying the switch noticeably.
pub const PUBLISH_GRACE: TimeDelta = TimeDelta::seconds(10);

/// The publish grace for `lifetimes`: [`PUBLISH_GRACE`], but at most half the serving
/// certificate's renewal window, so that with very short lifetimes (tests, demos) a certificate
/// due when the CA rotates still has time left after the grace instead of expiring during it.
pub fn publish_grace(lifetimes: &Lifetimes) -> TimeDelta {
    let window = lifetimes
        .renew_before
        .before(lifetimes.serving)
        .min(lifetimes.serving);
    PUBLISH_GRACE.min(window / 2)
}

impl Settings {
    pub fn new(
        namespace: &str,
        webhook_url: Option<&str>,
        lifetimes: Lifetimes,
    ) -> Result<Self, ConfigError> {
        if !is_dns_label(namespace) {
            return Err(ConfigError::Namespace(namespace.to_owned()));
        }
        Ok(Settings {
            namespace: namespace.to_owned(),
            service: WEBHOOK_SERVICE.to_owned(),
            webhook_url: webhook_url.map(WebhookUrl::parse).transpose()?,
            lifetimes,
            publish_grace: publish_grace(&lifetimes),
            namespaces: crate::config::WatchScope::All,
            webhook_configuration: super::WEBHOOK_CONFIGURATION.to_owned(),
            api_service: false,
        })
    }

    /// Whether the aggregated API's APIService is filled too (`--subresources-listen` set).
    pub fn with_api_service(mut self, on: bool) -> Self {
        self.api_service = on;
        self
    }

    /// The webhook configurations to fill (`--webhook-configuration-name`), named per release.
    pub fn with_webhook_configuration(mut self, name: &str) -> Result<Self, ConfigError> {
        crate::config::parse_dns_subdomain(name)
            .map_err(|_| ConfigError::WebhookConfiguration(name.to_owned()))?;
        self.webhook_configuration = name.to_owned();
        Ok(self)
    }

    /// The webhook Service (`--webhook-service-name`): the webhook configurations' clientConfig
    /// and the serving certificate's names follow it, so a kustomize `namePrefix` or a Helm
    /// release name that renames the Service keeps the webhooks reachable.
    pub fn with_service(mut self, service: &str) -> Result<Self, ConfigError> {
        if !is_dns_label(service) {
            return Err(ConfigError::Service(service.to_owned()));
        }
        self.service = service.to_owned();
        Ok(self)
    }

    /// The namespaces the webhooks are called for (`--watch-namespaces`).
    pub fn with_watch_scope(mut self, scope: &crate::config::WatchScope) -> Self {
        self.namespaces = scope.clone();
        self
    }

    /// The names the serving certificate carries, the name kube-apiserver checks first.
    pub fn serving_names(&self) -> ServingNames {
        let (svc, ns) = (&self.service, &self.namespace);
        let mut dns = vec![
            svc.clone(),
            format!("{svc}.{ns}"),
            format!("{svc}.{ns}.svc"),
            format!("{svc}.{ns}.svc.cluster.local"),
        ];
        let mut ips = Vec::new();
        let mut verify_as = format!("{svc}.{ns}.svc");
        if let Some(url) = &self.webhook_url {
            match url.host().parse::<IpAddr>() {
                Ok(ip) => ips.push(ip),
                Err(_) if !dns.iter().any(|d| d == url.host()) => dns.push(url.host().to_owned()),
                Err(_) => {}
            }
            verify_as = url.host().to_owned();
        }
        ServingNames {
            dns,
            ips,
            verify_as,
        }
    }
}

/// Subject alternative names of the serving certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServingNames {
    pub dns: Vec<String>,
    pub ips: Vec<IpAddr>,
    /// The name kube-apiserver connects to: the Service's `svc.ns.svc`, or the URL host.
    pub verify_as: String,
}

fn is_dns_label(s: &str) -> bool {
    crate::config::parse_dns_label(s).is_ok()
}

#[cfg(test)]
mod tests;
