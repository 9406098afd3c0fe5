//! The index shared by the watch that feeds it and the webhooks that read it. One short lock
//! per request: a lookup or one draw.

use std::sync::{Arc, Mutex, PoisonError};

use ring::rand::{SecureRandom, SystemRandom};

use super::held::Origin;
use super::index::MacIndex;
use super::number::{format_mac, mac_number};

/// Where new addresses come from.
enum Source {
    System(SystemRandom),
    /// Deterministic (tests and golden files): SplitMix64 from a seed.
    Seeded(u64),
}

impl Source {
    fn next(&mut self) -> u64 {
        match self {
            Source::System(rng) => {
                let mut bytes = [0u8; 8];
                // ring's system source does not fail on the platforms it builds for; a zero
                // draw is skipped by the index anyway.
                let _ = rng.fill(&mut bytes);
                u64::from_le_bytes(bytes)
            }
            Source::Seeded(state) => {
                *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = *state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            }
        }
    }
}

struct Shared {
    index: MacIndex,
    source: Source,
}

#[derive(Clone)]
pub struct LiveMacs {
    shared: Arc<Mutex<Shared>>,
}

impl std::fmt::Debug for LiveMacs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveMacs").finish_non_exhaustive()
    }
}

impl LiveMacs {
    /// Empty and not loaded, drawing from the system's random source: fed by `watch::follow`
    /// through `watches` watches.
    pub fn watched(watches: usize) -> Self {
        Self::with(Source::System(SystemRandom::new()), MacIndex::new(watches))
    }

    /// Loaded and empty, with deterministic draws (tests, golden files).
    pub fn seeded(seed: u64) -> Self {
        Self::with(Source::Seeded(seed), MacIndex::new(0))
    }

    fn with(source: Source, index: MacIndex) -> Self {
        LiveMacs {
            shared: Arc::new(Mutex::new(Shared { index, source })),
        }
    }

    /// Runs `f` on the index. A panic elsewhere while holding the lock leaves a consistent
    /// index (every change is one map update), so a poisoned lock is used as it is.
    pub fn with_index<T>(&self, f: impl FnOnce(&mut MacIndex) -> T) -> T {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut shared.index)
    }

    pub fn loaded(&self) -> bool {
        self.with_index(|i| i.loaded())
    }

    /// A free address, as KubeVirt writes it.
    pub fn allocate(&self) -> Option<String> {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let Shared { index, source } = &mut *shared;
        index.allocate(|| source.next()).map(format_mac)
    }

    /// The Machine (`namespace/name`) that uses `mac`, if any.
    pub fn owner(&self, mac: &str) -> Option<String> {
        self.holder(mac).map(|(key, _)| key)
    }

    /// The Machine that holds `mac`, and whether its spec sets it or its VM reports it.
    pub fn holder(&self, mac: &str) -> Option<(String, Origin)> {
        let mac = mac_number(mac)?;
        self.with_index(|i| i.holder(mac).map(|(k, o)| (k.to_owned(), o)))
    }
}
