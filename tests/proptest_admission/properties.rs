//! Admission never panics, and valid Machines resolve as the spec says.

#[allow(unused_imports)]
use crate::*;
use kubevirt_operator::admission::review::{self};
use kubevirt_operator::api::Quantity;
use proptest::sample::select;
use serde_json::{Value, json};
use std::cmp::Ordering;

// ------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// (a) Arbitrary bytes: decode returns, never panics; a success is a usable review.
    #[test]
    fn decode_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(r) = review::decode(&bytes) {
            prop_assert!(!r.request.uid.is_empty());
        }
    }

    /// (a) Arbitrary JSON, bare and inside an AdmissionReview envelope.
    #[test]
    fn decode_never_panics_on_json(
        body in arb_json(),
        request in arb_json(),
        version in select(vec![review::V1, review::V1BETA1, "admission.k8s.io/v2", ""]),
    ) {
        let _ = review::decode(&serde_json::to_vec(&body).unwrap());
        let envelope = json!({"apiVersion": version, "kind": "AdmissionReview", "request": request});
        if let Ok(r) = review::decode(&serde_json::to_vec(&envelope).unwrap()) {
            prop_assert!(version == review::V1 || version == review::V1BETA1);
            prop_assert_eq!(r.api_version, version);
            prop_assert!(!r.request.uid.is_empty());
        }
    }

    /// (b) mutate and validate on anything shaped like a Machine, any operation: no panic, an
    /// answerable verdict, a patch that applies, and on CREATE both webhooks agree.
    #[test]
    fn mutate_and_validate_never_panic(
        object in any_machine(),
        old in proptest::option::of(any_machine()),
        operation in select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT", ""]),
        sub_resource in select(vec![None, Some("status"), Some("")]),
    ) {
        let a = admission("medium");
        let mut req = request(operation, Some(object.clone()), old);
        req.sub_resource = sub_resource.map(str::to_owned);
        let m = a.mutate(&req);
        assert_encodable(&m)?;
        if let (true, Some(patch)) = (m.allowed, &m.patch) {
            let mut o = object.clone();
            prop_assert!(json_patch::patch(&mut o, patch).is_ok(), "patch does not apply");
        }
        let v = a.validate(&req);
        assert_encodable(&v)?;
        prop_assert!(v.patch.is_none(), "validate never patches");
        if operation == "CREATE" && sub_resource.is_none() {
            prop_assert_eq!(m.allowed, v.allowed);
            prop_assert_eq!(
                m.status.and_then(|s| s.message),
                v.status.and_then(|s| s.message)
            );
        }
    }

    /// (c) + (d) Valid Machines: mutation matches the model of the spec, is idempotent on CREATE
    /// and on UPDATE, and its output validates.
    #[test]
    fn valid_machines_resolve_as_the_spec_says(
        spec in valid_spec(),
        default_template in select(TEMPLATES.to_vec()),
    ) {
        let a = admission(default_template);
        let once = mutated(&a, &request("CREATE", Some(machine(spec.clone())), None))?;
        prop_assert_eq!(&once["spec"], &model(&spec, default_template));
        prop_assert_eq!(&once["metadata"]["name"], "vm", "only spec and annotations change");

        let again = a.mutate(&request("CREATE", Some(once.clone()), None));
        prop_assert!(again.allowed && !has_patch(&again), "not idempotent: {:?}", again.patch);
        let on_update = a.mutate(&request("UPDATE", Some(once.clone()), Some(once.clone())));
        prop_assert!(on_update.allowed && !has_patch(&on_update), "not idempotent on UPDATE");

        let validated = a.validate(&request("CREATE", Some(once.clone()), None));
        prop_assert!(validated.allowed, "mutated Machine does not validate: {:?}", validated.status);
        let raw = a.validate(&request("CREATE", Some(machine(spec.clone())), None));
        prop_assert!(raw.allowed, "valid Machine denied: {:?}", raw.status);
    }

    /// (d) Changing the template on UPDATE re-derives every value the old template supplied and
    /// keeps what the user set; the root disk may then grow but not shrink.
    #[test]
    fn template_change_rederives_and_keeps_overrides(
        spec in valid_spec(),
        new_template in select(TEMPLATES.to_vec()),
    ) {
        let a = admission("medium");
        let stored = mutated(&a, &request("CREATE", Some(machine(spec.clone())), None))?;
        let mut edited = stored.clone();
        edited["spec"]["template"] = json!(new_template);
        let updated = mutated(&a, &request("UPDATE", Some(edited), Some(stored.clone())))?;
        let mut user = spec.clone();
        user["template"] = json!(new_template);
        let expected = model(&user, "medium");
        prop_assert_eq!(&updated["spec"], &expected);

        let verdict = a.validate(&request("UPDATE", Some(updated.clone()), Some(stored.clone())));
        let size = |m: &Value| Quantity::new(m["spec"]["disks"][0]["size"].as_str().unwrap());
        let grows_or_keeps = size(&stored).compare(&size(&updated)) != Some(Ordering::Greater);
        prop_assert_eq!(verdict.allowed, grows_or_keeps, "{:?}", verdict.status);
    }
}
