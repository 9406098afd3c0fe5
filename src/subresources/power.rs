//! The power buttons relayed to KubeVirt (pure): which subresource a path asks for, and which
//! VMI on which cluster it acts on.

use crate::api::Machine;

/// A Machine subresource relayed as-is to the VMI's KubeVirt subresource of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Power {
    Pause,
    Unpause,
    SoftReboot,
}

impl Power {
    pub const ALL: [Power; 3] = [Power::Pause, Power::Unpause, Power::SoftReboot];

    /// The subresource's name, ours and KubeVirt's (`virtualmachineinstances/<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Power::Pause => "pause",
            Power::Unpause => "unpause",
            Power::SoftReboot => "softreboot",
        }
    }

    pub fn parse(subresource: &str) -> Option<Power> {
        Power::ALL.into_iter().find(|p| p.as_str() == subresource)
    }

    /// The reason of the Event recorded on the Machine once KubeVirt accepted it.
    pub fn reason(self) -> &'static str {
        match self {
            Power::Pause => "Paused",
            Power::Unpause => "Unpaused",
            Power::SoftReboot => "SoftRebooted",
        }
    }
}

/// The VMI a power button acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The KubevirtConfig whose cluster runs it; None: the operator's own cluster.
    pub cluster: Option<String>,
    /// Its namespace there: the Machine's (remote namespaces are named like theirs).
    pub namespace: String,
    pub vmi: String,
}

/// Why a Machine offers no VMI to act on (answered 409 Conflict).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NoTarget {
    #[error("Machine {0} is being deleted")]
    Deleting(String),
    #[error("Machine {0} has no running VM (status.vmiName is unset)")]
    NoVmi(String),
}

/// The VMI of `machine`, as its status records it.
pub fn target(machine: &Machine) -> Result<Target, NoTarget> {
    let name = machine.metadata.name.clone().unwrap_or_default();
    if machine.metadata.deletion_timestamp.is_some() {
        return Err(NoTarget::Deleting(name));
    }
    let status = machine.status.as_ref();
    let vmi = status
        .and_then(|s| s.vmi_name.clone())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| NoTarget::NoVmi(name.clone()))?;
    Ok(Target {
        cluster: status.and_then(|s| s.cluster.clone()),
        namespace: machine.metadata.namespace.clone().unwrap_or_default(),
        vmi,
    })
}

/// KubeVirt's path for `power` on `target`.
pub fn kubevirt_path(power: Power, target: &Target) -> String {
    format!(
        "/apis/subresources.kubevirt.io/v1/namespaces/{}/virtualmachineinstances/{}/{}",
        target.namespace,
        target.vmi,
        power.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MachineStatus;

    fn machine(vmi: Option<&str>, cluster: Option<&str>, deleting: bool) -> Machine {
        let mut m: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "vitistack.io/v1alpha1",
            "kind": "Machine",
            "metadata": { "name": "vm-1", "namespace": "team-a" },
            "spec": {},
        }))
        .expect("a Machine");
        m.status = Some(MachineStatus {
            vmi_name: vmi.map(str::to_owned),
            cluster: cluster.map(str::to_owned),
            ..Default::default()
        });
        if deleting {
            m.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        m
    }

    #[test]
    fn a_button_acts_on_the_machines_vmi_on_its_cluster() {
        let target = |vmi, cluster| Target {
            cluster,
            namespace: "team-a".to_owned(),
            vmi,
        };
        let cases = [
            (
                "local",
                machine(Some("vm-1"), None, false),
                Ok(target("vm-1".into(), None)),
            ),
            (
                "remote",
                machine(Some("vm-1"), Some("dc1"), false),
                Ok(target("vm-1".into(), Some("dc1".into()))),
            ),
            (
                "no VMI",
                machine(None, None, false),
                Err(NoTarget::NoVmi("vm-1".into())),
            ),
            (
                "empty VMI",
                machine(Some(""), None, false),
                Err(NoTarget::NoVmi("vm-1".into())),
            ),
            (
                "deleting",
                machine(Some("vm-1"), None, true),
                Err(NoTarget::Deleting("vm-1".into())),
            ),
        ];
        for (case, m, want) in cases {
            assert_eq!(super::target(&m), want, "{case}");
        }
    }

    #[test]
    fn each_button_is_kubevirts_subresource_of_its_name() {
        let t = Target {
            cluster: None,
            namespace: "team-a".into(),
            vmi: "vm-1".into(),
        };
        for power in Power::ALL {
            assert_eq!(Power::parse(power.as_str()), Some(power));
            assert!(kubevirt_path(power, &t).ends_with(&format!("/vm-1/{}", power.as_str())));
        }
        assert_eq!(Power::parse("console"), None);
        assert_eq!(
            kubevirt_path(Power::SoftReboot, &t),
            "/apis/subresources.kubevirt.io/v1/namespaces/team-a/virtualmachineinstances/vm-1/softreboot"
        );
    }
}
