//! The derived cloud-init Secret through `decide`: every ownership case.

use super::*;

/// The same verdicts whether the derived Secret was read now or is remembered from this
/// process's last write (its metadata, annotations and all, is the evidence either way).
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
            writable,
            "{e:?} remembered={remembered}"
        );
        assert_eq!(d.vm.is_some(), writable, "{e:?} remembered={remembered}");
        if !writable {
            assert_eq!(reasons(&d), ["SecretConflict"], "{e:?}");
        }
    }
}
