//! The index and the NetworkConfigurations' pools, shared by the watches that feed them and the
//! webhooks that read them. One short lock per request.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::held::Origin;
use super::index::{AddressIndex, Source};
use super::ip::unpack;
use super::pool::Pool;

#[derive(Debug, Default)]
pub struct Shared {
    pub index: AddressIndex,
    /// NetworkConfigurations (`namespace/name`) with a valid `ipam`.
    pools: HashMap<String, Arc<Pool>>,
    pending: HashMap<Source, HashMap<String, Arc<Pool>>>,
    pools_listed: HashSet<Source>,
    pool_sources: usize,
}

impl Shared {
    pub fn begin_pools(&mut self, source: Source) {
        self.pending.insert(source, HashMap::new());
    }

    pub fn listed_pool(&mut self, source: Source, network: String, pool: Option<Pool>) {
        if let Some(pool) = pool {
            let list = self.pending.entry(source).or_default();
            list.insert(network, Arc::new(pool));
        }
    }

    /// The relist of `source` replaces every pool: NetworkConfigurations are few, and each
    /// watch lists its own namespace (or all of them).
    pub fn end_pools(&mut self, source: Source, in_source: impl Fn(&str) -> bool) {
        let listed = self.pending.remove(&source).unwrap_or_default();
        self.pools.retain(|k, _| !in_source(k));
        self.pools.extend(listed);
        self.pools_listed.insert(source);
    }

    pub fn set_pool(&mut self, network: String, pool: Option<Pool>) {
        match pool {
            Some(p) => self.pools.insert(network, Arc::new(p)),
            None => self.pools.remove(&network),
        };
    }
}

#[derive(Clone, Debug)]
pub struct LiveAddresses {
    shared: Arc<Mutex<Shared>>,
}

impl LiveAddresses {
    /// Empty and not loaded: fed by `watches` watches on Machines and as many on
    /// NetworkConfigurations.
    pub fn watched(watches: usize) -> Self {
        Self::with(Shared {
            index: AddressIndex::new(watches),
            pool_sources: watches,
            ..Shared::default()
        })
    }

    /// Loaded, with these pools and no Machines (tests, golden files).
    pub fn fixed(pools: impl IntoIterator<Item = (String, Pool)>) -> Self {
        Self::with(Shared {
            pools: (pools.into_iter()).map(|(k, p)| (k, Arc::new(p))).collect(),
            ..Shared::default()
        })
    }

    fn with(shared: Shared) -> Self {
        LiveAddresses {
            shared: Arc::new(Mutex::new(shared)),
        }
    }

    /// Runs `f` on the shared state. Every change is one map update, so a poisoned lock still
    /// holds a consistent state and is used as it is.
    pub fn with_shared<T>(&self, f: impl FnOnce(&mut Shared) -> T) -> T {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut shared)
    }

    /// Whether both the Machines and the NetworkConfigurations have been listed.
    pub fn loaded(&self) -> bool {
        self.with_shared(|s| s.index.loaded() && s.pools_listed.len() >= s.pool_sources)
    }

    /// The pool of NetworkConfiguration `network` (`namespace/name`), if it has one.
    pub fn pool(&self, network: &str) -> Option<Arc<Pool>> {
        self.with_shared(|s| s.pools.get(network).cloned())
    }

    /// A free address of `pool` for Machine `key`, as a CIDR with the subnet's prefix.
    pub fn allocate(&self, network: &str, pool: &Pool, key: &str) -> Option<String> {
        let now = Instant::now();
        let drawn = self.with_shared(|s| s.index.allocate(network, pool, key, now))?;
        Some(format!("{}/{}", unpack(drawn), pool.subnet.prefix_len()))
    }

    /// Who holds `address` on `network`, else who it was just handed to (`Origin::Spec`).
    pub fn taken_by(&self, network: &str, address: u128) -> Option<(String, Origin)> {
        let now = Instant::now();
        self.with_shared(|s| {
            let held = s.index.holder(network, address);
            let held = held.map(|(k, o)| (k.to_owned(), o));
            held.or_else(|| {
                let reserved = s.index.reserved_for(network, address, now);
                reserved.map(|k| (k.to_owned(), Origin::Spec))
            })
        })
    }
}
