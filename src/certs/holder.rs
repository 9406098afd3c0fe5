//! The installed objects whose caBundle the operator fills: both webhook configurations and the
//! aggregated API's APIService. One trait, so filling, stamping and waiting for them is decided
//! once (`rotation`, `published`). Pure.

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use super::api_service;
use super::config::Settings;
use super::webhook_config::{self, WebhookConfiguration};
use super::x509::Cert;

pub trait CaBundleHolder: Clone {
    /// Its name, as a problem reports it.
    fn installed_name(settings: &Settings) -> String;
    fn metadata(&self) -> &ObjectMeta;
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
    /// The caBundles of what in it calls us; empty when nothing does (not ours to fill).
    fn bundles(&self, settings: &Settings) -> Vec<Option<&ByteString>>;
    /// `self` with `pem` in what calls us and nothing else changed; None when nothing calls us.
    fn filled(&self, settings: &Settings, pem: &[u8]) -> Option<Self>;

    /// Whether everything in it that calls us trusts `ca` (the new CA has "reached" it).
    /// Nothing calling us sends no request here: nothing to wait for.
    fn trusts(&self, settings: &Settings, ca: &Cert) -> bool {
        self.bundles(settings)
            .into_iter()
            .all(|b| b.is_some_and(|b| Cert::all_from_pem(&b.0).0.contains(ca)))
    }
}

impl<T: WebhookConfiguration> CaBundleHolder for T {
    fn installed_name(settings: &Settings) -> String {
        settings.webhook_configuration.clone()
    }
    fn metadata(&self) -> &ObjectMeta {
        self.meta()
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.meta_mut()
    }
    fn bundles(&self, settings: &Settings) -> Vec<Option<&ByteString>> {
        webhook_config::bundles(self, settings)
    }
    fn filled(&self, settings: &Settings, pem: &[u8]) -> Option<Self> {
        webhook_config::fill(self, settings, pem)
    }
}

impl CaBundleHolder for APIService {
    fn installed_name(_: &Settings) -> String {
        api_service::NAME.to_owned()
    }
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn bundles(&self, settings: &Settings) -> Vec<Option<&ByteString>> {
        let bundle = self.spec.as_ref().and_then(|s| s.ca_bundle.as_ref());
        api_service::calls_us(self, settings)
            .then_some(bundle)
            .into_iter()
            .collect()
    }
    fn filled(&self, settings: &Settings, pem: &[u8]) -> Option<Self> {
        api_service::fill(self, settings, pem)
    }
}
