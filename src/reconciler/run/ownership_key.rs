//! The ownership key (see [`evidence`](crate::reconciler::decide::evidence)): read from the
//! Secret `kubevirt-operator-ownership-key` in the operator's namespace, made by the first
//! leader that finds none (`create` fails for the second, which then reads the first's). The key
//! never appears in logs, Events or status; only the leader reads it.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use ring::rand::{SecureRandom, SystemRandom};

use crate::api::names::{MANAGED_BY, MANAGED_BY_LABEL, OWNERSHIP_KEY_SECRET};
use crate::reconciler::decide::evidence::{KeyError, MIN_KEY_LEN, OwnershipKey};

/// The Secret's data field that holds the key.
pub const KEY_FIELD: &str = "key";

#[derive(Debug, thiserror::Error)]
pub enum KeyLoadError {
    #[error("reading or creating Secret {namespace}/{OWNERSHIP_KEY_SECRET}: {source}")]
    Api {
        namespace: String,
        source: kube::Error,
    },
    #[error("Secret {namespace}/{OWNERSHIP_KEY_SECRET} has no data field {KEY_FIELD:?}")]
    Missing { namespace: String },
    #[error("Secret {namespace}/{OWNERSHIP_KEY_SECRET}, field {KEY_FIELD:?}: {source}")]
    Invalid { namespace: String, source: KeyError },
    #[error("no random bytes for a new ownership key")]
    Random,
}

/// The key in `secret`, made at the Secret's creation time.
pub fn parse(secret: &Secret, namespace: &str) -> Result<OwnershipKey, KeyLoadError> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(KEY_FIELD))
        .ok_or_else(|| KeyLoadError::Missing {
            namespace: namespace.to_owned(),
        })?;
    let made = secret.metadata.creation_timestamp.as_ref().map(|t| t.0);
    OwnershipKey::new(&bytes.0, made).map_err(|source| KeyLoadError::Invalid {
        namespace: namespace.to_owned(),
        source,
    })
}

fn new_secret(namespace: &str) -> Result<Secret, KeyLoadError> {
    let mut bytes = vec![0u8; MIN_KEY_LEN];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| KeyLoadError::Random)?;
    let mut secret = Secret {
        data: Some([(KEY_FIELD.to_owned(), ByteString(bytes))].into()),
        immutable: Some(true),
        type_: Some("Opaque".into()),
        ..Secret::default()
    };
    secret.metadata.name = Some(OWNERSHIP_KEY_SECRET.into());
    secret.metadata.namespace = Some(namespace.into());
    secret
        .labels_mut()
        .insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    Ok(secret)
}

/// Reads the key, making it first if there is none.
pub async fn load_or_create(
    client: &Client,
    namespace: &str,
) -> Result<OwnershipKey, KeyLoadError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let api_error = |source| KeyLoadError::Api {
        namespace: namespace.to_owned(),
        source,
    };
    if let Some(s) = api.get_opt(OWNERSHIP_KEY_SECRET).await.map_err(api_error)? {
        return parse(&s, namespace);
    }
    match api
        .create(&PostParams::default(), &new_secret(namespace)?)
        .await
    {
        Ok(s) => {
            tracing::info!(secret = OWNERSHIP_KEY_SECRET, "made the ownership key");
            parse(&s, namespace)
        }
        // Another leader made it first: theirs is the key.
        Err(kube::Error::Api(e)) if e.code == 409 => match api.get(OWNERSHIP_KEY_SECRET).await {
            Ok(s) => parse(&s, namespace),
            Err(e) => Err(api_error(e)),
        },
        Err(e) => Err(api_error(e)),
    }
}

/// [`load_or_create`], retried with backoff (1 s doubling to 30 s) until it succeeds: nothing
/// is reconciled without the key, since without it nothing can be told ours.
pub async fn wait_for_key(client: &Client, namespace: &str) -> OwnershipKey {
    let mut delay = Duration::from_secs(1);
    loop {
        match load_or_create(client, namespace).await {
            Ok(key) => return key,
            Err(e) => {
                tracing::error!(error = %e, retry_in = ?delay, "no ownership key: nothing is reconciled until there is one");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_parses_and_a_bad_one_is_named() {
        let s = new_secret("ops").expect("secret");
        assert!(parse(&s, "ops").is_ok());
        assert_eq!(s.immutable, Some(true));
        let mut short = s.clone();
        short.data = Some([(KEY_FIELD.to_owned(), ByteString(vec![1; 8]))].into());
        let e = parse(&short, "ops").expect_err("too short").to_string();
        assert!(e.contains("ops/kubevirt-operator-ownership-key"), "{e}");
        assert!(e.contains("at least 32 bytes"), "{e}");
        let mut empty = s;
        empty.data = None;
        let e = parse(&empty, "ops").expect_err("missing").to_string();
        assert!(e.contains("no data field \"key\""), "{e}");
    }
}
