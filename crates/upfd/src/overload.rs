//! upfd's load as the N4 node reports it to CP functions ([`upf::load`]): the session
//! table's fill and the N4 receive queue's. The queue is the socket's receive buffer,
//! bounded by the kernel (`n4.receive_buffer`, 8 MiB by default); what does not fit is dropped by the
//! kernel and counted here. Before each batch of requests upfd reads how full it is; at
//! half full upfd is overloaded (new sessions refused with Cause 74, reported in
//! Overload Control Information) until it is under a quarter full again.

use std::os::fd::AsRawFd;

use tokio::net::UdpSocket;
use upf::load::Load;

/// Queue fill (percent) at which overload starts, and under which it ends.
const OVERLOAD_FROM: u32 = 50;
const OVERLOAD_UNTIL: u32 = 25;

/// `struct sk_meminfo` indices (linux/sock_diag.h).
const SK_MEMINFO_RMEM_ALLOC: usize = 0;
const SK_MEMINFO_RCVBUF: usize = 1;
const SK_MEMINFO_DROPS: usize = 8;
const SK_MEMINFO_VARS: usize = 9;

/// The N4 socket's queue, measured.
#[derive(Debug, Default)]
pub struct N4Queue {
    overloaded: bool,
    /// The last load computed.
    pub load: Load,
    /// Requests the kernel dropped because the queue was full (SO_MEMINFO's drops).
    pub drops: u64,
    /// Octets queued and the queue's size, at the last measurement.
    pub queued: u32,
    pub size: u32,
}

impl N4Queue {
    /// The load now: the larger of the session table's and the queue's fill; an overload
    /// reduction while the queue is (still) too full, in steps of 10 %.
    pub fn measure(&mut self, sock: &UdpSocket, sessions: usize, max_sessions: usize) -> Load {
        let table = (sessions * 100 / max_sessions.max(1)).min(100) as u32;
        let fill = match meminfo(sock) {
            Some(m) => {
                self.queued = m[SK_MEMINFO_RMEM_ALLOC];
                self.size = m[SK_MEMINFO_RCVBUF];
                self.drops = u64::from(m[SK_MEMINFO_DROPS]);
                (u64::from(self.queued) * 100 / u64::from(self.size.max(1))).min(100) as u32
            }
            None => 0,
        };
        self.overloaded = if self.overloaded {
            fill >= OVERLOAD_UNTIL
        } else {
            fill >= OVERLOAD_FROM
        };
        let reduction = if self.overloaded {
            (fill.div_ceil(10) * 10).clamp(10, 100)
        } else {
            0
        };
        self.load = Load {
            metric: table.max(fill) as u8,
            reduction: reduction as u8,
        };
        self.load
    }
}

/// SO_MEMINFO of a socket (Linux 3.9+): what its queues hold and drop.
fn meminfo(sock: &UdpSocket) -> Option<[u32; SK_MEMINFO_VARS]> {
    let mut m = [0u32; SK_MEMINFO_VARS];
    let mut len = std::mem::size_of_val(&m) as libc::socklen_t;
    // SAFETY: the buffer and its length are valid for the call; the kernel writes at
    // most `len` octets.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            m.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (r == 0).then_some(m)
}

/// The N4 receive queue's size when `n4.receive_buffer` is not set: 8 MiB, thousands of
/// requests (a tenth of a second's work or more), so that an SMF's normal window of
/// requests in flight is a few percent of it and only a real backlog is overload. The
/// kernel's default (about 208 KiB) held less than a hundred: 64 in flight were over half.
pub const DEFAULT_RECEIVE_BUFFER: usize = 8 << 20;

/// Set the socket's receive buffer: SO_RCVBUFFORCE (upfd runs with CAP_NET_ADMIN for
/// XDP), else SO_RCVBUF, which the kernel caps at net.core.rmem_max. The kernel doubles
/// the value for its bookkeeping.
pub fn set_receive_buffer(sock: &UdpSocket, octets: usize) -> std::io::Result<()> {
    let v = libc::c_int::try_from(octets).unwrap_or(libc::c_int::MAX);
    let set = |opt| {
        // SAFETY: a valid fd and a pointer to a c_int of the given size.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set(libc::SO_RCVBUFFORCE) == 0 || set(libc::SO_RCVBUF) == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
