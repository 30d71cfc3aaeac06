//! Watches the routing state of upfd's network namespace (rtnetlink notifications of
//! links, addresses, routes, policy rules and neighbours), so that the XDP data path's
//! next-hop cache (bpf/include/egress.h) is invalidated as soon as any of it changes:
//! a new route or a gNB's new MAC address applies to the next packet, not a second
//! later. [`NextHopKeeper`] does that for upfd's event loop.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::task::JoinHandle;
use upf_bpf::datapath::Datapath;

// rtnetlink multicast groups as bind(2) bitmask bits (linux/rtnetlink.h): RTMGRP_LINK,
// RTMGRP_NEIGH, RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV4_RULE,
// RTMGRP_IPV6_IFADDR, RTMGRP_IPV6_ROUTE, and RTNLGRP_IPV6_RULE (group 19: bit 18).
const GROUPS: u32 = 0x1 | 0x4 | 0x10 | 0x40 | 0x80 | 0x100 | 0x400 | (1 << 18);

/// The next-hop cache's state, for /metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct NextHops {
    /// Routing notifications are heard, so the data path caches next hops (set when
    /// rendered: whether upfd still watches).
    pub on: bool,
    /// Cached per destination (no source policy rules, no multipath routes).
    pub by_destination: bool,
    /// Routing changes that emptied the cache.
    pub invalidations: u64,
}

/// Keeps the data path's next-hop cache right: invalidated at once on every routing
/// change, keyed by source and destination until a check (off the event loop: with a
/// large routing table it takes long, and N4 must not wait) finds that the FIB's answer
/// cannot depend on the source. Without routing notifications the cache is off and
/// every packet asks the kernel FIB.
pub struct NextHopKeeper {
    watch: Option<RouteWatch>,
    /// The check in flight, with the invalidation count it was asked at.
    check: Option<(u64, JoinHandle<bool>)>,
    state: NextHops,
    /// The keying last logged.
    logged_by_destination: bool,
}

/// What the keeper waits for.
pub enum RoutingEvent {
    /// Routing notifications (or their failure).
    Changed(io::Result<usize>),
    /// A check ended: whether next hops cannot depend on the source.
    Checked(bool),
}

impl NextHopKeeper {
    /// Watch the namespace's routing (or turn the cache off) and key the cache as the
    /// routing is now.
    pub fn start(dp: &mut Datapath) -> Self {
        let mut k = NextHopKeeper {
            watch: None,
            check: None,
            state: NextHops::default(),
            logged_by_destination: false,
        };
        match RouteWatch::open() {
            Ok(w) => {
                k.watch = Some(w);
                let by_destination = source_independent();
                log_keying(by_destination);
                k.state.by_destination = by_destination;
                k.logged_by_destination = by_destination;
                if let Err(e) = dp.set_nexthop_by_destination(by_destination) {
                    warn!("xdp: invalidating the next-hop cache: {e}");
                }
            }
            Err(e) => {
                warn!("xdp: no routing notifications ({e}): next-hop cache off");
                if let Err(e) = dp.disable_nexthop_cache() {
                    warn!("xdp: turning the next-hop cache off: {e}");
                }
            }
        }
        k
    }

    /// The cache's state, for /metrics.
    pub fn state(&self) -> NextHops {
        NextHops {
            on: self.watch.is_some(),
            ..self.state
        }
    }

    /// The next routing change or finished check (never, with neither to wait for).
    pub async fn next(&mut self) -> RoutingEvent {
        let (watch, check) = (&self.watch, &mut self.check);
        let changed = async move {
            match watch {
                Some(w) => w.changed().await,
                None => std::future::pending().await,
            }
        };
        let checked = async move {
            match check {
                Some((_, h)) => h.await.unwrap_or(false),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = changed => RoutingEvent::Changed(r),
            r = checked => RoutingEvent::Checked(r),
        }
    }

    pub fn apply(&mut self, e: RoutingEvent, dp: &mut Datapath) {
        match e {
            RoutingEvent::Changed(Ok(_)) => {
                // Right whatever changed, until a check says the source does not matter.
                if let Err(e) = dp.set_nexthop_by_destination(false) {
                    warn!("xdp: invalidating the next-hop cache: {e}");
                }
                self.state.invalidations += 1;
                if self.check.is_none() {
                    self.start_check();
                }
            }
            RoutingEvent::Changed(Err(e)) => {
                // Unwatched from here on: the cache goes off for good.
                warn!("xdp: routing notifications failed ({e}): next-hop cache off");
                let _ = dp.disable_nexthop_cache();
                self.watch = None;
            }
            RoutingEvent::Checked(by_destination) => {
                let asked_at = self.check.take().map_or(0, |c| c.0);
                if asked_at != self.state.invalidations {
                    // Routing changed again while the check ran: ask again.
                    self.start_check();
                    return;
                }
                if by_destination != self.logged_by_destination {
                    log_keying(by_destination);
                    self.logged_by_destination = by_destination;
                }
                if by_destination {
                    if let Err(e) = dp.set_nexthop_by_destination(true) {
                        warn!("xdp: invalidating the next-hop cache: {e}");
                    }
                }
                self.state.by_destination = by_destination;
            }
        }
    }

    fn start_check(&mut self) {
        let h = tokio::task::spawn_blocking(source_independent);
        self.check = Some((self.state.invalidations, h));
    }
}

fn log_keying(by_destination: bool) {
    info!(
        "xdp: next hops cached per {}",
        if by_destination {
            "destination (no source policy rules, no multipath routes)"
        } else {
            "source and destination (source policy rules or multipath routes present)"
        }
    );
}

/// An rtnetlink socket subscribed to every change that can move a next hop.
pub struct RouteWatch {
    fd: AsyncFd<OwnedFd>,
}

impl RouteWatch {
    pub fn open() -> io::Result<RouteWatch> {
        let fd = rtnetlink_socket(libc::SOCK_NONBLOCK)?;
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

/// Whether the kernel FIB's answer for a packet cannot depend on its source address:
/// no policy rule selects on the source (`ip rule add from ...`) and no route has
/// several next hops (ECMP hashes the source). Then the next-hop cache keeps one entry
/// per destination rather than per (source, destination): a million UEs sending to the
/// same hosts share them. An error counts as "it may depend".
pub fn source_independent() -> bool {
    match (dump(libc::RTM_GETRULE), dump(libc::RTM_GETROUTE)) {
        (Ok(rules), Ok(routes)) => {
            // fib_rule_hdr and rtmsg both start: family, dst_len, src_len.
            let by_source = rules.iter().any(|m| m.get(2).is_some_and(|&l| l != 0));
            let multipath = routes.iter().any(|m| has_attr(m, RTMSG_LEN, RTA_MULTIPATH));
            !by_source && !multipath
        }
        _ => false,
    }
}

/// A NETLINK_ROUTE socket (`flags`: extra socket(2) type flags such as SOCK_NONBLOCK).
fn rtnetlink_socket(flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked before use.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | flags,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

const NLMSG_HDR: usize = 16;
const RTMSG_LEN: usize = 12;
const RTA_MULTIPATH: u16 = 9;

/// Whether the rtattrs after a `fixed`-octet header in `body` hold one of type `ty`.
fn has_attr(body: &[u8], fixed: usize, ty: u16) -> bool {
    let mut off = fixed;
    while off + 4 <= body.len() {
        let len = u16::from_ne_bytes([body[off], body[off + 1]]) as usize;
        let t = u16::from_ne_bytes([body[off + 2], body[off + 3]]) & 0x3fff;
        if len < 4 {
            return false;
        }
        if t == ty {
            return true;
        }
        off += (len + 3) & !3;
    }
    false
}

/// An rtnetlink dump of `request` (RTM_GETRULE, RTM_GETROUTE) for both families: the
/// body of each answer. Bounded: 500 ms without an answer, 64 MiB.
fn dump(request: u16) -> io::Result<Vec<Vec<u8>>> {
    let fd = rtnetlink_socket(0)?;
    // A dump of this namespace's tables takes milliseconds. Only upfd's start waits on
    // it (later checks run on a blocking thread), but a stuck kernel must not hang it.
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 500_000,
    };
    // SAFETY: setsockopt with a timeval we own and its size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    // nlmsghdr + rtmsg (12 octets; fib_rule_hdr has the same size), family AF_UNSPEC.
    let mut req = [0u8; NLMSG_HDR + RTMSG_LEN];
    req[0..4].copy_from_slice(&((NLMSG_HDR + RTMSG_LEN) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&request.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // SAFETY: send a buffer we own, with its length.
    let r = unsafe {
        libc::send(
            fd.as_raw_fd(),
            req.as_ptr() as *const libc::c_void,
            req.len(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut total = 0usize;
    let mut buf = vec![0u8; 65536];
    loop {
        // SAFETY: recv into a buffer we own, with its length.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        total += n;
        if n == 0 || total > 64 << 20 {
            return Err(io::Error::other("rtnetlink dump cut short"));
        }
        let mut off = 0;
        while off + NLMSG_HDR <= n {
            let len =
                u32::from_ne_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]]) as usize;
            let ty = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
            if len < NLMSG_HDR || off + len > n {
                return Err(io::Error::other("malformed rtnetlink answer"));
            }
            match ty as i32 {
                libc::NLMSG_DONE => return Ok(out),
                libc::NLMSG_ERROR => return Err(io::Error::other("rtnetlink dump refused")),
                _ => out.push(buf[off + NLMSG_HDR..off + len].to_vec()),
            }
            off += (len + 3) & !3;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtattr_walk_finds_the_type_and_stops_on_garbage() {
        // rtmsg (12), RTA_TABLE (4 + 4), RTA_MULTIPATH (4 + 8).
        let mut m = vec![0u8; 12];
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&15u16.to_ne_bytes());
        m.extend_from_slice(&[254, 0, 0, 0]);
        assert!(!has_attr(&m, RTMSG_LEN, RTA_MULTIPATH));
        m.extend_from_slice(&12u16.to_ne_bytes());
        m.extend_from_slice(&RTA_MULTIPATH.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        assert!(has_attr(&m, RTMSG_LEN, RTA_MULTIPATH));
        // A zero length does not loop.
        let mut bad = vec![0u8; 12];
        bad.extend_from_slice(&[0, 0, 9, 0]);
        assert!(!has_attr(&bad, RTMSG_LEN, RTA_MULTIPATH));
    }
}
