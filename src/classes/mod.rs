//! The MachineClass cache every replica keeps (I/O shell): a watch on the MachineClasses
//! publishes a new [`Catalog`](crate::machine::Catalog) snapshot whenever one changes, and the
//! webhooks and the reconciler read the current snapshot, so no admission request asks the API
//! server about classes. The rules themselves are pure, in `crate::machine::classes`.

pub mod live;
pub mod watch;

pub use live::LiveCatalog;
