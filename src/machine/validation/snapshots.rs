//! `spec.snapshots`: a five-field cron schedule (UTC) and `keep` within 1-100.

use crate::api::MachineSpec;
use crate::api::snapshots::{KEEP, MAX_SCHEDULE, parse_schedule};

use super::super::field_error::{FieldError, FieldPath};
use super::Outcome;
use super::resources::check_range;

pub fn validate(out: &mut Outcome, spec_path: &FieldPath, spec: &MachineSpec) {
    let Some(snapshots) = &spec.snapshots else {
        return;
    };
    let path = spec_path.child("snapshots");
    let schedule_path = path.child("schedule");
    if snapshots.schedule.trim().is_empty() {
        out.errors.push(FieldError::required(
            &schedule_path,
            "a cron schedule in UTC, e.g. \"0 2 * * *\"",
        ));
    } else if snapshots.schedule.len() > MAX_SCHEDULE {
        out.errors
            .push(FieldError::too_long(&schedule_path, MAX_SCHEDULE));
    } else if let Err(why) = parse_schedule(&snapshots.schedule) {
        out.errors.push(FieldError::invalid(
            &schedule_path,
            snapshots.schedule.as_str(),
            why,
        ));
    }
    check_range(out, &path.child("keep"), snapshots.keep, KEEP);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        super::super::rule_errors(validate, spec)
    }

    #[test]
    fn a_schedule_is_five_cron_fields_and_keep_is_within_bounds() {
        for ok in [
            json!({}),
            json!({"snapshots": {"schedule": "0 2 * * *"}}),
            json!({"snapshots": {"schedule": "*/15 * * * MON-FRI", "keep": 1}}),
            json!({"snapshots": {"schedule": "30 3 1 * *", "keep": 100}}),
        ] {
            assert_eq!(errors(ok.clone()), Vec::<String>::new(), "{ok}");
        }
        for (bad, field) in [
            (
                json!({"snapshots": {"schedule": ""}}),
                "spec.snapshots.schedule",
            ),
            (
                json!({"snapshots": {"schedule": "daily"}}),
                "spec.snapshots.schedule",
            ),
            (
                json!({"snapshots": {"schedule": "0 0 2 * * *"}}),
                "spec.snapshots.schedule",
            ),
            (
                json!({"snapshots": {"schedule": "61 2 * * *"}}),
                "spec.snapshots.schedule",
            ),
            (
                json!({"snapshots": {"schedule": "0 2 * * *", "keep": 0}}),
                "spec.snapshots.keep",
            ),
            (
                json!({"snapshots": {"schedule": "0 2 * * *", "keep": 101}}),
                "spec.snapshots.keep",
            ),
        ] {
            let errors = errors(bad.clone());
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert!(errors[0].starts_with(field), "{bad}: {errors:?}");
        }
    }
}
