//! A new leader's first pass (and every relist of Machines): the Machines [`order::turn`] takes
//! at once go to the Controller as the list delivers them; the converged rest is handed over
//! only after the list is complete, and then only as reconciles finish ([`Pacer`]), so the
//! Controller's queue holds a few of them at a time. kube's queue takes waiting Machines in no
//! particular order once its workers are busy; with all 10,000 queued, a changed Machine waited
//! for most of the pass (issue 36's failover: 84 s after the Lease was taken).

pub mod order;

use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use tokio::sync::{Semaphore, mpsc};

use crate::api::Machine;
use crate::reconciler::store::packed::Packed;
use order::{Listed, Turn, turn};

type Ref = ObjectRef<Packed<Machine>>;

/// Hands the paced Machines of each list to the Controller as reconciles finish.
#[derive(Clone)]
pub struct Pacer {
    permits: Arc<Semaphore>,
    /// How many paced Machines may wait in the Controller's queue at once.
    ahead: usize,
    tx: mpsc::UnboundedSender<Ref>,
}

impl Pacer {
    /// A pacer for a Controller of `concurrency` workers, and the stream of paced Machines to
    /// give it (`Controller::reconcile_on`).
    pub fn new(concurrency: u16) -> (Self, impl Stream<Item = Ref> + Send + 'static) {
        let ahead = 2 * usize::from(concurrency.max(1));
        let permits = Arc::new(Semaphore::new(ahead));
        let (tx, rx) = mpsc::unbounded_channel();
        let paced = futures::stream::unfold((rx, permits.clone()), |(mut rx, permits)| async {
            let next = rx.recv().await?;
            permits.acquire().await.ok()?.forget();
            Some((next, (rx, permits)))
        });
        (Pacer { permits, ahead, tx }, paced)
    }

    /// A reconcile ended (whichever Machine): one more paced Machine may go. Never more than
    /// `ahead` are allowed besides the next one, so a trigger merged with one already queued
    /// (kube deduplicates) costs nothing lasting, and a burst of finished reconciles (the
    /// resync) lets no flood through.
    pub fn finished(&self) {
        if self.permits.available_permits() < self.ahead {
            self.permits.add_permits(1);
        }
    }

    /// `events` (after `reflect`: the store holds a list by the time its `InitDone` passes)
    /// without the paced Machines of each list, which go to the paced stream once the list is
    /// complete. Everything else passes as it comes.
    pub fn split<E>(
        &self,
        events: impl Stream<Item = Result<Event<Packed<Machine>>, E>> + Send + 'static,
    ) -> impl Stream<Item = Result<Event<Packed<Machine>>, E>> + Send + 'static
    where
        E: Send + 'static,
    {
        let tx = self.tx.clone();
        let mut held: Vec<Ref> = Vec::new();
        events.filter(move |e| {
            let pass = match e {
                Ok(Event::Init) => {
                    held.clear();
                    true
                }
                Ok(Event::InitApply(m)) => {
                    let listed = Listed {
                        brief: m.brief(),
                        deleting: m.meta().deletion_timestamp.is_some(),
                    };
                    match turn(listed) {
                        Turn::Now => true,
                        Turn::Paced => {
                            held.push(ObjectRef::from_obj(m));
                            false
                        }
                    }
                }
                Ok(Event::InitDone) => {
                    for r in held.drain(..) {
                        // The receiver lives as long as the Controller this feeds.
                        let _ = tx.send(r);
                    }
                    held.shrink_to_fit();
                    true
                }
                _ => true,
            };
            futures::future::ready(pass)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use serde_json::json;

    fn machine(name: &str, phase: Option<&str>, generation: i64, observed: i64) -> Packed<Machine> {
        let mut m = json!({
            "apiVersion": "vitistack.io/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns", "generation": generation},
            "spec": {}
        });
        if let Some(p) = phase {
            m["status"] = json!({"phase": p, "observedGeneration": observed});
        }
        Packed::pack(&serde_json::from_value::<Machine>(m).expect("machine")).expect("packs")
    }

    fn names(refs: &[Ref]) -> Vec<String> {
        refs.iter().map(|r| r.name.clone()).collect()
    }

    /// The changed and the new Machines pass during the list; the converged ones only after
    /// it, two per worker at first and then one per finished reconcile.
    #[tokio::test]
    async fn converged_machines_wait_for_the_list_and_for_finished_reconciles() {
        let (pacer, paced) = Pacer::new(1);
        let mut paced = Box::pin(paced);
        let mut list = vec![Ok::<_, ()>(Event::Init)];
        for i in 0..8 {
            list.push(Ok(Event::InitApply(machine(
                &format!("c{i}"),
                Some("Running"),
                1,
                1,
            ))));
        }
        list.push(Ok(Event::InitApply(machine(
            "changed",
            Some("Running"),
            3,
            2,
        ))));
        list.push(Ok(Event::InitApply(machine("new", None, 1, 0))));
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut passed = Box::pin(pacer.split(rx));
        for e in list {
            tx.unbounded_send(e).expect("send");
        }
        let mut now = Vec::new();
        while let Some(Some(Ok(e))) = passed.next().now_or_never() {
            if let Event::InitApply(m) = e {
                now.push(m.meta().name.clone().unwrap_or_default());
            }
        }
        assert_eq!(now, ["changed", "new"]);
        assert!(
            paced.next().now_or_never().is_none(),
            "nothing before the list is done"
        );

        tx.unbounded_send(Ok(Event::InitDone)).expect("send");
        assert!(matches!(passed.next().await, Some(Ok(Event::InitDone))));
        let mut got = Vec::new();
        while let Some(Some(r)) = paced.next().now_or_never() {
            got.push(r);
        }
        assert_eq!(names(&got), ["c0", "c1"], "two ahead for one worker");
        pacer.finished();
        let next = paced.next().now_or_never().flatten().expect("one more");
        assert_eq!(next.name, "c2");
        assert!(paced.next().now_or_never().is_none());
        for _ in 0..10 {
            pacer.finished();
        }
        let mut rest = Vec::new();
        while let Some(Some(r)) = paced.next().now_or_never() {
            rest.push(r);
        }
        assert_eq!(
            names(&rest),
            ["c3", "c4", "c5"],
            "the next one and two ahead, however many finished"
        );
    }

    #[test]
    fn the_brief_tells_a_spec_ahead_of_its_status() {
        assert!(!machine("a", Some("Running"), 4, 4).brief().spec_ahead);
        assert!(machine("b", Some("Running"), 5, 4).brief().spec_ahead);
    }
}
