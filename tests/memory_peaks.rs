//! What made the operator's memory peak at 10,000 Machines (issue 36's heap profile), pinned by
//! bytes, not time: this binary's allocator counts the bytes live.
//!
//! - A new leader's restart budget is rebuilt from the cached Machines' `RestartPending`
//!   conditions at its first restart decision, when every cache has just been filled: the
//!   operator's busiest moment. Decoding all the Machines first held every Machine decoded at
//!   once (some 55 MB at 10,000, the largest part of the peak). The rebuild decodes one at a
//!   time: rebuilding from 2,000 may hold at most a few decoded Machines' worth.
//! - The check of `--restore-pause-image` compiled oci-spec's reference pattern, whose Unicode
//!   `\w` made some 7 MB, held for the process's life. The check's pattern is ASCII, as the
//!   grammar's own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use serde_json::json;

use kubevirt_operator::api::Machine;
use kubevirt_operator::config::parse_image;
use kubevirt_operator::reconciler::run::restart_budget::rebuild_from;
use kubevirt_operator::reconciler::store::packed::Packed;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to `System` unchanged; only the sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(live, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The peak of live bytes above those live before, while `f` runs.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let out = f();
    (out, PEAK.load(Relaxed).saturating_sub(before))
}

/// A Machine as the cache holds it after a reconcile: a spec with disks and networks, and a
/// status with conditions; every 100th waits for a restart (`RestartPending=True`).
fn machine(i: usize) -> Machine {
    let pending = if i.is_multiple_of(100) {
        "True"
    } else {
        "False"
    };
    let conditions: Vec<_> = ["Ready", "StorageReady", "NetworkReady", "RestartPending"]
        .iter()
        .map(|t| {
            let restart = *t == "RestartPending";
            json!({
                "type": t,
                "status": if restart { pending } else { "True" },
                "reason": if restart { "RestartQueued" } else { "Ready" },
                "message": format!("{t} for Machine m-{i:05}, with the words a user reads"),
                "lastTransitionTime": "2026-11-28T10:00:00Z"
            })
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
        "metadata": {"name": format!("m-{i:05}"), "namespace": "team-a",
                     "uid": format!("00000000-0000-0000-0000-{i:012}"), "resourceVersion": "42",
                     "labels": {"app": "web", "tier": "frontend"}},
        "spec": {
            "template": "medium",
            "disks": [{"name": "root", "size": "20Gi"}, {"name": "data", "size": "100Gi"}],
            "networks": [{"name": "default", "pod": {}}]
        },
        "status": {"phase": "Running", "conditions": conditions}
    }))
    .expect("a Machine")
}

fn cache(n: usize) -> Store<Packed<Machine>> {
    let (store, mut writer) = reflector::store();
    for i in 0..n {
        let packed = Packed::pack(&machine(i)).expect("packs");
        writer.apply_watcher_event(&watcher::Event::Apply(packed));
    }
    store
}

#[test]
fn a_new_leaders_restart_budget_decodes_one_machine_at_a_time() {
    const N: usize = 2_000;
    let store = cache(N);
    let one = store.state()[0].clone();
    let (_, decoded_one) = peak_during(|| one.unpack().expect("decodes"));
    assert!(
        decoded_one > 1_000,
        "a decoded Machine is {decoded_one} bytes"
    );

    let stores = [store];
    let (state, peak) = peak_during(|| rebuild_from(&stores));
    assert_eq!(state.queue.len(), N / 100, "every waiting Machine is found");
    // The list of the cache's entries (an Arc each) and the budget's own maps, plus a few
    // Machines decoded; all 2,000 decoded would be some 2,000 times `decoded_one`.
    let allowed = N * 64 + 20 * decoded_one;
    assert!(
        peak < allowed,
        "the rebuild held {peak} bytes at its peak (one decoded Machine: {decoded_one}; allowed \
         {allowed}; all {N} decoded: about {})",
        N * decoded_one
    );
}

#[test]
fn the_image_check_holds_kilobytes() {
    let (parsed, peak) = peak_during(|| parse_image("registry.k8s.io/pause:3.10"));
    assert_eq!(parsed.as_deref(), Ok("registry.k8s.io/pause:3.10"));
    // Its first call compiles the pattern, kept for the process's life.
    assert!(
        peak < 512 * 1024,
        "checking an image reference held {peak} bytes"
    );
}
