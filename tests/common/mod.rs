//! Shared by the webhook integration tests: a test CA and the serving certificates it signs, the
//! real HTTPS server on 127.0.0.1:0, and clients that verify that server against the CA.
//!
//! Two clients on purpose: reqwest (an ordinary HTTPS client, as a user would have) and a small
//! HTTP/1.1-over-rustls connection that exposes what reqwest hides: exactly one TCP connection
//! reused across requests, the negotiated TLS version and the certificate the server presented.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code, unused_imports)]

mod ca;
mod https;
mod process;
mod server;

use std::net::{IpAddr, Ipv4Addr};

pub use ca::{ServingPair, TestCa};
pub use https::{HttpResponse, HttpsConn};
pub use process::WebhookProcess;
pub use server::{Server, assert_serves, valid_review};

pub const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
