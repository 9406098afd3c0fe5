//! The VM's volume count. KubeVirt's VirtualMachine schema allows 256 disks and 256 volumes, and
//! the Machine's `status.disks` 256 entries: the VM gets one volume per disk and CD-ROM plus the
//! cloud-init disk, the status one entry per disk and CD-ROM. Bounding the total by 256 keeps
//! both writes within what the API server accepts (before issue 25, a Machine with 256 disks and
//! cloud-init was admitted, then its VM refused; with CD-ROMs besides, its status write too).

use crate::api::machine::{MAX_DISKS, MachineSpec};
use crate::api::source::MAX_CDROMS;

use super::super::classes::Class;
use super::super::field_error::{FieldError, FieldPath};

/// The most volumes a VM may have (KubeVirt's `maxItems` on disks and volumes).
pub const MAX_VOLUMES: usize = MAX_DISKS;

/// How many volumes the VM gets: the disks (the template's included), the CD-ROMs, cloud-init.
pub fn volume_count(spec: &MachineSpec, template: Option<&Class>) -> (usize, usize, bool) {
    let from_template = template.map_or(0, |t| {
        t.disks
            .iter()
            .filter(|c| !spec.disks.iter().any(|d| d.name == c.name))
            .count()
    });
    let cloud_init = spec.cloud_init.as_ref().is_some_and(|ci| {
        ci.user_data.is_some() || ci.network_data.is_some() || ci.secret_ref.is_some()
    });
    (
        spec.disks.len() + from_template,
        spec.cdroms.len(),
        cloud_init,
    )
}

/// The error when the volumes together exceed [`MAX_VOLUMES`]; none when a list is over its own
/// bound, which is reported on that list.
pub fn volume_count_error(spec: &MachineSpec, template: Option<&Class>) -> Option<FieldError> {
    if spec.disks.len() > MAX_DISKS || spec.cdroms.len() > MAX_CDROMS {
        return None;
    }
    let (disks, cdroms, cloud_init) = volume_count(spec, template);
    let total = disks + cdroms + usize::from(cloud_init);
    (total > MAX_VOLUMES).then(|| {
        FieldError::forbidden(
            &FieldPath::new("spec"),
            format!(
                "the VM would have {total} volumes ({disks} disks, {cdroms} CD-ROMs{}): \
                 KubeVirt allows at most {MAX_VOLUMES} per VM, disks, CD-ROMs and the cloud-init \
                 disk together",
                if cloud_init {
                    ", the cloud-init disk"
                } else {
                    ""
                }
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machine::Catalog;

    fn spec(disks: usize, cdroms: usize, cloud_init: bool) -> MachineSpec {
        let disks: Vec<_> = (0..disks)
            .map(|i| json!({"name": format!("d{i}"), "size": "1Gi"}))
            .collect();
        let cdroms: Vec<_> = (0..cdroms)
            .map(|i| json!({"name": format!("c{i}"), "source": {"http": {"url": "https://x/i.iso"}}}))
            .collect();
        let mut s = json!({"template": "small", "disks": disks, "cdroms": cdroms});
        if cloud_init {
            s["cloudInit"] = json!({"userData": "#cloud-config"});
        }
        serde_json::from_value(s).expect("spec")
    }

    #[test]
    fn disks_cdroms_and_cloud_init_together_fit_in_256() {
        let catalog = Catalog::default();
        let small = catalog.class("small");
        // small's root disk counts too: 255 + root = 256.
        for (disks, cdroms, ci, ok) in [
            (255, 0, false, true),
            (254, 0, true, true),
            (250, 4, true, true),
            (251, 4, true, false),
            (255, 0, true, false),
            (252, 4, true, false),
            (256, 0, false, false),
            (257, 0, false, true), // spec.disks: Too many, said once
        ] {
            let e = volume_count_error(&spec(disks, cdroms, ci), small);
            assert_eq!(e.is_none(), ok, "{disks} {cdroms} {ci}: {e:?}");
        }
        assert_eq!(
            volume_count_error(&spec(252, 4, true), small).map(|e| e.to_string()),
            Some(
                "spec: Forbidden: the VM would have 258 volumes (253 disks, 4 CD-ROMs, the cloud-init disk): KubeVirt allows at most 256 per VM, disks, CD-ROMs and the cloud-init disk together"
                    .to_owned()
            )
        );
    }
}
