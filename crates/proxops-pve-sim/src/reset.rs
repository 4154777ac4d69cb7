//! Connection resets on demand: every accepted TCP connection gets a kill flag, registered by the
//! peer address; a handler that sets it makes the next write fail and the socket close with RST
//! (`SO_LINGER` 0), so the client sees its connection reset instead of a response.

use axum_server::accept::Accept;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::server::lock;

type Registry = Arc<Mutex<HashMap<SocketAddr, Arc<AtomicBool>>>>;

/// An acceptor (under TLS) that wraps each TCP stream in a [`KillStream`].
#[derive(Clone)]
pub(crate) struct KillAcceptor {
    kills: Registry,
}

impl KillAcceptor {
    pub fn new(kills: Registry) -> KillAcceptor {
        KillAcceptor { kills }
    }
}

impl<S> Accept<TcpStream, S> for KillAcceptor {
    type Stream = KillStream;
    type Service = S;
    type Future = std::future::Ready<io::Result<(KillStream, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let result = stream.peer_addr().map(|peer| {
            let flag = Arc::new(AtomicBool::new(false));
            lock(&self.kills).insert(peer, flag.clone());
            let wrapped = KillStream {
                inner: stream,
                flag,
                peer,
                kills: self.kills.clone(),
            };
            (wrapped, service)
        });
        std::future::ready(result)
    }
}

/// A TCP stream that fails every operation once its flag is set.
pub(crate) struct KillStream {
    inner: TcpStream,
    flag: Arc<AtomicBool>,
    peer: SocketAddr,
    kills: Registry,
}

impl KillStream {
    fn killed(&self) -> bool {
        if self.flag.load(Ordering::SeqCst) {
            // Zero linger: closing sends RST at once and does not block.
            #[allow(deprecated)]
            let _ = self.inner.set_linger(Some(Duration::ZERO));
            true
        } else {
            false
        }
    }
}

fn reset() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "connection reset (injected fault)",
    )
}

impl Drop for KillStream {
    fn drop(&mut self) {
        lock(&self.kills).remove(&self.peer);
    }
}

impl AsyncRead for KillStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.killed() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.killed() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.killed() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Marks the connection from a peer for reset.
pub(crate) fn kill(kills: &Registry, peer: SocketAddr) {
    if let Some(flag) = lock(kills).get(&peer) {
        flag.store(true, Ordering::SeqCst);
    }
}
