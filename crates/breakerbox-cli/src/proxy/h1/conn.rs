//! One upstream connection of the inline client: the stream (plain TCP or TLS) and the
//! bytes read from it that nothing has used yet.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::error::{Failure, H1Error};

/// How much room a read wants in the buffer.
const READ_ROOM: usize = 8 * 1024;

/// A connection to an upstream: plain TCP or TLS over TCP.
pub enum UpstreamIo {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

impl UpstreamIo {
    fn tcp(&self) -> &TcpStream {
        match self {
            UpstreamIo::Plain(tcp) => tcp,
            UpstreamIo::Tls(tls) => tls.get_ref().0,
        }
    }
}

impl AsyncRead for UpstreamIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            UpstreamIo::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            UpstreamIo::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            UpstreamIo::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            UpstreamIo::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            UpstreamIo::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A connection with its read buffer.
pub struct Conn {
    io: UpstreamIo,
    /// Bytes read and not used yet.
    pub(super) buf: BytesMut,
}

impl Conn {
    /// A new connection over `io`.
    pub fn new(io: UpstreamIo) -> Conn {
        Conn {
            io,
            buf: BytesMut::with_capacity(READ_ROOM),
        }
    }

    /// Whether an idle connection may carry another request: the upstream has not closed
    /// it, nor sent anything while it was idle. Checked without blocking and, when the
    /// socket has shown no sign of life, without a system call.
    pub fn idle_usable(&mut self) -> bool {
        if !self.buf.is_empty() {
            // Bytes nobody asked for.
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        match self.io.tcp().poll_read_ready(&mut cx) {
            Poll::Pending => return true,
            Poll::Ready(Err(_)) => return false,
            Poll::Ready(Ok(())) => {}
        }
        // Something may have come (a close, or TLS's session tickets): read it.
        let mut probe = [0u8; 64];
        let mut read = ReadBuf::new(&mut probe);
        // Pending: nothing for the application (or TLS records only), usable. Ready: a
        // close (nothing filled) or unasked bytes, not usable.
        Pin::new(&mut self.io)
            .poll_read(&mut cx, &mut read)
            .is_pending()
    }

    /// Writes a whole request, then flushes it.
    pub(super) async fn write_request(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let mut written = 0;
        while written < bytes.len() {
            match self.io.write(&bytes[written..]).await {
                Ok(0) => {
                    return Err(Failure {
                        error: H1Error::Io(std::io::ErrorKind::WriteZero.into()),
                        wrote: written > 0,
                        answered: false,
                    })
                }
                Ok(n) => written += n,
                Err(e) => {
                    return Err(Failure {
                        error: H1Error::Io(e),
                        wrote: written > 0,
                        answered: false,
                    })
                }
            }
        }
        self.io.flush().await.map_err(|e| Failure {
            error: H1Error::Io(e),
            wrote: true,
            answered: false,
        })
    }

    /// Reads more into the buffer: how many bytes came (0 at the end of the stream).
    pub(super) async fn fill(&mut self) -> std::io::Result<usize> {
        self.make_room();
        self.io.read_buf(&mut self.buf).await
    }

    /// [`Conn::fill`] as a poll, for a body.
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        self.make_room();
        let read = pin!(self.io.read_buf(&mut self.buf));
        read.poll(cx)
    }

    fn make_room(&mut self) {
        if self.buf.capacity() - self.buf.len() < READ_ROOM / 4 {
            self.buf.reserve(READ_ROOM);
        }
    }
}
