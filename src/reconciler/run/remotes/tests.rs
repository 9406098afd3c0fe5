use super::*;
use crate::clusters::Connection;

fn connection(kubevirt: bool) -> Arc<Connection> {
    Arc::new(Connection::for_tests("uid-ks", kubevirt))
}

#[tokio::test]
async fn a_cluster_is_usable_only_when_ready_with_kubevirt() {
    let reason = |h| usable(h, Some(true)).err().flatten().map(|u| u.reason);
    // Missing once listed; being checked (nothing said) before it is listed or probed.
    let missing = usable(None, Some(false)).err().flatten().map(|u| u.reason);
    assert_eq!(missing, Some(NOT_FOUND.to_owned()));
    assert!(matches!(usable(None, None), Err(None)));
    assert!(matches!(usable(None, Some(true)), Err(None)));
    let away = Health::NotReady {
        reason: Reason::Unreachable,
        message: "no answer".into(),
        last: Some(connection(true)),
    };
    assert_eq!(reason(Some(away)), Some("Unreachable".to_owned()));
    let bare = Health::Ready(connection(false));
    assert_eq!(reason(Some(bare)), Some(KUBEVIRT_NOT_INSTALLED.to_owned()));
    assert!(usable(Some(Health::Ready(connection(true))), Some(true)).is_ok());
}
