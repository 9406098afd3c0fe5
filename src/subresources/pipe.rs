//! An open console or VNC session (the I/O shell around [`super::sessions::should_end`]): bytes
//! both ways as they come, and every few seconds, or when a timeout falls due, a look at the
//! Machine and its VMI; the session ends with a close frame naming why.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::held::Ticket;
use super::power::Target;
use super::sessions::{End, Limits, Observed, Seen, next_look, should_end};
use super::upstream::Socket;
use crate::api::Machine;
use crate::tls::listener::Draining;

/// How long one message may wait to be taken by the other side before the session ends: a
/// side that stops reading must not hold the session past its rules.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Time to say goodbye (the close frames) when a session ends.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a session relays and watches.
pub struct Session {
    pub ticket: Ticket,
    pub limits: Limits,
    pub draining: Draining,
    /// The operator's client of its own cluster (the Machine's).
    pub machines: Api<Machine>,
    pub machine: String,
    /// The operator's client of the VMI's cluster.
    pub cluster: Client,
    pub target: Target,
    /// The VMI's uid when the session opened: another VMI of the same name is not this one.
    pub vmi_uid: Option<String>,
}

/// Bytes relayed, each way.
#[derive(Debug, Default)]
pub struct Relayed {
    pub from_user: u64,
    pub to_user: u64,
}

/// Relays between `user` and `kubevirt` until a rule ends the session; says why.
pub async fn run(user: Socket, kubevirt: Socket, session: &Session) -> (End, Relayed) {
    let (mut user_tx, mut user_rx) = user.split();
    let (mut kv_tx, mut kv_rx) = kubevirt.split();
    let mut relayed = Relayed::default();
    let opened = Instant::now();
    let mut last = opened;
    let look = tokio::time::sleep(next_look(&session.limits, Duration::ZERO, Duration::ZERO));
    tokio::pin!(look);
    let draining = session.draining.begun();
    tokio::pin!(draining);
    let end = loop {
        tokio::select! {
            message = user_rx.next() => match data(message) {
                Some(message) => {
                    relayed.from_user += message.len() as u64;
                    last = Instant::now();
                    if !send(&mut kv_tx, message).await {
                        break End::UpstreamClosed;
                    }
                }
                None => break End::ClientClosed,
            },
            message = kv_rx.next() => match data(message) {
                Some(message) => {
                    relayed.to_user += message.len() as u64;
                    last = Instant::now();
                    if !send(&mut user_tx, message).await {
                        break End::ClientClosed;
                    }
                }
                None => break End::UpstreamClosed,
            },
            () = &mut look => {
                let observed = Observed {
                    age: opened.elapsed(),
                    idle_for: last.elapsed(),
                    machine: machine_seen(session).await,
                    vmi: vmi_seen(session).await,
                    draining: session.draining.is_draining(),
                };
                if let Some(end) = should_end(&session.limits, &observed) {
                    break end;
                }
                let next = next_look(&session.limits, opened.elapsed(), last.elapsed());
                look.as_mut().reset(Instant::now() + next);
            }
            () = &mut draining => break End::Draining,
        }
    };
    let goodbye = |end: End| {
        Message::Close(Some(CloseFrame {
            code: CloseCode::from(end.close_code()),
            reason: end.as_str().into(),
        }))
    };
    // Each side hears why, unless it is the one that left.
    let user_side = async {
        if end != End::ClientClosed {
            let _ = user_tx.send(goodbye(end)).await;
        }
        let _ = user_tx.close().await;
    };
    let kubevirt_side = async {
        if end != End::UpstreamClosed {
            let _ = kv_tx.send(goodbye(End::ClientClosed)).await;
        }
        let _ = kv_tx.close().await;
    };
    let _ = tokio::time::timeout(
        CLOSE_TIMEOUT,
        futures::future::join(user_side, kubevirt_side),
    )
    .await;
    (end, relayed)
}

/// A message to pass on; None when the side closed or failed. Pings are answered by the
/// WebSocket itself and not passed on.
fn data(
    message: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
) -> Option<Message> {
    match message? {
        Ok(Message::Close(_)) | Err(_) => None,
        Ok(message) => Some(message),
    }
}

/// Sends `message` unless it is a ping or pong (each hop keeps its own); false when the side
/// is gone or did not take it in time.
async fn send<S>(sink: &mut S, message: Message) -> bool
where
    S: futures::Sink<Message> + Unpin,
{
    if matches!(message, Message::Ping(_) | Message::Pong(_)) {
        return true;
    }
    matches!(
        tokio::time::timeout(SEND_TIMEOUT, sink.send(message)).await,
        Ok(Ok(()))
    )
}

async fn machine_seen(session: &Session) -> Seen {
    match session.machines.get_opt(&session.machine).await {
        Ok(Some(m)) if m.metadata.deletion_timestamp.is_none() => Seen::There,
        Ok(_) => Seen::Gone,
        Err(_) => Seen::Unknown,
    }
}

async fn vmi_seen(session: &Session) -> Seen {
    match vmi_uid(&session.cluster, &session.target).await {
        Ok(Some(uid)) if session.vmi_uid.as_ref().is_none_or(|u| *u == uid) => Seen::There,
        Ok(_) => Seen::Gone,
        Err(_) => Seen::Unknown,
    }
}

/// The uid of `target`'s VMI on its cluster; None when there is none.
pub async fn vmi_uid(cluster: &Client, target: &Target) -> Result<Option<String>, kube::Error> {
    let path = format!(
        "/apis/kubevirt.io/v1/namespaces/{}/virtualmachineinstances/{}",
        target.namespace, target.vmi
    );
    let request = axum::http::Request::get(&path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    match cluster.request::<serde_json::Value>(request).await {
        Ok(vmi) => Ok(vmi["metadata"]["uid"].as_str().map(str::to_owned)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}
