//! The spec a reconcile works from, and the class that sizes it.
//!
//! A Machine stopped by `machines/stop` or `machines/forcestop` is held here too: while it
//! carries `vitistack.io/stopped-at`, the spec the reconciler works from says
//! `runStrategy: Halted`, whatever the Machine's own spec says. The VM is therefore halted, a
//! restart is not made and the status reports it halted; `machines/start` removes the
//! annotation and the spec's run strategy is back in force. The spec itself is never written,
//! so whoever owns it (a GitOps tool applying its manifest) does not undo the stop, nor does
//! the stop undo their spec.

use kube::ResourceExt;

use crate::api::names::{CLASS_ANNOTATION, STOPPED_AT_ANNOTATION};
use crate::api::operations::RUN_STRATEGY_HALTED;
use crate::api::{Machine, MachineSpec};
use crate::machine::classes::{Class, Use, choose, recorded_class};
use crate::machine::resolve::resolve_in;
use crate::machine::{Catalog, DEFAULTS_ANNOTATION, FieldError};

/// A stored Machine resolved, and its class (or why it has none).
#[derive(Clone, Debug)]
pub struct Sized {
    pub spec: MachineSpec,
    pub class: Result<Class, FieldError>,
}

/// Resolved like the webhook would, so a Machine that bypassed admission is treated the same as
/// one that went through it; from the class recorded in the Machine when there is one, so
/// editing, disabling or deleting its class never changes a Machine (or its VM). Halted while
/// the Machine is stopped by `machines/stop` (the module's doc).
pub fn sized(machine: &Machine, catalog: &Catalog) -> Sized {
    let annotations = machine.annotations();
    let defaults = annotations.get(DEFAULTS_ANNOTATION);
    let recorded = defaults.and_then(|s| serde_json::from_str::<MachineSpec>(s).ok());
    let template = machine.spec.template.as_deref();
    let kept = recorded_class(
        annotations.get(CLASS_ANNOTATION).map(String::as_str),
        defaults.is_some(),
        template,
    );
    let name = template.unwrap_or_else(|| catalog.default_name());
    let class = choose(catalog, name, Use::Kept(kept.as_ref())).cloned();
    let mut spec = resolve_in(&machine.spec, recorded.as_ref(), name, class.as_ref().ok()).spec;
    // Held by a stop (the module's doc), inline: nothing returns here after the resolution.
    if annotations.contains_key(STOPPED_AT_ANNOTATION) {
        spec.run_strategy = Some(RUN_STRATEGY_HALTED.to_owned());
        // `running` must agree with a run strategy or be unset (KubeVirt's rule).
        spec.running = None;
    }
    Sized { spec, class }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::MachineClass;
    use std::collections::BTreeMap;

    use crate::api::operations::run_strategy;

    fn xlarge(cores: i64) -> MachineClass {
        serde_json::from_value(json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": "xlarge"},
            "spec": {"cpu": {"cores": cores}, "memory": {"size": "48Gi"},
                     "disks": [{"name": "root", "size": "100Gi", "storageClass": "fast"}]}
        }))
        .expect("class")
    }

    fn cores(s: &Sized) -> Option<i64> {
        s.spec.resources.as_ref()?.cpu.as_ref()?.cores
    }

    /// The class as recorded wins over the class as it is now, and outlives it.
    #[test]
    fn a_recorded_class_outlives_edits_and_deletion() {
        let (v1, _) = Catalog::default().with_class_objects(&[xlarge(4)]);
        let (v2, _) = Catalog::default().with_class_objects(&[xlarge(8)]);
        let (gone, _) = Catalog::default().with_class_objects(&[]);
        let mut m = Machine::new(
            "m",
            serde_json::from_value(json!({"template": "xlarge"})).unwrap(),
        );
        // Never admitted: sized from the class as it is now, or not at all.
        assert_eq!(cores(&sized(&m, &v1)), Some(4));
        assert_eq!(cores(&sized(&m, &v2)), Some(8));
        assert!(sized(&m, &gone).class.is_err());
        // Admitted under v1: the webhook stored the record.
        let class = v1.class("xlarge").unwrap();
        let resolved = resolve_in(&m.spec, None, "xlarge", Some(class));
        m.spec = resolved.spec.clone();
        m.metadata.annotations = Some(
            [
                (
                    DEFAULTS_ANNOTATION.to_owned(),
                    serde_json::to_string(&resolved.from_template).unwrap(),
                ),
                (CLASS_ANNOTATION.to_owned(), class.record.clone()),
            ]
            .into(),
        );
        for catalog in [&v1, &v2, &gone] {
            let s = sized(&m, catalog);
            assert_eq!(s.spec, resolved.spec);
            assert_eq!(s.class.map(|c| c.cores), Ok(4));
        }
    }

    /// Admitted before classes existed (a defaults record only): the built-in it was sized
    /// from, whatever a MachineClass of that name says now.
    #[test]
    fn a_machine_from_before_classes_keeps_its_built_in_size() {
        let big_medium: MachineClass = serde_json::from_value(json!({
            "metadata": {"name": "medium"},
            "spec": {"cpu": {"cores": 16}, "memory": {"size": "64Gi"}, "enabled": false}
        }))
        .unwrap();
        let (catalog, _) = Catalog::default().with_class_objects(&[big_medium]);
        let old = resolve_in(
            &MachineSpec::default(),
            None,
            "medium",
            Catalog::default().class("medium"),
        );
        let mut m = Machine::new("m", old.spec.clone());
        m.metadata.annotations = Some(
            [(
                DEFAULTS_ANNOTATION.to_owned(),
                serde_json::to_string(&old.from_template).unwrap(),
            )]
            .into(),
        );
        let s = sized(&m, &catalog);
        assert_eq!(s.spec, old.spec);
        assert_eq!(cores(&s), Some(2));
    }

    #[test]
    fn a_stop_halts_whatever_the_spec_says_and_start_gives_it_back() {
        let stopped: BTreeMap<String, String> = [(
            STOPPED_AT_ANNOTATION.to_owned(),
            "2026-11-28T15:00:00Z".to_owned(),
        )]
        .into();
        let other: BTreeMap<String, String> =
            [("vitistack.io/restarted-at".to_owned(), "x".to_owned())].into();
        let spec = |strategy: Option<&str>, running: Option<bool>| MachineSpec {
            run_strategy: strategy.map(str::to_owned),
            running,
            ..Default::default()
        };
        // (case, spec, annotations, the run strategy in force)
        let cases = [
            (
                "Always, stopped",
                spec(Some("Always"), None),
                &stopped,
                "Halted",
            ),
            (
                "running true, stopped",
                spec(None, Some(true)),
                &stopped,
                "Halted",
            ),
            (
                "Manual, stopped",
                spec(Some("Manual"), None),
                &stopped,
                "Halted",
            ),
            (
                "RerunOnFailure, stopped",
                spec(Some("RerunOnFailure"), Some(true)),
                &stopped,
                "Halted",
            ),
            (
                "Halted, stopped",
                spec(Some("Halted"), Some(false)),
                &stopped,
                "Halted",
            ),
            (
                "Always, started",
                spec(Some("Always"), None),
                &other,
                "Always",
            ),
            (
                "running true, started",
                spec(None, Some(true)),
                &other,
                "Always",
            ),
            (
                "running false, started",
                spec(None, Some(false)),
                &other,
                "Halted",
            ),
            (
                "Manual, started",
                spec(Some("Manual"), None),
                &other,
                "Manual",
            ),
        ];
        let catalog = Catalog::default();
        for (case, spec, annotations, want) in cases {
            let mut m = Machine::new("m", spec);
            m.metadata.annotations = Some(annotations.clone());
            let out = sized(&m, &catalog).spec;
            let got = run_strategy(out.run_strategy.as_deref(), out.running);
            assert_eq!(got, want, "{case}");
            if annotations.contains_key(STOPPED_AT_ANNOTATION) {
                assert_eq!(out.running, None, "{case}: running agrees (unset)");
            } else {
                assert_eq!(out.running, m.spec.running, "{case}: untouched");
            }
        }
    }
}
