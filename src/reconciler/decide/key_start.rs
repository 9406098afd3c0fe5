//! What the leader does when the ownership key Secret is missing (pure): the key is never
//! replaced silently. A new key judges everything made under the lost one as someone else's:
//! each remote Machine would become a conflict forever, and its deletion would leave its VM
//! running there. So a new key is made only when nothing made under an earlier one exists
//! anywhere (a first install), or when the admin accepts it (`--new-ownership-key`); otherwise
//! the leader reconciles nothing and says how to get out.

use std::fmt::Write as _;

use crate::api::names::OWNERSHIP_KEY_SECRET;

/// What one place (the local cluster, a KubevirtConfig's cluster) holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// Nothing carrying an ownership proof.
    None,
    /// An object carrying one (named, e.g. `VirtualMachine team-a/far`).
    Found(String),
    /// Could not be read (why): it may hold some.
    Unknown(String),
}

/// The way forward.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Make a new key; `replacing`: it replaces a lost one (remote objects are re-proven).
    Make { replacing: bool },
    /// Reconcile nothing: this says why and what to do (logged, asked again later).
    Refuse(String),
}

/// The key Secret in `namespace` is missing; `accept_new` is `--new-ownership-key`; `evidence`
/// is what each place holds, by place.
pub fn start(namespace: &str, accept_new: bool, evidence: &[(String, Evidence)]) -> Start {
    if accept_new {
        return Start::Make { replacing: true };
    }
    let mut found = String::new();
    let mut unknown = String::new();
    for (place, e) in evidence {
        match e {
            Evidence::None => {}
            Evidence::Found(what) => {
                let _ = write!(found, "{}{what} on {place}", sep(&found));
            }
            Evidence::Unknown(why) => {
                let _ = write!(unknown, "{}{place} ({why})", sep(&unknown));
            }
        }
    }
    if found.is_empty() && unknown.is_empty() {
        return Start::Make { replacing: false };
    }
    let why = if found.is_empty() {
        format!("objects made under it may exist: cannot read {unknown}")
    } else {
        format!("objects made under it exist ({found})")
    };
    Start::Refuse(format!(
        "the ownership key Secret {namespace}/{OWNERSHIP_KEY_SECRET} is missing and {why}: nothing is reconciled, since a new key would disown them (remote VMs orphaned). Restore the Secret (from the backup kept with the CA), or, if it is lost for good, restart the operator with --new-ownership-key (env NEW_OWNERSHIP_KEY=true, chart value newOwnershipKey: true) to accept a new key: remote objects are then re-proven once by their labels and names"
    ))
}

fn sep(s: &str) -> &'static str {
    if s.is_empty() { "" } else { ", " }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(place: &str, e: Evidence) -> (String, Evidence) {
        (place.to_owned(), e)
    }

    #[test]
    fn a_missing_key_is_replaced_only_on_a_first_install_or_when_accepted() {
        let vm = || Evidence::Found("VirtualMachine team-a/far".into());
        let away = || Evidence::Unknown("Unreachable".into());
        let make = Start::Make { replacing: false };
        let accepted = Start::Make { replacing: true };
        // (what, --new-ownership-key, evidence, make?)
        let cases = [
            (
                "first install, no remotes",
                false,
                vec![at("this cluster", Evidence::None)],
                Some(&make),
            ),
            (
                "first install with a remote",
                false,
                vec![
                    at("this cluster", Evidence::None),
                    at("cluster dc1", Evidence::None),
                ],
                Some(&make),
            ),
            ("local objects", false, vec![at("this cluster", vm())], None),
            (
                "remote objects",
                false,
                vec![at("this cluster", Evidence::None), at("cluster dc1", vm())],
                None,
            ),
            (
                "a remote that cannot be read",
                false,
                vec![
                    at("this cluster", Evidence::None),
                    at("cluster dc1", away()),
                ],
                None,
            ),
            (
                "accepted, with objects",
                true,
                vec![at("cluster dc1", vm())],
                Some(&accepted),
            ),
            (
                "accepted, unknown",
                true,
                vec![at("cluster dc1", away())],
                Some(&accepted),
            ),
            ("accepted, nothing", true, vec![], Some(&accepted)),
        ];
        for (what, accept, evidence, want) in cases {
            let got = start("ops", accept, &evidence);
            match want {
                Some(w) => assert_eq!(&got, w, "{what}"),
                None => assert!(matches!(got, Start::Refuse(_)), "{what}: {got:?}"),
            }
        }
    }

    #[test]
    fn the_refusal_names_the_secret_what_was_found_and_the_way_out() {
        let evidence = [
            at("this cluster", Evidence::None),
            at(
                "cluster dc1",
                Evidence::Found("VirtualMachine team-a/far".into()),
            ),
            at("cluster dc2", Evidence::Unknown("Unreachable".into())),
        ];
        let Start::Refuse(m) = start("ops", false, &evidence) else {
            panic!("must refuse");
        };
        for part in [
            "ops/kubevirt-operator-ownership-key is missing",
            "VirtualMachine team-a/far on cluster dc1",
            "Restore the Secret",
            "--new-ownership-key",
            "NEW_OWNERSHIP_KEY=true",
            "newOwnershipKey: true",
        ] {
            assert!(m.contains(part), "{part}: {m}");
        }
        let Start::Refuse(m) = start("ops", false, &evidence[2..]) else {
            panic!("must refuse");
        };
        assert!(m.contains("cannot read cluster dc2 (Unreachable)"), "{m}");
    }
}
