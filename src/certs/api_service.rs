//! The APIService `v1alpha1.subresources.vitistack.io` (the aggregated API of Machines' console
//! and power buttons, issue 34): the chart and manifests install it when the aggregated API is
//! on, and the operator fills its caBundle as it fills the webhook configurations' (only when
//! it names the operator's Service: an APIService pointing elsewhere is not ours). Pure.

use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use super::config::Settings;
use super::x509::Cert;

/// `<version>.<group>`: one per cluster, whatever the release is called.
pub const NAME: &str = "v1alpha1.subresources.vitistack.io";

/// Whether `live` sends its requests to the operator's Service. kube-apiserver then checks the
/// serving certificate against its caBundle for `<service>.<namespace>.svc`, the name the
/// operator's serving certificate carries.
pub fn calls_us(live: &APIService, settings: &Settings) -> bool {
    let service = live.spec.as_ref().and_then(|s| s.service.as_ref());
    service.is_some_and(|s| {
        s.name.as_deref() == Some(settings.service.as_str())
            && s.namespace.as_deref() == Some(settings.namespace.as_str())
    })
}

fn bundle(live: &APIService) -> Option<&ByteString> {
    live.spec.as_ref().and_then(|s| s.ca_bundle.as_ref())
}

/// `live` with `ca_bundle` (PEM) and nothing else changed (insecureSkipTLSVerify dropped: it
/// may not be set beside a caBundle); None when it does not call us (not ours to fill).
pub fn fill(live: &APIService, settings: &Settings, ca_bundle: &[u8]) -> Option<APIService> {
    if !calls_us(live, settings) {
        return None;
    }
    let mut desired = live.clone();
    let spec = desired.spec.get_or_insert_default();
    spec.ca_bundle = Some(ByteString(ca_bundle.to_vec()));
    spec.insecure_skip_tls_verify = None;
    Some(desired)
}

/// Whether its caBundle changes from `live` to `desired`.
pub fn bundle_changes(live: &APIService, desired: &APIService) -> bool {
    bundle(live) != bundle(desired)
}

/// Whether `live` trusts `ca`; one that does not call us sends nothing here: nothing to wait for.
pub fn trusts(live: &APIService, settings: &Settings, ca: &Cert) -> bool {
    !calls_us(live, settings)
        || bundle(live).is_some_and(|b| Cert::all_from_pem(&b.0).0.contains(ca))
}

/// When its caBundle was last written, as recorded on it: None when it does not call us (not
/// waited for), Some(None) when it calls us without a readable record.
pub fn written_at(live: &APIService, settings: &Settings) -> Option<Option<DateTime<Utc>>> {
    calls_us(live, settings).then(|| super::observed::ca_bundle_written_at(&live.metadata))
}

#[cfg(test)]
mod tests;
