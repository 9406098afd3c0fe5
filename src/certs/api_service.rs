//! The APIService `v1alpha1.subresources.vitistack.io` (the aggregated API of Machines' console
//! and power buttons, issue 34): the chart and manifests install it when the aggregated API is
//! on, and the operator fills its caBundle as it fills the webhook configurations' (only when
//! it names the operator's Service: an APIService pointing elsewhere is not ours). Pure.

use k8s_openapi::ByteString;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use super::config::Settings;

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

#[cfg(test)]
mod tests;
