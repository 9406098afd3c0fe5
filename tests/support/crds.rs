//! Installing CustomResourceDefinitions from YAML files and waiting until they are served.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde::Deserialize;

const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// Every `*.yaml` under `tests/fixtures/crds/`, sorted.
pub fn crd_fixtures() -> Result<Vec<PathBuf>> {
    let dir = super::fixture("crds");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    paths.sort();
    Ok(paths)
}

fn read_crds(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut crds = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(doc)
            .with_context(|| format!("parsing {}", path.display()))?;
        if value.is_null() {
            continue;
        }
        if value["kind"] != "CustomResourceDefinition" {
            bail!(
                "{}: expected only CustomResourceDefinitions, found kind {}",
                path.display(),
                value["kind"]
            );
        }
        crds.push(value);
    }
    Ok(crds)
}

/// Creates or replaces each CRD as written (raw JSON: no typed round trip drops or adds fields;
/// server-side apply is not used because v1.20 rejects fields it does not know, such as
/// `x-kubernetes-validations`, while create and update prune them).
pub async fn install<P: AsRef<Path>>(client: &Client, paths: &[P]) -> Result<Vec<String>> {
    let raw: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<CustomResourceDefinition>(&()),
    );
    let mut names = Vec::new();
    for path in paths {
        let path = path.as_ref();
        for value in read_crds(path)? {
            let crd: DynamicObject = serde_json::from_value(value)
                .with_context(|| format!("{}: not a Kubernetes object", path.display()))?;
            let name = crd
                .metadata
                .name
                .clone()
                .ok_or_else(|| anyhow!("{}: a CRD without metadata.name", path.display()))?;
            create_or_replace(&raw, &name, crd)
                .await
                .with_context(|| format!("installing CRD {name} from {}", path.display()))?;
            names.push(name);
        }
    }
    for name in &names {
        wait_until_served(client, name).await?;
    }
    Ok(names)
}

async fn create_or_replace(
    api: &Api<DynamicObject>,
    name: &str,
    mut crd: DynamicObject,
) -> Result<()> {
    // A starved etcd answers "request timed out" (500): the write is tried again, and one that
    // landed after all shows as a conflict and is replaced.
    let mut server_errors: u64 = 0;
    let mut attempt = 0;
    while attempt < 5 {
        attempt += 1;
        let answer = match api.create(&PostParams::default(), &crd).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let current = api.get(name).await?;
                crd.metadata.resource_version = current.metadata.resource_version;
                api.replace(name, &PostParams::default(), &crd)
                    .await
                    .map(drop)
            }
            Err(e) => Err(e),
        };
        match answer {
            Ok(()) => return Ok(()),
            // Someone else (a parallel test) updated it in between: read again.
            Err(kube::Error::Api(e)) if e.code == 409 => crd.metadata.resource_version = None,
            Err(kube::Error::Api(e)) if e.code >= 500 && server_errors < 10 => {
                server_errors += 1;
                attempt -= 1;
                crd.metadata.resource_version = None;
                tokio::time::sleep(Duration::from_millis(200 * server_errors)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    bail!("kept conflicting with concurrent writers")
}

/// Established and NamesAccepted, and every served version listed by discovery (the point where
/// creating custom objects works).
async fn wait_until_served(client: &Client, name: &str) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = Instant::now() + ESTABLISH_TIMEOUT;
    loop {
        let last = match check_served(client, &api, name).await {
            Ok(None) => return Ok(()),
            Ok(Some(why)) => why,
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() > deadline {
            bail!("CRD {name} not served after {ESTABLISH_TIMEOUT:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// None when served, else why not.
async fn check_served(
    client: &Client,
    api: &Api<CustomResourceDefinition>,
    name: &str,
) -> Result<Option<String>> {
    let crd = api.get(name).await?;
    let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
    for wanted in ["NamesAccepted", "Established"] {
        match conditions.iter().find(|c| c.type_ == wanted) {
            Some(c) if c.status == "True" => {}
            Some(c) => {
                return Ok(Some(format!(
                    "{wanted}={} ({})",
                    c.status,
                    c.message.clone().unwrap_or_default()
                )));
            }
            None => return Ok(Some(format!("no {wanted} condition yet"))),
        }
    }
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let group_version = format!("{}/{}", crd.spec.group, version.name);
        let listed = client
            .list_api_group_resources(&group_version)
            .await
            .map(|list| {
                list.resources
                    .iter()
                    .any(|r| r.name == crd.spec.names.plural)
            })
            .unwrap_or(false);
        if !listed {
            return Ok(Some(format!(
                "{} not yet in discovery for {group_version}",
                crd.spec.names.plural
            )));
        }
    }
    Ok(None)
}
