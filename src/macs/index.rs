//! The addresses in use, by Machine (pure: no clock, no I/O; randomness is passed in).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::machine::names::parse_mac;

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
    by_mac: HashMap<u64, MachineKey>,
    by_machine: HashMap<MachineKey, (Source, Vec<u64>)>,
    /// Relists in progress, each put in force whole when it ends.
    pending: HashMap<Source, HashMap<MachineKey, Vec<u64>>>,
    reserved: VecDeque<u64>,
    /// Watches whose first list completed, and how many there are.
    listed: HashSet<Source>,
    sources: usize,
}

/// An address as a 48-bit number (either separator, either case).
pub fn mac_number(s: &str) -> Option<u64> {
    parse_mac(s).map(|b| b.iter().fold(0u64, |acc, o| (acc << 8) | u64::from(*o)))
}

/// `02:1a:2b:3c:4d:5e`: lower case, colons, as KubeVirt reports it.
pub fn format_mac(mac: u64) -> String {
    let b = mac.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
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

    /// A relist of `source` begins: what it lists replaces that source's Machines when it ends.
    pub fn begin_list(&mut self, source: Source) {
        self.pending.insert(source, HashMap::new());
    }

    /// One Machine of a relist.
    pub fn listed(&mut self, source: Source, key: MachineKey, macs: Vec<u64>) {
        self.pending.entry(source).or_default().insert(key, macs);
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
        for (key, macs) in listed {
            self.set(source, key, macs);
        }
        self.listed.insert(source);
    }

    /// A Machine was created or changed.
    pub fn set(&mut self, source: Source, key: MachineKey, macs: Vec<u64>) {
        self.remove(&key);
        for mac in &macs {
            // Two Machines stored with one address (past the webhook): the first keeps it.
            self.by_mac.entry(*mac).or_insert_with(|| key.clone());
        }
        self.reserved.retain(|r| !macs.contains(r));
        self.by_machine.insert(key, (source, macs));
    }

    /// A Machine was deleted.
    pub fn remove(&mut self, key: &str) {
        let (_, macs) = self.by_machine.remove(key).unwrap_or_default();
        for mac in macs {
            if self.by_mac.get(&mac).is_some_and(|k| k == key) {
                self.by_mac.remove(&mac);
            }
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

#[cfg(test)]
mod tests;
