//! Free loopback ports, never handed out twice in one test process, so parallel control planes
//! (and the teardown test that checks a dead instance's ports) cannot collide with each other.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Mutex;

use anyhow::{Context, Result, anyhow};

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

pub fn free_port() -> Result<u16> {
    let mut handed_out = HANDED_OUT
        .lock()
        .map_err(|_| anyhow!("port registry poisoned"))?;
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("binding 127.0.0.1:0 to find a free port")?
            .port();
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
    Err(anyhow!("no unused loopback port after 100 tries"))
}
