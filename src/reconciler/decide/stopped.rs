//! A Machine stopped by `machines/stop` or `machines/forcestop` (pure): while it carries
//! `vitistack.io/stopped-at`, the spec the reconciler works from says `runStrategy: Halted`,
//! whatever the Machine's own spec says. The VM is therefore halted, a restart is not made and
//! the status reports it halted; `machines/start` removes the annotation and the spec's run
//! strategy is back in force. The spec itself is never written, so whoever owns it (a GitOps
//! tool applying its manifest) does not undo the stop, nor does the stop undo their spec.

use std::collections::BTreeMap;

use crate::api::MachineSpec;
use crate::api::names::STOPPED_AT_ANNOTATION;
use crate::api::operations::RUN_STRATEGY_HALTED;

/// Whether the Machine's annotations hold a stop (any value: admission refuses anything but a
/// time, and one stored past it still means the user asked for a stop).
pub fn is_stopped(annotations: &BTreeMap<String, String>) -> bool {
    annotations.contains_key(STOPPED_AT_ANNOTATION)
}

/// `spec` with the stop in force: Halted while stopped, unchanged otherwise.
pub fn held(mut spec: MachineSpec, annotations: &BTreeMap<String, String>) -> MachineSpec {
    if is_stopped(annotations) {
        spec.run_strategy = Some(RUN_STRATEGY_HALTED.to_owned());
        // `running` must agree with a run strategy or be unset (KubeVirt's rule).
        spec.running = None;
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::operations::run_strategy;

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
        for (case, spec, annotations, want) in cases {
            let out = held(spec.clone(), annotations);
            let got = run_strategy(out.run_strategy.as_deref(), out.running);
            assert_eq!(got, want, "{case}");
            if is_stopped(annotations) {
                assert_eq!(out.running, None, "{case}: running agrees (unset)");
            } else {
                assert_eq!(out, spec, "{case}: untouched");
            }
        }
    }
}
