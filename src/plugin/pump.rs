//! Bytes between a local stream and a WebSocket in KubeVirt's console protocol
//! (`plain.kubevirt.io`: the stream's bytes as binary frames, either way): the console's
//! terminal, and each VNC viewer's connection. Generic over both ends, so the tests drive it
//! with in-memory streams and an in-process WebSocket server.

use std::time::Duration;

use futures::{Sink, SinkExt, Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::escape::until_escape;

/// The most read from the local side at once, so one frame stays small.
const CHUNK: usize = 16 * 1024;

/// How long the server has to close once the local side has ended, so output already on its
/// way (the echo of piped input) still arrives; then the session ends regardless.
pub const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How a session ended, when it ended well.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// The user typed the escape key.
    Escaped,
    /// The local side ended (piped input, a VNC viewer gone) and the server closed too, or did
    /// not within [`CLOSE_WAIT`].
    LocalEnded,
    /// The server ended the session; its reason, if it gave one.
    ServerClosed(Option<String>),
}

#[derive(Debug, thiserror::Error)]
pub enum PumpError {
    #[error("the connection to the Machine failed: {0}")]
    WebSocket(#[from] WsError),
    #[error("reading the local input: {0}")]
    Input(#[source] std::io::Error),
    #[error("writing the local output: {0}")]
    Output(#[source] std::io::Error),
}

/// Pumps until one side ends: `input`'s bytes to `ws` as binary frames (up to the escape key
/// when `escape`), `ws`'s data frames to `output`.
pub async fn pump<S, R, W>(ws: &mut S, input: R, output: W, escape: bool) -> Result<End, PumpError>
where
    S: Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Unpin,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = input;
    let mut output = output;
    let mut buf = vec![0u8; CHUNK];
    let mut input_open = true;
    let close_by = tokio::time::sleep(Duration::MAX);
    tokio::pin!(close_by);
    let mut reason = None;
    loop {
        tokio::select! {
            read = input.read(&mut buf), if input_open => {
                let n = read.map_err(PumpError::Input)?;
                if n == 0 {
                    // Said once; the server's close (or the wait's end) ends the session.
                    input_open = false;
                    ws.send(Message::Close(None)).await?;
                    close_by.as_mut().reset(tokio::time::Instant::now() + CLOSE_WAIT);
                    continue;
                }
                let (send, escaped) = if escape { until_escape(&buf[..n]) } else { (&buf[..n], false) };
                if !send.is_empty() {
                    ws.send(Message::binary(send.to_vec())).await?;
                }
                if escaped {
                    // Best effort: the user is leaving whatever the server says.
                    let _ = ws.send(Message::Close(None)).await;
                    return Ok(End::Escaped);
                }
            }
            frame = ws.next() => match frame {
                Some(Ok(Message::Binary(data))) => write(&mut output, &data).await?,
                Some(Ok(Message::Text(text))) => write(&mut output, text.as_bytes()).await?,
                Some(Ok(Message::Close(frame))) => {
                    reason = frame.map(|f| f.reason.to_string()).filter(|r| !r.is_empty());
                }
                // Pings are answered by the WebSocket itself.
                Some(Ok(_)) => {}
                Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) | None => {
                    return Ok(if input_open { End::ServerClosed(reason) } else { End::LocalEnded });
                }
                Some(Err(e)) => return Err(e.into()),
            },
            () = &mut close_by, if !input_open => return Ok(End::LocalEnded),
        }
    }
}

async fn write<W: AsyncWrite + Unpin>(output: &mut W, data: &[u8]) -> Result<(), PumpError> {
    output.write_all(data).await.map_err(PumpError::Output)?;
    output.flush().await.map_err(PumpError::Output)
}

#[cfg(test)]
mod tests;
