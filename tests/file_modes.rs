//! Private keys and kubeconfigs (client keys inside; the dev control plane's is cluster-admin)
//! are readable by their owner only.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn write_private_leaves_only_the_owner_even_over_an_open_file() {
    let dir = tempfile::tempdir().expect("dir");
    let open = dir.path().join("key.pem");
    std::fs::write(&open, "old").expect("write");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let path = support::write_private(dir.path(), "key.pem", "new").expect("write_private");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
}

#[tokio::test]
async fn the_control_planes_keys_and_kubeconfigs_are_owner_only() {
    let cp = support::Fixture::new()
        .user("file-modes", &[])
        .shared()
        .await;
    assert_eq!(mode(cp.admin_kubeconfig()), 0o600, "admin kubeconfig");
    for key in ["apiserver.key", "sa.key"] {
        let found: Vec<_> = walk(cp.dir())
            .into_iter()
            .filter(|p| p.file_name().is_some_and(|n| n == key))
            .collect();
        assert!(
            !found.is_empty(),
            "{key} not found under {}",
            cp.dir().display()
        );
        for p in found {
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
    }
    let kubeconfig = (cp.write_kubeconfig(cp.user("file-modes"), None)).expect("kubeconfig");
    assert_eq!(mode(&kubeconfig), 0o600, "minted user's kubeconfig");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
