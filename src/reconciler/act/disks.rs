//! The disks' own writes, apart from the spec applies: releasing claims and DataVolumes for
//! `retain-disks` (metadata only), and growing the claims CDI made.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::names::RELEASE_ANNOTATION;
use crate::reconciler::FIELD_MANAGER;
use crate::reconciler::apis::cdi::DataVolume;
use crate::reconciler::decide::problem::{Kind, Problem};
use crate::reconciler::decide::release::Release;
use crate::reconciler::error::api_message;

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Frees one object of the Machine's owner references; guarded by the version they were read at.
pub async fn release(client: &Client, ns: &str, r: &Release) -> Result<(), kube::Error> {
    let mut metadata = json!({
        "ownerReferences": r.owners,
        "resourceVersion": r.resource_version,
    });
    if let Some(proof) = &r.release_proof {
        metadata["annotations"] = json!({ RELEASE_ANNOTATION: proof });
    }
    let patch = Patch::Merge(json!({ "metadata": metadata }));
    match r.kind {
        Kind::DataVolume => {
            let api: Api<DataVolume> = Api::namespaced(client.clone(), ns);
            api.patch(&r.name, &params(), &patch).await.map(drop)?;
        }
        _ => {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
            api.patch(&r.name, &params(), &patch).await.map(drop)?;
        }
    }
    tracing::info!(object = %r.name, kind = r.kind.as_str(), "retained disk, released from the Machine");
    Ok(())
}

/// Every release of `releases`; each failure is a `ReleaseFailed` problem.
pub async fn release_all(client: &Client, ns: &str, releases: &[Release]) -> Vec<Problem> {
    let results = futures::future::join_all(releases.iter().map(|r| release(client, ns, r))).await;
    releases
        .iter()
        .zip(results)
        .filter_map(|(r, result)| {
            let e = result.err()?;
            Some(Problem::ReleaseFailed {
                kind: r.kind,
                name: r.name.clone(),
                message: api_message(&e),
            })
        })
        .collect()
}

/// Grows each of CDI's claims `(name, size)`; each refusal is a `PVCFailed` problem on it.
pub async fn grow_all(client: &Client, ns: &str, grow: &[(String, String)]) -> Vec<Problem> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let writes = grow.iter().map(|(name, size)| {
        let patch = json!({"spec": {"resources": {"requests": {"storage": size}}}});
        let api = api.clone();
        async move {
            api.patch(name, &params(), &Patch::Merge(patch))
                .await
                .map(|_| tracing::info!(pvc = %name, size = %size, "grew CDI's claim"))
                .map_err(|e| Problem::WriteFailed {
                    kind: Kind::Claim,
                    name: name.clone(),
                    message: api_message(&e),
                })
        }
    });
    futures::future::join_all(writes)
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect()
}
