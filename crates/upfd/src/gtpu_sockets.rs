//! upfd's GTP-U sockets (UDP 2152), one per GTP-U address of ours: N3, N9 and those of
//! the Network Instances that have their own. What the data path hands up arrives on
//! them (Echo, Error Indication, G-PDUs for unknown TEIDs) and is answered from the
//! address it was sent to; Echo Requests and End Markers of our own leave from the N3
//! address of their IP version.

use std::future::poll_fn;
use std::net::{IpAddr, SocketAddr};
use std::task::Poll;

use anyhow::Context;
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;

use crate::config::Config;

/// A datagram received on a GTP-U socket.
pub struct Datagram {
    pub from: SocketAddr,
    /// Our address it was sent to.
    pub local: IpAddr,
    pub data: Vec<u8>,
}

#[derive(Default)]
pub struct GtpuSockets {
    /// The N3 addresses first (IPv4, IPv6), then the rest.
    socks: Vec<Socket>,
    /// Where the next receive starts looking, so that no socket starves the others.
    next: usize,
}

/// A socket, its address, and the buffer it receives into.
struct Socket {
    sock: UdpSocket,
    local: IpAddr,
    buf: Vec<u8>,
}

impl GtpuSockets {
    /// Sockets on every GTP-U address of the configuration (see
    /// [`Config::gtpu_addresses`]).
    pub async fn bind(cfg: &Config) -> anyhow::Result<Self> {
        let mut s = GtpuSockets::default();
        for (a, key) in cfg.gtpu_addresses() {
            s.socks.push(Socket::bind(a, &key).await?);
        }
        Ok(s)
    }

    /// The next datagram on any socket (never, without sockets).
    pub async fn recv(&mut self) -> std::io::Result<Datagram> {
        if self.socks.is_empty() {
            return std::future::pending().await;
        }
        poll_fn(|cx| {
            let n = self.socks.len();
            for k in 0..n {
                let i = (self.next + k) % n;
                let s = &mut self.socks[i];
                let mut rb = ReadBuf::new(&mut s.buf);
                match s.sock.poll_recv_from(cx, &mut rb) {
                    Poll::Ready(Ok(from)) => {
                        self.next = (i + 1) % n;
                        return Poll::Ready(Ok(Datagram {
                            from,
                            local: s.local,
                            data: rb.filled().to_vec(),
                        }));
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {}
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Send each datagram from our address `local` if we have a socket there, else from
    /// the first address of the destination's IP version (N3's).
    pub async fn send_from(&self, local: Option<IpAddr>, outs: Vec<(SocketAddr, Vec<u8>)>) {
        for (to, d) in outs {
            let sock = self
                .socks
                .iter()
                .find(|s| Some(s.local) == local && s.local.is_ipv4() == to.is_ipv4())
                .or_else(|| {
                    self.socks
                        .iter()
                        .find(|s| s.local.is_ipv4() == to.is_ipv4())
                });
            let Some(s) = sock else {
                debug!("gtpu: no GTP-U address of {to}'s IP version to send from");
                continue;
            };
            if let Err(e) = s.sock.send_to(&d, to).await {
                debug!("gtpu: send to {to}: {e}");
            }
        }
    }

    /// Send each datagram from the N3 address of its destination's IP version.
    pub async fn send(&self, outs: Vec<(SocketAddr, Vec<u8>)>) {
        self.send_from(None, outs).await
    }
}

impl Socket {
    async fn bind(local: IpAddr, key: &str) -> anyhow::Result<Self> {
        let at = SocketAddr::new(local, 2152);
        let sock = UdpSocket::bind(at)
            .await
            .with_context(|| format!("{key}: binding {at}"))?;
        Ok(Socket {
            sock,
            local,
            buf: vec![0u8; 65536],
        })
    }
}
