//! The addresses in use, per NetworkConfiguration and by Machine (pure: the clock is passed in).
//! Addresses are packed (`u128`), Machines and networks shared (`Arc<str>`): a Machine without
//! addresses costs nothing here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::held::{Held, Origin};
use super::pool::Pool;

/// `namespace/name` of a Machine.
pub type MachineKey = Arc<str>;
/// Which watch (one per namespace watched, or one for all) told of a Machine.
pub type Source = usize;
/// A NetworkConfiguration (`namespace/name`), interned.
type Net = u32;
/// One address a Machine holds, as the index keeps it.
type Holding = (Net, u128, Origin);

/// How long an address handed out by the mutating webhook stays reserved for the Machine it was
/// given to while no Machine shows it: past admission (at most 30 s of webhook timeouts), the
/// watch shows the Machine, or it was refused and never stored and the address is free again.
pub const RESERVATION: Duration = Duration::from_secs(120);

#[derive(Debug, Default)]
pub struct AddressIndex {
    nets: HashMap<Arc<str>, Net>,
    /// Each address and the Machines that hold it: normally one; more only for addresses stored
    /// past the webhook (or reported by VMs from before the rule). The first spec one holds.
    holders: BTreeMap<(Net, u128), Vec<(MachineKey, Origin)>>,
    by_machine: HashMap<MachineKey, (Source, Vec<Holding>)>,
    /// Handed out, not yet shown by a Machine: the Machine it went to, and until when.
    reserved: BTreeMap<(Net, u128), (MachineKey, Instant)>,
    /// Per network, where the next draw starts (after the last one).
    cursor: HashMap<Net, u128>,
    pending: HashMap<Source, Vec<(MachineKey, Vec<Held>)>>,
    listed: HashSet<Source>,
    sources: usize,
}

impl AddressIndex {
    /// An empty index fed by `sources` watches.
    pub fn new(sources: usize) -> Self {
        AddressIndex {
            sources,
            ..AddressIndex::default()
        }
    }

    /// Whether every watch has listed once (until then, a duplicate cannot be told).
    pub fn loaded(&self) -> bool {
        self.listed.len() >= self.sources
    }

    fn net(&mut self, network: &str) -> Net {
        if let Some(n) = self.nets.get(network) {
            return *n;
        }
        let n = Net::try_from(self.nets.len()).unwrap_or(Net::MAX);
        self.nets.insert(Arc::from(network), n);
        n
    }

    /// The Machine that holds `address` on `network`, and how.
    pub fn holder(&self, network: &str, address: u128) -> Option<(&str, Origin)> {
        let net = *self.nets.get(network)?;
        let all = self.holders.get(&(net, address))?;
        let (key, origin) = (all.iter().find(|(_, o)| *o == Origin::Spec)).or(all.first())?;
        Some((key, *origin))
    }

    /// The Machine `address` on `network` was handed to, while its reservation lasts.
    pub fn reserved_for(&self, network: &str, address: u128, now: Instant) -> Option<&str> {
        let net = *self.nets.get(network)?;
        let (key, until) = self.reserved.get(&(net, address))?;
        (*until > now).then_some(key)
    }

    pub fn begin_list(&mut self, source: Source) {
        self.pending.insert(source, Vec::new());
    }

    pub fn listed(&mut self, source: Source, key: &str, held: Vec<Held>) {
        if !held.is_empty() {
            let entry = self.pending.entry(source).or_default();
            entry.push((Arc::from(key), held));
        }
    }

    /// The relist of `source` is complete: it replaces what that source told before.
    pub fn end_list(&mut self, source: Source) {
        let listed = self.pending.remove(&source).unwrap_or_default();
        let keep: HashSet<&str> = listed.iter().map(|(k, _)| &**k).collect();
        let gone: Vec<MachineKey> = (self.by_machine.iter())
            .filter(|(k, (s, _))| *s == source && !keep.contains(&***k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            self.remove(&key);
        }
        for (key, held) in listed {
            self.set(source, &key, held);
        }
        self.listed.insert(source);
    }

    /// A Machine was created or changed: what it keeps it keeps (never handed on and back).
    pub fn set(&mut self, source: Source, key: &str, held: Vec<Held>) {
        let new: Vec<Holding> = (held.into_iter())
            .map(|h| (self.net(&h.network), h.address, h.origin))
            .collect();
        let key: MachineKey = match self.by_machine.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Arc::from(key),
        };
        let before = match new.is_empty() {
            true => self.by_machine.remove(&key),
            false => self.by_machine.insert(key.clone(), (source, new.clone())),
        };
        let before = before.map(|(_, b)| b).unwrap_or_default();
        for (net, addr, _) in &before {
            if !new.iter().any(|(n, a, _)| n == net && a == addr) {
                self.release(&key, *net, *addr);
            }
        }
        for (net, addr, origin) in new {
            self.reserved.remove(&(net, addr));
            let all = self.holders.entry((net, addr)).or_default();
            match all.iter_mut().find(|(k, _)| *k == key) {
                Some(mine) => mine.1 = origin,
                None => all.push((key.clone(), origin)),
            }
        }
    }

    /// A Machine was deleted.
    pub fn remove(&mut self, key: &str) {
        let (_, held) = self.by_machine.remove(key).unwrap_or_default();
        for (net, addr, _) in held {
            self.release(key, net, addr);
        }
    }

    fn release(&mut self, key: &str, net: Net, addr: u128) {
        if let Some(all) = self.holders.get_mut(&(net, addr)) {
            all.retain(|(k, _)| &**k != key);
            if all.is_empty() {
                self.holders.remove(&(net, addr));
            }
        }
    }

    /// A free address of `pool` on `network` for Machine `key`, reserved for it until `now` +
    /// [`RESERVATION`]; `None` when every address of the ranges is held or reserved. The walk
    /// starts after the last draw and skips held runs through the sorted maps: its cost grows
    /// with the addresses in use, never with the size of the ranges.
    pub fn allocate(
        &mut self,
        network: &str,
        pool: &Pool,
        key: &str,
        now: Instant,
    ) -> Option<u128> {
        let net = self.net(network);
        let expired: Vec<(Net, u128)> = (self.reserved.range((net, 0)..=(net, u128::MAX)))
            .filter(|(_, (_, until))| *until <= now)
            .map(|(k, _)| *k)
            .collect();
        for k in expired {
            self.reserved.remove(&k);
        }
        let gateway = pool.gateway.map(super::ip::pack);
        let start = self.cursor.get(&net).copied().unwrap_or(0);
        // From the cursor to the end of the ranges, then from their start to the cursor.
        let after = pool.ranges.iter().filter(|(_, e)| *e >= start);
        let after = after.map(|(s, e)| ((*s).max(start), *e));
        let before = pool.ranges.iter().filter(|(s, _)| *s < start);
        let before = before.map(|(s, e)| (*s, (*e).min(start.saturating_sub(1))));
        let found = after
            .chain(before)
            .find_map(|(a, b)| self.first_free(net, a, b, gateway))?;
        self.reserved
            .insert((net, found), (Arc::from(key), now + RESERVATION));
        self.cursor.insert(net, found.saturating_add(1));
        Some(found)
    }

    /// The first address in `[a, b]` on `net` that nobody holds or has reserved.
    fn first_free(&self, net: Net, a: u128, b: u128, skip: Option<u128>) -> Option<u128> {
        let mut x = a;
        loop {
            let held = self
                .holders
                .range((net, x)..=(net, b))
                .next()
                .map(|(k, _)| k.1);
            let reserved = self
                .reserved
                .range((net, x)..=(net, b))
                .next()
                .map(|(k, _)| k.1);
            let taken = [held, reserved, skip.filter(|g| *g >= x)];
            if !taken.contains(&Some(x)) {
                return Some(x);
            }
            if x == b {
                return None;
            }
            x += 1;
        }
    }
}

#[cfg(test)]
mod tests;
