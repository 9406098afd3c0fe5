//! Restarts asked through `vitistack.io/restarted-at` (pure): a new value restarts the VM once,
//! by deleting the VMI its VM controls (KubeVirt's VM controller starts a new one; no aggregated
//! KubeVirt API is needed), and is recorded in `status.lastRestart` so it is never repeated.
//!
//! Exactly once even if the status write after the deletion fails: only a VMI created before
//! the requested time is deleted, and the one KubeVirt starts afterwards is newer.

use k8s_openapi::jiff::Timestamp;

use crate::api::operations::RUN_STRATEGY_HALTED;

/// The VMI as the restart sees it.
pub struct Vmi<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    pub created: Option<Timestamp>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restart {
    /// The VMI to delete (name, uid as a precondition).
    pub delete_vmi: Option<(String, String)>,
    /// `status.lastRestart`.
    pub last_restart: Option<String>,
}

/// What a reconcile does about `requested` (the annotation), given the last value acted on, the
/// VMI the Machine's VM controls, and the run strategy.
pub fn decide(
    requested: Option<&str>,
    last: Option<&str>,
    vmi: Option<&Vmi>,
    strategy: &str,
) -> Restart {
    let keep = Restart {
        delete_vmi: None,
        last_restart: last.map(str::to_owned),
    };
    let Some(requested) = requested.filter(|r| Some(*r) != last) else {
        return keep;
    };
    // Refused at admission; stored past it, it is ignored rather than guessed at.
    let Ok(at) = requested.parse::<Timestamp>() else {
        return keep;
    };
    let recorded = Some(requested.to_owned());
    let stale = vmi.filter(|v| v.created.is_some_and(|c| c < at));
    match stale {
        // A halted Machine has nothing to restart; the value is recorded all the same.
        Some(v) if strategy != RUN_STRATEGY_HALTED => Restart {
            delete_vmi: Some((v.name.to_owned(), v.uid.to_owned())),
            last_restart: recorded,
        },
        _ => Restart {
            delete_vmi: None,
            last_restart: recorded,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2026-11-25T10:00:00Z";

    fn vmi(created: &str) -> Vmi<'static> {
        Vmi {
            name: "m",
            uid: "u1",
            created: created.parse().ok(),
        }
    }

    #[test]
    fn a_new_value_deletes_an_older_vmi_once_and_is_recorded() {
        let old = vmi("2026-11-25T09:00:00Z");
        let fresh = vmi("2026-11-25T10:00:05Z");
        let deleted = Some(("m".to_owned(), "u1".to_owned()));
        let cases = [
            // (requested, last, vmi, strategy) -> (delete?, recorded)
            (
                Some(T),
                None,
                Some(&old),
                "Always",
                deleted.clone(),
                Some(T),
            ),
            (
                Some(T),
                Some("2026-11-01T00:00:00Z"),
                Some(&old),
                "Manual",
                deleted,
                Some(T),
            ),
            // Acted on already: nothing, whatever the VMI.
            (Some(T), Some(T), Some(&old), "Always", None, Some(T)),
            // The VMI KubeVirt started after the deletion (the status write had failed).
            (Some(T), None, Some(&fresh), "Always", None, Some(T)),
            // Nothing running, or halted: recorded, never repeated.
            (Some(T), None, None, "Always", None, Some(T)),
            (Some(T), None, Some(&old), "Halted", None, Some(T)),
            // Not a time (stored past admission): ignored.
            (Some("soon"), Some(T), Some(&old), "Always", None, Some(T)),
            (None, Some(T), Some(&old), "Always", None, Some(T)),
            (None, None, Some(&old), "Always", None, None),
        ];
        for (requested, last, v, strategy, delete, recorded) in cases {
            let got = decide(requested, last, v, strategy);
            assert_eq!(
                got,
                Restart {
                    delete_vmi: delete,
                    last_restart: recorded.map(str::to_owned)
                },
                "{requested:?} {last:?} {strategy}"
            );
        }
    }
}
