//! End-to-end checks of the test control plane itself (tests/support), against real etcd and
//! kube-apiserver processes.

mod support;

use std::net::TcpStream;
use std::time::Duration;

use kube::api::{ApiResource, GroupVersionKind};

fn vm_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachine"),
        "virtualmachines",
    )
}

fn api_error(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error status, got {other:?}"),
    }
}

fn listening(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_ok()
}

/// The tests, by subject, in tests/control_plane/ (still one test binary).
mod control_plane {
    mod access;
    mod api;
    mod teardown;
}
