//! Watches the routing state of upfd's network namespace (rtnetlink notifications of
//! links, addresses, routes, policy rules and neighbours), so that the XDP data path's
//! next-hop cache (bpf/include/egress.h) is invalidated as soon as any of it changes:
//! a new route or a gNB's new MAC address applies to the next packet, not a second
//! later.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

// rtnetlink multicast groups as bind(2) bitmask bits (linux/rtnetlink.h): RTMGRP_LINK,
// RTMGRP_NEIGH, RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV4_RULE,
// RTMGRP_IPV6_IFADDR, RTMGRP_IPV6_ROUTE, and RTNLGRP_IPV6_RULE (group 19: bit 18).
const GROUPS: u32 = 0x1 | 0x4 | 0x10 | 0x40 | 0x80 | 0x100 | 0x400 | (1 << 18);

/// An rtnetlink socket subscribed to every change that can move a next hop.
pub struct RouteWatch {
    fd: AsyncFd<OwnedFd>,
}

impl RouteWatch {
    pub fn open() -> io::Result<RouteWatch> {
        // SAFETY: plain socket(2); the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain data; zeroed is a valid value.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = GROUPS;
        // SAFETY: bind with a sockaddr_nl we own and its exact size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the AsyncFd owns the descriptor, so it stays open while registered.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)? };
        Ok(RouteWatch { fd })
    }

    /// Waits for notifications and reads all that are queued: the number of datagrams.
    /// A lost notification (ENOBUFS: the queue overflowed) counts as a change too.
    pub async fn changed(&self) -> io::Result<usize> {
        let mut buf = [0u8; 8192];
        let mut n = 0;
        loop {
            let mut guard = self.fd.readable().await?;
            loop {
                // SAFETY: recv into a buffer we own, with its length.
                let r = unsafe {
                    libc::recv(
                        self.fd.get_ref().as_raw_fd(),
                        buf.as_mut_ptr() as *mut libc::c_void,
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if r >= 0 {
                    n += 1;
                    continue;
                }
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => n += 1,
                    _ => return Err(e),
                }
            }
            guard.clear_ready();
            if n > 0 {
                return Ok(n);
            }
        }
    }
}
