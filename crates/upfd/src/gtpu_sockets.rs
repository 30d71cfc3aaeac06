//! upfd's GTP-U sockets on the N3 addresses (UDP 2152), one per IP version: what the
//! data path hands up arrives on them (Echo, Error Indication, G-PDUs for unknown
//! TEIDs); Echo, Error Indication and End Marker leave from them.

use std::net::{IpAddr, SocketAddr};

use anyhow::Context;
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
    v4: Option<Socket>,
    v6: Option<Socket>,
}

/// A socket, its address, and the buffer it receives into (kept: a receive that another
/// event interrupts is started again at every turn of the event loop).
struct Socket {
    sock: UdpSocket,
    local: IpAddr,
    buf: Vec<u8>,
}

impl GtpuSockets {
    /// Sockets on `gtpu.n3.ipv4` and `gtpu.n3.ipv6`, those configured.
    pub async fn bind(cfg: &Config) -> anyhow::Result<Self> {
        let mut s = GtpuSockets::default();
        if let Some(a) = cfg.gtpu.n3.ipv4 {
            s.v4 = Some(Socket::bind(IpAddr::V4(a), "gtpu.n3.ipv4").await?);
        }
        if let Some(a) = cfg.gtpu.n3.ipv6 {
            s.v6 = Some(Socket::bind(IpAddr::V6(a), "gtpu.n3.ipv6").await?);
        }
        Ok(s)
    }

    /// The next datagram on either socket (never, without sockets).
    pub async fn recv(&mut self) -> std::io::Result<Datagram> {
        tokio::select! {
            r = Socket::recv(&mut self.v4) => r,
            r = Socket::recv(&mut self.v6) => r,
        }
    }

    /// Send each datagram from the socket of its destination's IP version.
    pub async fn send(&self, outs: Vec<(SocketAddr, Vec<u8>)>) {
        for (to, d) in outs {
            let sock = if to.is_ipv4() { &self.v4 } else { &self.v6 };
            let Some(s) = sock else {
                debug!("gtpu: no N3 address of {to}'s IP version to send from");
                continue;
            };
            if let Err(e) = s.sock.send_to(&d, to).await {
                debug!("gtpu: send to {to}: {e}");
            }
        }
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

    async fn recv(s: &mut Option<Socket>) -> std::io::Result<Datagram> {
        let Some(s) = s else {
            return std::future::pending().await;
        };
        let (n, from) = s.sock.recv_from(&mut s.buf).await?;
        Ok(Datagram {
            from,
            local: s.local,
            data: s.buf[..n].to_vec(),
        })
    }
}
