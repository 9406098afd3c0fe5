//! Where an object is read from.

use super::lookup::{Found, find};
use super::*;
use crate::reconciler::store::packed::Packed;
use kube::api::ObjectMeta;

fn claim(version: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("m-root".into()),
            namespace: Some("ns".into()),
            resource_version: Some(version.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn where_an_object_is_read() {
    let cached = Packed::pack(&claim("5")).unwrap();
    let damaged = cached.damaged();
    use Found::*;
    type Case<'a> = (
        &'a str,
        Option<PersistentVolumeClaim>,
        Option<&'a Packed<PersistentVolumeClaim>>,
        bool,
        bool,
        Found<PersistentVolumeClaim>,
    );
    let cases: [Case; 7] = [
        (
            "our newer write wins",
            Some(claim("6")),
            Some(&cached),
            true,
            true,
            Here(claim("6")),
        ),
        (
            "the cached copy",
            None,
            Some(&cached),
            true,
            true,
            Here(claim("5")),
        ),
        (
            "an undecodable copy is not absent",
            None,
            Some(&damaged),
            false,
            true,
            AskApi,
        ),
        ("someone else's, by name", None, None, true, true, AskApi),
        ("caches not filled yet", None, None, false, false, AskApi),
        ("known absent", None, None, false, true, Absent),
        (
            "our write, nothing cached",
            Some(claim("6")),
            None,
            false,
            true,
            Here(claim("6")),
        ),
    ];
    for (what, ours, cached, named, synced, want) in cases {
        assert_eq!(find(ours, cached, named, synced), want, "{what}");
    }
}
