//! The ownership key (see [`evidence`](crate::reconciler::decide::evidence)): read from the
//! Secret `kubevirt-operator-ownership-key` in the operator's namespace, made by a leader that
//! finds none, and only when nothing made under an earlier key exists or the admin accepted a
//! new one (`--new-ownership-key`; see [`key_start`]): a key is never replaced silently. `create`
//! fails for a second leader, which then reads the first's. The key never appears in logs,
//! Events or status; only the leader reads it.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use ring::rand::{SecureRandom, SystemRandom};

use crate::api::names::{MANAGED_BY, MANAGED_BY_LABEL, OWNERSHIP_KEY_SECRET};
use crate::reconciler::decide::evidence::{KeyError, MIN_KEY_LEN, OwnershipKey};
use crate::reconciler::decide::key_start::{self, Evidence, Start};

/// The Secret's data field that holds the key.
pub const KEY_FIELD: &str = "key";
/// On a key Secret made to replace a lost key (`--new-ownership-key`): objects older than it
/// are re-proven once by their labels and names.
pub const REPLACES_ANNOTATION: &str = "vitistack.io/replaces-lost-key";

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
    let key = OwnershipKey::new(&bytes.0, made).map_err(|source| KeyLoadError::Invalid {
        namespace: namespace.to_owned(),
        source,
    })?;
    let replacing = secret.annotations().contains_key(REPLACES_ANNOTATION);
    Ok(match made {
        Some(made) if replacing => key.replacing(made),
        _ => key,
    })
}

fn new_secret(namespace: &str, replacing: bool) -> Result<Secret, KeyLoadError> {
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
    if replacing {
        secret
            .annotations_mut()
            .insert(REPLACES_ANNOTATION.into(), "true".into());
    }
    Ok(secret)
}

/// Reads the key; `None` when the Secret is missing.
pub async fn read(client: &Client, namespace: &str) -> Result<Option<OwnershipKey>, KeyLoadError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(OWNERSHIP_KEY_SECRET).await {
        Ok(Some(s)) => parse(&s, namespace).map(Some),
        Ok(None) => Ok(None),
        Err(source) => Err(KeyLoadError::Api {
            namespace: namespace.to_owned(),
            source,
        }),
    }
}

/// Makes the key Secret (`replacing` a lost key, or the first); another leader's, if it made
/// one first.
async fn make(
    client: &Client,
    namespace: &str,
    replacing: bool,
) -> Result<OwnershipKey, KeyLoadError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let api_error = |source| KeyLoadError::Api {
        namespace: namespace.to_owned(),
        source,
    };
    match api
        .create(&PostParams::default(), &new_secret(namespace, replacing)?)
        .await
    {
        Ok(s) => {
            tracing::info!(
                secret = OWNERSHIP_KEY_SECRET,
                replacing,
                "made the ownership key"
            );
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

/// Why there is no key yet.
#[derive(Debug, thiserror::Error)]
enum NoKey {
    #[error(transparent)]
    Load(#[from] KeyLoadError),
    #[error("{0}")]
    Refused(String),
}

/// Retries `attempt` with backoff (1 s doubling to 30 s) until it yields the key: nothing is
/// reconciled without it, since without it nothing can be told ours.
async fn retried<F, Fut>(mut attempt: F) -> OwnershipKey
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<OwnershipKey, NoKey>>,
{
    let mut delay = Duration::from_secs(1);
    loop {
        match attempt().await {
            Ok(key) => return key,
            Err(NoKey::Refused(why)) => {
                tracing::error!(secret = OWNERSHIP_KEY_SECRET, retry_in = ?delay, "{why}");
            }
            Err(e) => {
                tracing::error!(error = %e, retry_in = ?delay, "no ownership key: nothing is reconciled until there is one");
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// The reconciler's key: read, or made when [`key_start::start`] says so given what `evidence`
/// finds (asked only while the Secret is missing); `accept_new` is `--new-ownership-key`.
pub async fn settle_key<E, Fut>(
    client: &Client,
    namespace: &str,
    accept_new: bool,
    evidence: E,
) -> OwnershipKey
where
    E: Fn() -> Fut,
    Fut: Future<Output = Vec<(String, Evidence)>>,
{
    retried(|| settle_once(client, namespace, accept_new, &evidence)).await
}

async fn settle_once<E, Fut>(
    client: &Client,
    namespace: &str,
    accept_new: bool,
    evidence: &E,
) -> Result<OwnershipKey, NoKey>
where
    E: Fn() -> Fut,
    Fut: Future<Output = Vec<(String, Evidence)>>,
{
    if let Some(key) = read(client, namespace).await? {
        return Ok(key);
    }
    let found = if accept_new {
        Vec::new()
    } else {
        evidence().await
    };
    match key_start::start(namespace, accept_new, &found) {
        Start::Make { replacing } => Ok(make(client, namespace, replacing).await?),
        Start::Refuse(why) => Err(NoKey::Refused(why)),
    }
}

/// The key once the reconciler has it (the snapshot controllers never make one).
pub async fn wait_for_key(client: &Client, namespace: &str) -> OwnershipKey {
    retried(|| read_once(client, namespace)).await
}

async fn read_once(client: &Client, namespace: &str) -> Result<OwnershipKey, NoKey> {
    match read(client, namespace).await? {
        Some(key) => Ok(key),
        None => Err(NoKey::Refused(format!(
            "waiting for the reconciler to make or find the ownership key Secret {namespace}/{OWNERSHIP_KEY_SECRET}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_parses_and_a_bad_one_is_named() {
        let s = new_secret("ops", false).expect("secret");
        assert!(parse(&s, "ops").is_ok_and(|k| k.replaced().is_none()));
        let mut replacing = new_secret("ops", true).expect("secret");
        replacing.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(
            parse(&replacing, "ops").is_ok_and(|k| k.replaced().is_some()),
            "a key replacing a lost one says so"
        );
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
