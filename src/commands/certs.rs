//! `kubevirt-operator certs status|rotate`: what the certificates look like, and asking the
//! leader to rotate them now.
//!
//! Rotation on demand is a request, not an action of this command: it sets the annotation
//! `vitistack.io/rotate-requested-at` on the serving Secret (or, with `--ca`, on the CA Secret).
//! The leader's rotation engine treats the annotation as "renewal due now", issues the new
//! certificate in the usual order (a new CA is published in the bundle and the webhook
//! configurations before anything is served from it) and drops the annotation with the same
//! write. The same request can be made with kubectl:
//! `kubectl -n kubevirt-operator-system annotate secret kubevirt-operator-ca vitistack.io/rotate-requested-at="$(date -u +%FT%TZ)"`.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use k8s_openapi::ByteString;

use crate::certs::config::{WebhookUrl, format_duration, parse_duration};
use crate::certs::observed::{Observed, Snapshot, Stored, observe};
use crate::certs::store::Store;
use crate::certs::x509::Cert;
use crate::certs::{
    BUNDLE_CONFIGMAP, CA_SECRET, ROTATE_ANNOTATION, SERVING_SECRET, WEBHOOK_CONFIGURATION, trust,
};

#[derive(Args, Debug)]
pub struct CertsArgs {
    /// Namespace the operator runs in.
    #[arg(
        long,
        short = 'n',
        env = "NAMESPACE",
        default_value = "kubevirt-operator-system",
        global = true
    )]
    pub namespace: String,
    /// The webhook configurations whose caBundle `status` checks (the release's).
    #[arg(long, env = "WEBHOOK_CONFIGURATION_NAME", global = true,
          default_value = WEBHOOK_CONFIGURATION, value_parser = crate::config::parse_dns_subdomain)]
    pub webhook_configuration_name: String,
    #[command(subcommand)]
    pub command: CertsCommand,
}

#[derive(Subcommand, Debug)]
pub enum CertsCommand {
    /// Print subject, issuer, SANs and validity of the CA, the CAs in the bundle and the serving
    /// certificate, and whether the webhook configurations carry the bundle.
    Status,
    /// Ask the leader to renew the serving certificate now; with --ca, the CA first.
    Rotate(RotateArgs),
}

#[derive(Args, Debug)]
pub struct RotateArgs {
    /// Rotate the CA: a new CA joins the bundle, then serving certificates move to it. The old
    /// CA stays trusted until it expires.
    #[arg(long)]
    pub ca: bool,
    /// Return once the request is recorded, without waiting for the leader to carry it out.
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for the leader.
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    pub timeout: Duration,
}

pub async fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the cluster (KUBECONFIG or in-cluster configuration)")?;
    // The APIService is read too: `status` shows whether it carries the bundle (missing while the
    // aggregated API is off).
    let store = Store::new(client.clone(), &args.namespace)
        .with_webhook_configuration(&args.webhook_configuration_name)
        .with_api_service(client, matches!(args.command, CertsCommand::Status));
    match args.command {
        CertsCommand::Status => {
            let snapshot = store.snapshot().await?;
            let name = &args.webhook_configuration_name;
            print!(
                "{}",
                render_status(&snapshot, &args.namespace, name, Utc::now())
            );
            Ok(ExitCode::SUCCESS)
        }
        CertsCommand::Rotate(r) => rotate(&store, &r).await,
    }
}

async fn rotate(store: &Store, args: &RotateArgs) -> anyhow::Result<ExitCode> {
    let before = observe(&store.snapshot().await?);
    let (secret, what) = if args.ca {
        (CA_SECRET, "CA")
    } else {
        (SERVING_SECRET, "serving certificate")
    };
    let exists = if args.ca {
        !matches!(before.ca, Stored::Missing)
    } else {
        !matches!(before.serving, Stored::Missing)
    };
    if !exists {
        anyhow::bail!(
            "Secret {}/{secret} does not exist: is kubevirt-operator running with self-managed certificates in this namespace?",
            store.namespace()
        );
    }
    let value = store.request_rotation(args.ca, Utc::now()).await?;
    println!(
        "requested {what} rotation: annotated Secret {}/{secret} with {ROTATE_ANNOTATION}={value}",
        store.namespace()
    );
    if args.no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = Instant::now() + args.timeout;
    let old_ca = before.ca.ok().map(|c| c.cert.clone());
    let old_serving = before.serving.ok().map(|s| s.cert.clone());
    let mut new_ca_reported = false;
    loop {
        let now = observe(&store.snapshot().await?);
        let ca = now.ca.ok();
        let serving = now.serving.ok();
        if args.ca
            && !new_ca_reported
            && let Some(ca) = ca.filter(|c| Some(&c.cert) != old_ca.as_ref())
        {
            println!(
                "new CA issued: {} (serial {}), valid until {}",
                ca.cert.subject, ca.cert.serial, ca.cert.not_after
            );
            new_ca_reported = true;
        }
        // Done when the serving certificate changed and, for --ca, comes from the new CA.
        let done = serving.is_some_and(|s| {
            Some(&s.cert) != old_serving.as_ref()
                && (!args.ca
                    || (new_ca_reported
                        && ca.is_some_and(|c| s.issuer_ca.as_ref() == Some(&c.cert))))
        });
        if let (true, Some(s)) = (done, serving) {
            println!(
                "new serving certificate issued: serial {}, valid until {}",
                s.cert.serial, s.cert.not_after
            );
            return Ok(ExitCode::SUCCESS);
        }
        if Instant::now() >= deadline {
            eprintln!(
                "the leader did not complete the rotation within {}: is kubevirt-operator running, and its leader healthy? The request stays recorded and will be carried out when it is.",
                format_duration(args.timeout)
            );
            return Ok(ExitCode::FAILURE);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The `certs status` report.
pub fn render_status(
    snapshot: &Snapshot,
    namespace: &str,
    webhook_configuration: &str,
    now: DateTime<Utc>,
) -> String {
    let o = observe(snapshot);
    let mut out = String::new();
    let _ = writeln!(out, "Namespace: {namespace}");
    let _ = writeln!(out, "Time:      {}", stamp(now));

    let _ = writeln!(out, "\nCA (Secret {CA_SECRET}):");
    match &o.ca {
        Stored::Ok(ca) => {
            describe(&mut out, &ca.cert, now);
            if ca.rotate_requested {
                let _ = writeln!(out, "  Rotation:    requested, not yet carried out");
            }
        }
        other => state_line(&mut out, other),
    }

    let _ = writeln!(out, "\nServing certificate (Secret {SERVING_SECRET}):");
    match &o.serving {
        Stored::Ok(s) => {
            describe(&mut out, &s.cert, now);
            if let Some(ca) = &s.issuer_ca {
                let _ = writeln!(out, "  Issued by:   CA serial {}", ca.serial);
            }
            if s.rotate_requested {
                let _ = writeln!(out, "  Rotation:    requested, not yet carried out");
            }
        }
        other => state_line(&mut out, other),
    }

    let _ = writeln!(out, "\nTrusted CA bundle (ConfigMap {BUNDLE_CONFIGMAP}):");
    let bundle: Vec<Cert> = match &o.bundle {
        Stored::Ok(b) => {
            for (i, ca) in b.cas.iter().enumerate() {
                let _ = writeln!(out, "  [{}]", i + 1);
                describe_indented(&mut out, ca, now, "    ");
            }
            if b.malformed > 0 {
                let _ = writeln!(out, "  ({} malformed PEM block(s) ignored)", b.malformed);
            }
            b.cas.clone()
        }
        other => {
            state_line(&mut out, other);
            Vec::new()
        }
    };

    let _ = writeln!(out, "\nWebhook configurations ({webhook_configuration}):");
    let mutating = o.mutating.ok().map(|m| {
        m.webhooks
            .iter()
            .flatten()
            .map(|h| h.client_config.ca_bundle.clone())
            .collect::<Vec<_>>()
    });
    let validating = o.validating.ok().map(|v| {
        v.webhooks
            .iter()
            .flatten()
            .map(|h| h.client_config.ca_bundle.clone())
            .collect::<Vec<_>>()
    });
    webhook_line(
        &mut out,
        "MutatingWebhookConfiguration",
        &o.mutating,
        mutating.as_deref(),
        &bundle,
    );
    webhook_line(
        &mut out,
        "ValidatingWebhookConfiguration",
        &o.validating,
        validating.as_deref(),
        &bundle,
    );
    let _ = writeln!(
        out,
        "\nAggregated API ({}):",
        crate::certs::api_service::NAME
    );
    let api_service = o
        .api_service
        .ok()
        .map(|a| vec![a.spec.as_ref().and_then(|s| s.ca_bundle.clone())]);
    webhook_line(
        &mut out,
        "APIService",
        &o.api_service,
        api_service.as_deref(),
        &bundle,
    );

    if let Some(verdict) = serving_verdict(&o, now) {
        let _ = writeln!(out, "\n{verdict}");
    }
    out
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let d = t - now;
    match d.to_std() {
        Ok(d) => format!("in {}", format_duration(Duration::from_secs(d.as_secs()))),
        Err(_) => format!(
            "{} ago",
            format_duration(Duration::from_secs((-d).num_seconds().unsigned_abs()))
        ),
    }
}

fn describe(out: &mut String, c: &Cert, now: DateTime<Utc>) {
    describe_indented(out, c, now, "  ");
}

fn describe_indented(out: &mut String, c: &Cert, now: DateTime<Utc>, pad: &str) {
    let _ = writeln!(out, "{pad}Subject:     {}", c.subject);
    let _ = writeln!(out, "{pad}Issuer:      {}", c.issuer);
    let _ = writeln!(out, "{pad}Serial:      {}", c.serial);
    if !c.sans().is_empty() {
        let _ = writeln!(out, "{pad}SANs:        {}", c.sans().join(", "));
    }
    let _ = writeln!(
        out,
        "{pad}Not before:  {} ({})",
        stamp(c.not_before),
        relative(c.not_before, now)
    );
    let state = if now >= c.not_after { ", EXPIRED" } else { "" };
    let _ = writeln!(
        out,
        "{pad}Not after:   {} ({}{state})",
        stamp(c.not_after),
        relative(c.not_after, now)
    );
}

fn state_line<T>(out: &mut String, s: &Stored<T>) {
    let line = match s {
        Stored::Missing => "  missing".to_owned(),
        Stored::Foreign => format!(
            "  not managed by kubevirt-operator (no {}={} label); left untouched",
            crate::certs::MANAGED_BY_LABEL,
            crate::certs::OPERATOR_NAME
        ),
        Stored::Unreadable(why) => format!("  unreadable: {why}"),
        Stored::Ok(_) => return,
    };
    let _ = writeln!(out, "{line}");
}

fn webhook_line<T>(
    out: &mut String,
    kind: &str,
    state: &Stored<T>,
    bundles: Option<&[Option<ByteString>]>,
    published: &[Cert],
) {
    let _ = write!(out, "  {kind}:");
    match (state, bundles) {
        (Stored::Ok(_), Some(bundles)) => {
            let same = !bundles.is_empty()
                && bundles.iter().all(|b| {
                    b.as_ref()
                        .map(|b| Cert::all_from_pem(&b.0).0)
                        .is_some_and(|cas| cas == published)
                });
            let _ = writeln!(
                out,
                " {}",
                if same {
                    format!("caBundle = the bundle ({} CA(s))", published.len())
                } else {
                    "caBundle DIFFERS from the bundle (the leader will correct it)".to_owned()
                }
            );
        }
        (Stored::Missing, _) => {
            let _ = writeln!(
                out,
                " not installed (the chart or manifests/ install it, the APIService only with the aggregated API on; the operator only fills its caBundle)"
            );
        }
        _ => {
            let mut s = String::new();
            state_line(&mut s, state);
            let _ = writeln!(out, " {}", s.trim());
        }
    }
}

/// Would kube-apiserver, holding the mutating configuration's caBundle, accept the serving
/// certificate now, for the host its clientConfig makes it connect to?
fn serving_verdict(o: &Observed, now: DateTime<Utc>) -> Option<String> {
    let s = o.serving.ok()?;
    let hook = o.mutating.ok()?.webhooks.as_ref()?.first()?;
    let cas = Cert::all_from_pem(&hook.client_config.ca_bundle.as_ref()?.0).0;
    let name = match (&hook.client_config.url, &hook.client_config.service) {
        (Some(url), _) => WebhookUrl::parse(url).ok()?.host().to_owned(),
        (None, Some(svc)) => format!("{}.{}.svc", svc.name, svc.namespace),
        (None, None) => return None,
    };
    Some(match trust::verify(&s.cert, &cas, &name, now) {
        Ok(()) => format!("kube-apiserver trusts the serving certificate (checked for {name})."),
        Err(e) => format!("kube-apiserver would REJECT the serving certificate for {name}: {e}"),
    })
}

#[cfg(test)]
mod tests;
