//! `spec.runStrategy`, and its agreement with `running` (KubeVirt's two ways of saying whether
//! the VM runs; both set, they must say the same).

use crate::api::MachineSpec;
use crate::api::operations::{RUN_STRATEGIES, RUN_STRATEGY_ALWAYS, RUN_STRATEGY_HALTED};

use super::super::field_error::{FieldError, FieldPath};
use super::{Outcome, check_enum};

pub fn validate(out: &mut Outcome, spec_path: &FieldPath, spec: &MachineSpec) {
    let strategy = spec.run_strategy.as_deref();
    check_enum(
        out,
        &spec_path.child("runStrategy"),
        strategy,
        RUN_STRATEGIES,
    );
    let (Some(strategy), Some(running)) = (strategy, spec.running) else {
        return;
    };
    let agrees = match strategy {
        RUN_STRATEGY_ALWAYS => running,
        RUN_STRATEGY_HALTED => !running,
        _ => false,
    };
    if !agrees {
        out.errors.push(FieldError::invalid(
            &spec_path.child("running"),
            running,
            format!(
                "must agree with spec.runStrategy {strategy:?} (true is Always, false is \
                 Halted), or be unset: remove spec.running to use runStrategy alone"
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        super::super::rule_errors(validate, spec)
    }

    #[test]
    fn run_strategy_and_running_must_agree() {
        for ok in [
            json!({"runStrategy": "Manual"}),
            json!({"runStrategy": "RerunOnFailure"}),
            json!({"runStrategy": "Always", "running": true}),
            json!({"runStrategy": "Halted", "running": false}),
            json!({"running": false}),
        ] {
            assert!(errors(ok.clone()).is_empty(), "{ok}");
        }
        let e = errors(json!({"runStrategy": "Halted", "running": true}));
        assert!(
            e[0].starts_with(
                "spec.running: Invalid value: true: must agree with spec.runStrategy \"Halted\""
            ),
            "{e:?}"
        );
        assert_eq!(
            errors(json!({"runStrategy": "Manual", "running": true})).len(),
            1
        );
        let e = errors(json!({"runStrategy": "Sometimes"}));
        assert!(
            e[0].starts_with("spec.runStrategy: Unsupported value: \"Sometimes\""),
            "{e:?}"
        );
    }
}
