//! The derived cloud-init Secret through `decide`: every ownership case.

use super::*;

/// The same verdicts whether the derived Secret was read now or is remembered from this
/// process's last write (its metadata, annotations and all, is the evidence either way). A
/// remembered one is written over never: observe takes it only while it holds what is wanted.
#[test]
fn derived_secrets() {
    for (e, remembered) in ALL.into_iter().flat_map(|e| [(e, false), (e, true)]) {
        let mut o = observed(machine(
            "m",
            json!({"template": "small", "cloudInit": {"secretRef": {"name": "src", "key": "ud"}}}),
        ));
        o.source_secret = Some(Secret {
            data: Some(BTreeMap::from([(
                "ud".to_owned(),
                ByteString(b"#cloud-config".to_vec()),
            )])),
            ..Secret::default()
        });
        let found = existing(e).map(|(c, l)| meta("Secret", "m-cloudinit", c, l));
        o.derived_secret = if remembered {
            Derived::Remembered(Known::of(found.as_ref()))
        } else {
            Derived::Read(found.map(|metadata| {
                Box::new(Secret {
                    metadata,
                    ..Secret::default()
                })
            }))
        };
        let d = decide(&o, &Catalog::default(), &key());
        let writable = matches!(e, Absent | Ours);
        assert_eq!(
            d.secret.is_some(),
            writable && !remembered,
            "{e:?} remembered={remembered}"
        );
        assert_eq!(d.vm.is_some(), writable, "{e:?} remembered={remembered}");
        if !writable {
            assert_eq!(reasons(&d), ["SecretConflict"], "{e:?}");
        }
    }
}

/// Observe takes a remembered derived Secret without a read only while it holds the very
/// Secret `decide` writes: on the local cluster and, without owner references, on a remote one.
#[test]
fn observe_looks_for_the_hash_of_the_secret_decide_writes() {
    use crate::reconciler::decide::desired::cloud_init::derived_secret;
    for remote in [false, true] {
        let mut o = observed(machine(
            "m",
            json!({"template": "small", "cloudInit": {"secretRef": {"name": "src", "key": "ud"}}}),
        ));
        o.remote = remote;
        o.source_secret = Some(Secret {
            data: Some(BTreeMap::from([(
                "ud".to_owned(),
                ByteString(b"#cloud-config".to_vec()),
            )])),
            ..Secret::default()
        });
        o.derived_secret = Derived::Read(None);
        let d = decide(&o, &Catalog::default(), &key());
        let written = d.secret.as_ref().expect("a derived Secret");
        let source = (o.source_secret.as_ref(), remote);
        let want = derived_secret(&o.machine, &o.spec, source, &o.network_configurations);
        assert_eq!(want.as_ref(), Some(written), "remote={remote}");
    }
}
