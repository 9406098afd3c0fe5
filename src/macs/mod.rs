//! MAC addresses the operator gives Machine interfaces that set none, unique among the Machines
//! this operator serves, so a restart, a VM recreated or an operator restart never changes a
//! guest's address (and with it the DHCP lease).
//!
//! The mutating webhook writes the address into the Machine (`spec.networks[].macAddress`), so it
//! lives as long as the Machine and is visible on it; the validating webhook refuses a new MAC
//! another Machine already uses. Every replica keeps the index of addresses in use from a watch
//! on Machines: [`held`] says which address a Machine holds on an interface (its spec's, else
//! what its VM reports: Machines from before this rule), [`index`] is the pure core (what is
//! held by whom, how a free one is picked), [`live`] shares it between the watch and the
//! webhooks.

pub mod held;
pub mod index;
pub mod live;
pub mod number;
pub mod watch;

pub use index::{MacIndex, MachineKey, format_mac};
pub use live::LiveMacs;
