//! The addresses in use, by Machine (pure: no clock, no I/O; randomness is passed in).

use std::collections::{HashMap, HashSet, VecDeque};

pub use super::number::{format_mac, mac_number};

use super::held::{Held, Origin};

/// `namespace/name` of a Machine.
pub type MachineKey = String;

/// Addresses handed out that no Machine shows yet (the object is still on its way through
/// admission), kept so two Machines admitted at once never get the same one. Oldest forgotten
/// first: by then the watch shows the Machine.
const RESERVED: usize = 4096;
/// Draws before giving up (46 random bits: a collision is rare; many in a row mean a broken
/// random source, never a full space).
const DRAWS: usize = 64;

/// Which watch (one per namespace watched, or one for all) told of a Machine.
pub type Source = usize;

#[derive(Debug, Default)]
pub struct MacIndex {
    /// Each address and the Machine that holds it: a spec address before a reported one, else
    /// the first seen.
    by_mac: HashMap<u64, MachineKey>,
    /// Each Machine's addresses in [`Held::packed`] form (one `u64` each, origin included).
    by_machine: HashMap<MachineKey, (Source, Vec<u64>)>,
    /// The other Machines that hold an address (stored past the webhook, or reported by a VM
    /// from before the MAC rule): one takes it over when its holder lets it go. Empty normally.
    contested: HashMap<u64, Vec<MachineKey>>,
    /// Relists in progress, each put in force whole when it ends.
    pending: HashMap<Source, HashMap<MachineKey, Vec<u64>>>,
    reserved: VecDeque<u64>,
    /// Watches whose first list completed, and how many there are.
    listed: HashSet<Source>,
    sources: usize,
}

/// A locally administered unicast address from 64 random bits: the first octet's bit 1 set
/// (local), bit 0 clear (unicast); never all-zero in the rest.
fn local_unicast(random: u64) -> u64 {
    let mac = random & 0xffff_ffff_ffff;
    (mac & !(0x01 << 40)) | (0x02 << 40)
}

impl MacIndex {
    /// An empty index fed by `sources` watches.
    pub fn new(sources: usize) -> Self {
        MacIndex {
            sources,
            ..MacIndex::default()
        }
    }

    /// Whether every watch has listed once (until then, a duplicate cannot be told).
    pub fn loaded(&self) -> bool {
        self.listed.len() >= self.sources
    }

    /// The Machine that uses `mac`, if any.
    pub fn owner(&self, mac: u64) -> Option<&str> {
        self.by_mac.get(&mac).map(String::as_str)
    }

    /// The Machine that holds `mac`, and whether its spec sets it or its VM reports it.
    pub fn holder(&self, mac: u64) -> Option<(&str, Origin)> {
        let key = self.by_mac.get(&mac)?;
        let origin = origin_in(&self.by_machine, key, mac).unwrap_or(Origin::Spec);
        Some((key, origin))
    }

    /// A relist of `source` begins: what it lists replaces that source's Machines when it ends.
    pub fn begin_list(&mut self, source: Source) {
        self.pending.insert(source, HashMap::new());
    }

    /// One Machine of a relist.
    pub fn listed(&mut self, source: Source, key: MachineKey, macs: Vec<Held>) {
        let packed = macs.into_iter().map(Held::packed).collect();
        self.pending.entry(source).or_default().insert(key, packed);
    }

    /// The relist of `source` is complete.
    pub fn end_list(&mut self, source: Source) {
        let listed = self.pending.remove(&source).unwrap_or_default();
        let gone: Vec<MachineKey> = self
            .by_machine
            .iter()
            .filter(|(k, (s, _))| *s == source && !listed.contains_key(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            self.remove(&key);
        }
        for (key, packed) in listed {
            self.set(
                source,
                key,
                packed.into_iter().map(Held::unpacked).collect(),
            );
        }
        self.listed.insert(source);
    }

    /// A Machine was created or changed. What it keeps it keeps: its addresses are never
    /// handed to another Machine and back on the way.
    pub fn set(&mut self, source: Source, key: MachineKey, macs: Vec<Held>) {
        let packed = macs.iter().map(|h| h.packed()).collect();
        let before = self
            .by_machine
            .insert(key.clone(), (source, packed))
            .map(|(_, m)| m)
            .unwrap_or_default();
        for mac in before.into_iter().map(|p| Held::unpacked(p).mac) {
            if !macs.iter().any(|h| h.mac == mac) {
                self.release(&key, mac);
            }
        }
        for held in &macs {
            self.claim(&key, *held);
        }
        self.reserved.retain(|r| !macs.iter().any(|h| h.mac == *r));
    }

    /// A Machine was deleted.
    pub fn remove(&mut self, key: &str) {
        let (_, macs) = self.by_machine.remove(key).unwrap_or_default();
        for mac in macs.into_iter().map(|p| Held::unpacked(p).mac) {
            self.release(key, mac);
        }
    }

    /// `key` (already in `by_machine`) holds `held`: it becomes the holder when the address is
    /// free; a spec holder comes before one whose VM only reports the address (the spec was
    /// admitted; the reported address is given up at that Machine's next write); otherwise
    /// first come. The others wait in `contested`.
    fn claim(&mut self, key: &str, held: Held) {
        let mac = held.mac;
        let Some(holder) = self.by_mac.get(&mac) else {
            self.by_mac.insert(mac, key.to_owned());
            return;
        };
        let (mine, theirs) = (holder == key, origin_in(&self.by_machine, holder, mac));
        if mine {
            if held.origin == Origin::Reported {
                self.hand_on(mac, true);
            }
            return;
        }
        let waiting = self.contested.entry(mac).or_default();
        if !waiting.iter().any(|k| k == key) {
            waiting.push(key.to_owned());
        }
        if held.origin == Origin::Spec && theirs == Some(Origin::Reported) {
            self.hand_on(mac, true);
        }
    }

    /// `key` no longer holds `mac`: if it was the holder, a waiting Machine takes it.
    fn release(&mut self, key: &str, mac: u64) {
        if let Some(waiting) = self.contested.get_mut(&mac) {
            waiting.retain(|k| k != key);
        }
        if self.by_mac.get(&mac).is_some_and(|k| k == key) {
            self.by_mac.remove(&mac);
            self.hand_on(mac, false);
        }
        if self.contested.get(&mac).is_some_and(Vec::is_empty) {
            self.contested.remove(&mac);
        }
    }

    /// The first spec holder waiting for `mac` (else, unless `spec_only`, the first waiting)
    /// becomes its holder; the holder it replaces waits.
    fn hand_on(&mut self, mac: u64, spec_only: bool) {
        let Some(waiting) = self.contested.get_mut(&mac) else {
            return;
        };
        let spec = waiting
            .iter()
            .position(|k| origin_in(&self.by_machine, k, mac) == Some(Origin::Spec));
        let Some(next) = spec.or((!spec_only && !waiting.is_empty()).then_some(0)) else {
            return;
        };
        let next = waiting.remove(next);
        if let Some(replaced) = self.by_mac.insert(mac, next) {
            waiting.push(replaced);
        }
        if waiting.is_empty() {
            self.contested.remove(&mac);
        }
    }

    /// A free address, reserved until a Machine shows it; `None` only when `random` keeps
    /// repeating used ones.
    pub fn allocate(&mut self, mut random: impl FnMut() -> u64) -> Option<u64> {
        for _ in 0..DRAWS {
            let mac = local_unicast(random());
            if mac & 0xff_ffff_ffff == 0
                || self.by_mac.contains_key(&mac)
                || self.reserved.contains(&mac)
            {
                continue;
            }
            if self.reserved.len() == RESERVED {
                self.reserved.pop_front();
            }
            self.reserved.push_back(mac);
            return Some(mac);
        }
        None
    }
}

/// How `key` holds `mac`, per its entry in `by_machine`.
fn origin_in(
    by_machine: &HashMap<MachineKey, (Source, Vec<u64>)>,
    key: &str,
    mac: u64,
) -> Option<Origin> {
    let (_, macs) = by_machine.get(key)?;
    macs.iter()
        .map(|p| Held::unpacked(*p))
        .find(|h| h.mac == mac)
        .map(|h| h.origin)
}

#[cfg(test)]
mod tests;
