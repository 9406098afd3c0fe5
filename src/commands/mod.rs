//! The subcommands' entry points: gather inputs, call the core, print or serve.

pub mod certs;
pub mod check;
pub mod run;
pub mod validate;
pub mod webhook;
pub mod webhook_configs;
