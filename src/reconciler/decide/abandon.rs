//! What a Machine whose remote cluster cannot be worked on does (pure): wait, or, deleting with
//! `vitistack.io/abandon-remote: "true"`, go without cleaning up there. Abandonment is honoured
//! only once the cluster was looked at and found unusable: a new leader's first seconds (the
//! cluster listed but not probed, its caches filling) are not an outage, and an abandonment
//! then would leave a healthy cluster's VM running with no Machine.

use crate::api::names::ABANDON_REMOTE_ANNOTATION;

/// Whether `vitistack.io/abandon-remote` (in `annotations`) asks to give the cluster up.
pub fn requested(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations
        .get(ABANDON_REMOTE_ANNOTATION)
        .map(String::as_str)
        == Some("true")
}

/// What to do while the cluster cannot be worked on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Remove the finalizer: what the Machine made there stays.
    Abandon,
    /// Wait, saying nothing (the cluster is being read).
    Quiet,
    /// Wait, with `ClusterReady=False` and this message.
    Say(String),
}

/// `deleting`: the Machine has a deletion timestamp; `abandon`: its annotation is `"true"`;
/// `probed`: the cluster was looked at (not merely being read); `message`: why it cannot be
/// worked on.
pub fn waiting(deleting: bool, abandon: bool, probed: bool, message: &str) -> Waiting {
    match (deleting, abandon, probed) {
        (_, _, false) => Waiting::Quiet,
        (true, true, true) => Waiting::Abandon,
        (true, false, true) => Waiting::Say(format!(
            "{message}; its deletion waits for the cluster: to let it go without cleaning up there (what it made there stays), annotate it {ABANDON_REMOTE_ANNOTATION}=true"
        )),
        (false, _, true) => Waiting::Say(message.to_owned()),
    }
}

/// Whether a remote Machine's deletion waits for a VM there that carries its labels without
/// being proven ours (made under a lost key and not re-proven, or planted): its finalizer must
/// not go while what may be its VM runs, unless the admin abandons it. Locally, and for a VM
/// that is not labelled for it (a conflict), deletion goes on as before.
pub fn unproven_vm_holds(remote: bool, labelled_for_it: bool, ours: bool, abandon: bool) -> bool {
    remote && labelled_for_it && !ours && !abandon
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unproven_remote_vm_labelled_for_the_machine_holds_its_deletion() {
        // (remote, labelled for it, ours, abandon-remote, holds)
        let cases = [
            (true, true, false, false, true),
            (true, true, false, true, false),
            (true, true, true, false, false),
            (true, false, false, false, false),
            (false, true, false, false, false),
        ];
        for (remote, labelled, ours, abandon, want) in cases {
            assert_eq!(
                unproven_vm_holds(remote, labelled, ours, abandon),
                want,
                "{remote} {labelled} {ours} {abandon}"
            );
        }
    }

    #[test]
    fn abandonment_needs_a_deletion_the_annotation_and_a_probed_cluster() {
        let say = |m: &str| Waiting::Say(m.to_owned());
        let hint = "no answer; its deletion waits for the cluster: to let it go without cleaning up there (what it made there stays), annotate it vitistack.io/abandon-remote=true";
        // (deleting, abandon-remote, probed, what to do)
        let cases = [
            (true, true, true, Waiting::Abandon),
            // A new leader's first seconds: the cluster is not known to be away.
            (true, true, false, Waiting::Quiet),
            (true, false, false, Waiting::Quiet),
            (false, false, false, Waiting::Quiet),
            // Waiting for deletion says how to abandon; a live Machine just says why.
            (true, false, true, say(hint)),
            (false, true, true, say("no answer")),
            (false, false, true, say("no answer")),
        ];
        for (deleting, abandon, probed, want) in cases {
            assert_eq!(
                waiting(deleting, abandon, probed, "no answer"),
                want,
                "{deleting} {abandon} {probed}"
            );
        }
    }
}
