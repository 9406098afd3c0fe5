//! Static addresses on Machine interfaces (`spec.networks[].addresses`), unique within each
//! NetworkConfiguration, and handed out from a NetworkConfiguration's `ipam` ranges to Machines
//! that set none (issue 35). Modelled on `crate::macs`: the mutating webhook writes the address
//! into the Machine, so it lives as long as the Machine; the validating webhook refuses one
//! another Machine holds; every replica keeps the index from the watch on Machines, so it is
//! rebuilt from the Machines after a restart.
//!
//! [`ip`] packs an address into one `u128`, [`pool`] checks a NetworkConfiguration's `ipam`,
//! [`index`] is the pure core (who holds what, the draw of a free address), [`live`] shares it
//! with the webhooks, [`network_config`] renders the cloud-init network-config and
//! [`network_data`] finds where the user's own contradicts the addresses.

pub mod held;
pub mod index;
pub mod ip;
pub mod live;
pub mod network_config;
pub mod network_data;
pub mod pool;
pub mod watch;

pub use index::AddressIndex;
pub use live::LiveAddresses;
pub use pool::Pool;
