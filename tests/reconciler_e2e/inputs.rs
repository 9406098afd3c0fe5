//! What a Machine needs from elsewhere: StorageClasses, NetworkConfigurations, cloud-init Secrets; and a Machine that bypassed admission.

use crate::operator::{RESYNC, eventually};
#[allow(unused_imports)]
use crate::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use serde_json::{Value, json};
use std::collections::BTreeMap;

#[tokio::test]
async fn missing_storage_class_then_created() {
    let env = env("missing-sc").await;
    let class = format!("gold-{}", env.ns);
    env.create_machine(
        "disky",
        json!({"template": "small", "disks": [{"name": "data", "size": "5Gi", "storageClass": class}]}),
    )
    .await;
    let s = env
        .wait_status("disky", "StorageClassNotFound", |s| {
            condition(s, "StorageReady").1 == "StorageClassNotFound"
        })
        .await;
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    assert_eq!(
        condition(&s, "Ready"),
        cond("False", "StorageClassNotFound")
    );
    let note = env.wait_event("disky", "StorageClassNotFound").await;
    assert!(note.contains(&class), "{note}");
    assert!(
        env.vm("disky").await.is_none(),
        "no VM while a disk cannot be made"
    );
    assert_eq!(env.pvc_names().await, ["disky-root"]);

    storage_class(&env.client, &class).await;
    env.wait_vm("disky").await;
    let s = env
        .wait_status("disky", "claims made", |s| {
            condition(s, "StorageReady").1 == "PVCPending"
        })
        .await;
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    let data = env
        .api::<PersistentVolumeClaim>()
        .get("disky-data")
        .await
        .expect("data claim");
    assert_eq!(data.spec.unwrap().storage_class_name, Some(class));
}

#[tokio::test]
async fn missing_network_configuration_then_created() {
    let env = env("missing-nc").await;
    env.create_machine(
        "netty",
        json!({"networks": [{"name": "eth0", "networkName": "prod", "macAddress": "52:54:00:aa:bb:cc"}]}),
    )
    .await;
    let s = env
        .wait_status("netty", "NetworkConfigurationNotFound", |s| {
            condition(s, "NetworkReady").1 == "NetworkConfigurationNotFound"
        })
        .await;
    assert_eq!(
        condition(&s, "Ready"),
        cond("False", "NetworkConfigurationNotFound")
    );
    env.wait_event("netty", "NetworkConfigurationNotFound")
        .await;
    assert!(env.vm("netty").await.is_none());

    env.network_configuration("prod", "br-prod", 42).await;
    let vm = env.wait_vm("netty").await;
    let iface = &vm.spec.template.spec.domain.devices.interfaces[0];
    assert_eq!(iface.mac_address.as_deref(), Some("52:54:00:aa:bb:cc"));
    let nad = env
        .api::<NetworkAttachmentDefinition>()
        .get("prod")
        .await
        .expect("NAD");
    let config: Value = serde_json::from_str(nad.spec.config.as_deref().unwrap()).unwrap();
    assert_eq!(
        (config["bridge"].clone(), config["vlan"].clone()),
        (json!("br-prod"), json!(42))
    );
    let s = env
        .wait_status("netty", "network ready", |s| {
            condition(s, "NetworkReady").0 == "True"
        })
        .await;
    assert_eq!(
        condition(&s, "NetworkReady"),
        cond("True", "NetworkConfigured")
    );
}

#[tokio::test]
async fn cloud_init_secrets() {
    let env = env("secrets").await;
    const CONTENT: &str = "#cloud-config\npassword: do-not-leak-7f3a\n";
    env.create_machine(
        "booty",
        json!({"cloudInit": {"secretRef": {"name": "boot", "key": "config"}}}),
    )
    .await;
    let s = env
        .wait_status("booty", "SecretNotFound", |s| {
            condition(s, "VirtualMachineReady").1 == "SecretNotFound"
        })
        .await;
    // Reconciled, held back: Pending is only a Machine never reconciled.
    assert_eq!(s.phase.as_deref(), Some("Creating"));
    env.wait_event("booty", "SecretNotFound").await;

    let secrets = env.api::<Secret>();
    let mut secret = Secret {
        data: Some(BTreeMap::from([(
            "other".to_owned(),
            ByteString(b"x".to_vec()),
        )])),
        ..Secret::default()
    };
    secret.metadata.name = Some("boot".into());
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    env.wait_status("booty", "SecretKeyNotFound", |s| {
        condition(s, "VirtualMachineReady").1 == "SecretKeyNotFound"
    })
    .await;

    secrets
        .patch(
            "boot",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"config": CONTENT}})),
        )
        .await
        .expect("add key");
    let vm = env.wait_vm("booty").await;
    let derived = secrets
        .get("booty-cloudinit")
        .await
        .expect("derived Secret");
    assert_eq!(derived.data.unwrap()["userdata"].0, CONTENT.as_bytes());
    assert!(
        derived
            .metadata
            .owner_references
            .unwrap_or_default()
            .iter()
            .any(|o| o.kind == "Machine" && o.name == "booty")
    );
    let volume = &vm.spec.template.spec.volumes[1];
    assert_eq!(
        serde_json::to_value(volume).unwrap(),
        json!({"name": "cloudinitdisk", "cloudInitNoCloud": {"secretRef": {"name": "booty-cloudinit"}}})
    );

    // The key becomes `userdata`: the VM names the user's Secret and the derived one goes.
    secrets
        .patch(
            "boot",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"userdata": CONTENT}})),
        )
        .await
        .expect("add userdata");
    env.machines()
        .patch(
            "booty",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cloudInit": {"secretRef": {"key": "userdata"}}}})),
        )
        .await
        .expect("switch key");
    eventually(WAIT, "the VM to name Secret boot", || async {
        let vm = env.vm("booty").await?;
        let r = vm.spec.template.spec.volumes[1]
            .cloud_init_no_cloud
            .as_ref()?
            .user_data_secret_ref
            .clone()?;
        (r.name == "boot").then_some(())
    })
    .await;
    eventually(WAIT, "the derived Secret to go", || async {
        env.gone::<Secret>("booty-cloudinit").await.then_some(())
    })
    .await;

    // The content never shows outside Secrets.
    let vm_text = serde_json::to_string(&env.vm("booty").await).unwrap();
    let status_text = serde_json::to_string(&env.status("booty").await).unwrap();
    let events_text = format!("{:?}", env.events("booty").await);
    for text in [vm_text, status_text, events_text, operator_log()] {
        assert!(!text.contains("do-not-leak-7f3a"));
    }
}

#[tokio::test]
async fn a_machine_that_bypassed_admission_fails_cleanly() {
    let env = env("bypassed").await;
    env.create_machine("huge", json!({"template": "huge"}))
        .await;
    env.create_machine(
        "tiny",
        json!({"template": "small", "resources": {"memory": {"size": "10Mi"}}}),
    )
    .await;
    let s = env
        .wait_status("huge", "Failed", |s| s.phase.as_deref() == Some("Failed"))
        .await;
    assert_eq!(condition(&s, "Ready"), cond("False", "TemplateNotFound"));
    let message = &s.conditions[0].message;
    assert!(
        message.contains("spec.template") && message.contains("huge"),
        "{message}"
    );
    env.wait_event("huge", "TemplateNotFound").await;
    let s = env
        .wait_status("tiny", "Failed", |s| s.phase.as_deref() == Some("Failed"))
        .await;
    assert_eq!(condition(&s, "Ready"), cond("False", "InvalidSpec"));
    assert!(s.conditions[0].message.contains("64Mi"));

    // Nothing made, no finalizer, and no hot loop: nothing is written while it stays invalid.
    let machine = env.machines().get("huge").await.unwrap();
    assert!(machine.finalizers().is_empty());
    assert!(env.vm("huge").await.is_none() && env.pvc_names().await.is_empty());
    let before = versions(&env).await;
    tokio::time::sleep(RESYNC * 3).await;
    assert_eq!(versions(&env).await, before);

    // Fixed: it is reconciled like any other.
    env.machines()
        .patch(
            "huge",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": "large"}})),
        )
        .await
        .expect("fix");
    let vm = env.wait_vm("huge").await;
    assert_eq!(vm.spec.template.spec.domain.cpu.unwrap().cores, Some(4));
    env.wait_status("huge", "Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
}
