//! The consumer Pod a restore makes to bind claims of a `WaitForFirstConsumer` class
//! ([`crate::snapshots::restore::binder`]): it only has to be scheduled, never to do anything,
//! so it runs the pause image (`--restore-pause-image`) as restricted as a Pod can be, mounting the claims read-only.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;
use kube::api::ObjectMeta;

use crate::api::snapshots::MachineRestore;
use crate::reconciler::decide::desired::meta::{controller_ref, machine_labels};
use crate::snapshots::restore::binder;

/// The Pod of restore `r` mounting `claims`, controlled by it (deleted with it), running
/// `image` (`--restore-pause-image`).
pub fn pod(r: &MachineRestore, claims: &[String], image: &str) -> Pod {
    let quantity = |q: &str| Quantity(q.to_owned());
    Pod {
        metadata: ObjectMeta {
            name: Some(binder::name(&r.name_any())),
            namespace: r.namespace(),
            labels: Some(machine_labels(&r.spec.machine_name)),
            owner_references: controller_ref(r).map(|c| vec![c]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_owned()),
            termination_grace_period_seconds: Some(0),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(65535),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    ..SeccompProfile::default()
                }),
                ..PodSecurityContext::default()
            }),
            containers: vec![Container {
                name: "bind".to_owned(),
                image: Some(image.to_owned()),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    read_only_root_filesystem: Some(true),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".to_owned()]),
                        ..Capabilities::default()
                    }),
                    ..SecurityContext::default()
                }),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".to_owned(), quantity("1m")),
                        ("memory".to_owned(), quantity("8Mi")),
                    ])),
                    limits: Some(BTreeMap::from([("memory".to_owned(), quantity("16Mi"))])),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            // In the Pod's volumes only: the scheduler binds them, whatever their volume mode;
            // the container needs none of them.
            volumes: Some(
                (claims.iter().enumerate())
                    .map(|(i, c)| Volume {
                        name: format!("claim-{i}"),
                        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                            claim_name: c.clone(),
                            read_only: Some(true),
                        }),
                        ..Volume::default()
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }),
        status: None,
    }
}
