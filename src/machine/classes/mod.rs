//! MachineClasses, the sizes the cluster admin defines and bounds: pure functions of a class
//! spec and the classes in force. [`check`]: a class on its own; [`set`]: the classes in force
//! (built-ins overlaid by objects) and the one default; [`choose`]: which class sizes a Machine,
//! and the class recorded in it; [`limits`]: the bounds on a Machine's overrides; [`hardware`]: the devices, CPU pinning and model,
//! hugepages and placement a class gives; [`hardware_limits`]: what its Machines may not ask for. The watch that
//! feeds them is `crate::classes`.

pub mod check;
pub mod choose;
pub mod class;
pub mod hardware;
pub mod hardware_limits;
pub mod limits;
pub mod set;

pub use check::check_class;
pub use choose::{Use, choose, recorded_class};
pub use class::Limits;
pub use class::{Class, Hardware};
pub use hardware_limits::hardware_errors;
pub use limits::{Bounds, limit_errors};
pub use set::{Classes, Lookup};
