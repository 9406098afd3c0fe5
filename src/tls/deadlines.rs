//! Per-connection deadlines, as Go's `net/http` server keeps them: a connection may sit idle
//! between requests for [`IDLE_TIMEOUT`], longer than kube-apiserver's client keeps idle
//! connections (90 s), so the client always closes first and never sends on a connection we are
//! closing; but once a request's first byte arrives, the request must be read and answered
//! within [`REQUEST_TIMEOUT`], so slow clients cannot hold a connection.
//!
//! (hyper's `header_read_timeout` also runs while a keep-alive connection is idle, which would
//! close idle connections after a few seconds and race the client's next request.)

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep, sleep_until};

/// Time to send the first request after the handshake, and each request once begun.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a keep-alive connection may stay idle between requests.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Deadlines<IO> {
    io: IO,
    // Boxed so the wrapper stays Unpin, as hyper needs its IO to be.
    deadline: Pin<Box<Sleep>>,
    in_request: bool,
    /// Switched to another protocol (a WebSocket): its handler bounds it from now on.
    upgraded: bool,
    request: Duration,
    idle: Duration,
}

impl<IO> Deadlines<IO> {
    /// A fresh connection: its first request must begin and finish within `request`.
    pub fn new(io: IO, request: Duration, idle: Duration) -> Self {
        let deadline = Box::pin(sleep_until(Instant::now() + request));
        Deadlines {
            io,
            deadline,
            in_request: false,
            upgraded: false,
            request,
            idle,
        }
    }

    fn answered(&mut self) {
        // A final response is going out: the request is done and the connection idle again.
        self.in_request = false;
        self.deadline.as_mut().reset(Instant::now() + self.idle);
    }
}

/// Whether a write is `101 Switching Protocols`: the connection is then another protocol's.
fn is_switching_protocols(written: &[u8]) -> bool {
    written.starts_with(b"HTTP/1.1 101 ")
}

/// Whether a write begins a final response (`HTTP/1.x` and a status of 200 or more). An interim
/// `100 Continue` is not one: the request it invites must still finish within its deadline.
fn is_final_response(written: &[u8]) -> bool {
    match written {
        [
            b'H',
            b'T',
            b'T',
            b'P',
            b'/',
            b'1',
            b'.',
            _,
            b' ',
            status,
            ..,
        ] => *status != b'1',
        _ => false,
    }
}

fn expired(in_request: bool) -> io::Error {
    let what = if in_request {
        "request not completed in time"
    } else {
        "connection idle too long"
    };
    io::Error::new(io::ErrorKind::TimedOut, what)
}

impl<IO: AsyncRead + Unpin> AsyncRead for Deadlines<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before && !this.in_request {
                    // The first byte of a request: from now on it must be completed promptly.
                    this.in_request = true;
                    this.deadline.as_mut().reset(Instant::now() + this.request);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending if this.upgraded => Poll::Pending,
            Poll::Pending => {
                ready!(this.deadline.as_mut().poll(cx));
                Poll::Ready(Err(expired(this.in_request)))
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Deadlines<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = ready!(Pin::new(&mut self.io).poll_write(cx, data))?;
        if written > 0 && is_switching_protocols(data) {
            self.upgraded = true;
        } else if written > 0 && is_final_response(data) {
            self.answered();
        }
        Poll::Ready(Ok(written))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = ready!(Pin::new(&mut self.io).poll_write_vectored(cx, bufs))?;
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        if written > 0 && is_switching_protocols(first) {
            self.upgraded = true;
        } else if written > 0 && is_final_response(first) {
            self.answered();
        }
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    use super::*;

    const REQ: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(120);

    #[tokio::test(start_paused = true)]
    async fn a_silent_new_connection_times_out_after_the_request_timeout() {
        let (_client, server) = duplex(64);
        let mut conn = Deadlines::new(server, REQ, IDLE);
        let start = Instant::now();
        let err = conn.read(&mut [0u8; 8]).await.expect_err("times out");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), REQ);
    }

    #[tokio::test(start_paused = true)]
    async fn a_started_request_must_finish_in_time() {
        let (mut client, server) = duplex(64);
        let mut conn = Deadlines::new(server, REQ, IDLE);
        client.write_all(b"POS").await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(conn.read(&mut buf).await.unwrap(), 3);
        let start = Instant::now();
        let err = conn.read(&mut buf).await.expect_err("slow request is cut");
        assert_eq!(
            (err.kind(), err.to_string()),
            (
                io::ErrorKind::TimedOut,
                "request not completed in time".to_owned()
            )
        );
        assert_eq!(start.elapsed(), REQ);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answered_connection_may_idle_longer_than_a_request_takes() {
        let (mut client, server) = duplex(256);
        let mut conn = Deadlines::new(server, REQ, IDLE);
        client.write_all(b"GET").await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(conn.read(&mut buf).await.unwrap(), 3);
        conn.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        // Idle for longer than a request may take, then a new request arrives in time.
        tokio::time::sleep(REQ * 3).await;
        client.write_all(b"GET").await.unwrap();
        assert_eq!(conn.read(&mut buf).await.unwrap(), 3);
        conn.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        let start = Instant::now();
        let err = conn.read(&mut buf).await.expect_err("idle limit");
        assert_eq!(err.to_string(), "connection idle too long");
        assert_eq!(start.elapsed(), IDLE);
    }

    /// `Expect: 100-continue`: the interim answer does not end the request, so the body must
    /// still arrive within the deadline counted from the request's first byte.
    #[tokio::test(start_paused = true)]
    async fn an_interim_100_continue_does_not_restart_the_deadline() {
        let (mut client, server) = duplex(256);
        let mut conn = Deadlines::new(server, REQ, IDLE);
        client
            .write_all(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\n")
            .await
            .unwrap();
        let start = Instant::now();
        let mut buf = [0u8; 256];
        assert!(conn.read(&mut buf).await.unwrap() > 0);
        tokio::time::sleep(REQ / 2).await;
        conn.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .unwrap();
        let err = conn.read(&mut buf).await.expect_err("the body is late");
        assert_eq!(err.to_string(), "request not completed in time");
        assert_eq!(start.elapsed(), REQ);
    }

    /// After `101 Switching Protocols` the connection is a WebSocket, bounded by its session's
    /// rules: neither deadline cuts it.
    #[tokio::test(start_paused = true)]
    async fn an_upgraded_connection_is_not_cut_by_the_deadlines() {
        let (mut client, server) = duplex(256);
        let mut conn = Deadlines::new(server, REQ, IDLE);
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 256];
        assert!(conn.read(&mut buf).await.unwrap() > 0);
        conn.write_all(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(IDLE * 3).await;
        client.write_all(b"frame").await.unwrap();
        assert_eq!(conn.read(&mut buf).await.unwrap(), 5);
        let silent = tokio::time::timeout(IDLE * 3, conn.read(&mut buf)).await;
        assert!(silent.is_err(), "still open: {silent:?}");
    }

    #[test]
    fn only_a_final_status_line_answers_a_request() {
        assert!(is_final_response(b"HTTP/1.1 200 OK\r\n"));
        assert!(is_final_response(b"HTTP/1.1 400 Bad Request\r\n"));
        assert!(is_final_response(b"HTTP/1.0 200 OK\r\n"));
        assert!(!is_final_response(b"HTTP/1.1 100 Continue\r\n\r\n"));
        assert!(!is_final_response(b"HTTP/1.1 103 Early Hints\r\n"));
        // The rest of a response, or a body, is no new answer.
        assert!(!is_final_response(b"{\"response\":{}}"));
        assert!(!is_final_response(b"HTTP/1."));
    }
}
