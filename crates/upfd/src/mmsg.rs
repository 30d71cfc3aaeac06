//! N4's datagrams a batch at a time: `recvmmsg(2)` takes what is queued behind the
//! datagram that woke the event loop, `sendmmsg(2)` sends the batch's responses, one
//! system call each instead of one per datagram (issue 28: `sendto` alone was a quarter
//! of upfd's time establishing sessions). Both never block: what the kernel does not
//! take now is left to the caller's waiting path.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use tokio::io::Interest;
use tokio::net::UdpSocket;

/// The largest PFCP message: a UDP payload (TS 29.244 clause 7.2.1 puts no other
/// bound on it).
const MAX_DATAGRAM: usize = 65536;

/// Buffers for up to `n` datagrams received at once.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
    froms: Vec<Option<SocketAddr>>,
    count: usize,
}

impl RecvBatch {
    pub fn new(n: usize) -> Self {
        RecvBatch {
            bufs: (0..n).map(|_| vec![0u8; MAX_DATAGRAM]).collect(),
            lens: vec![0; n],
            froms: vec![None; n],
            count: 0,
        }
    }

    /// Receive up to `max` (at most the batch's size) datagrams already queued on
    /// `sock`, without waiting: how many came (0 when none was queued).
    pub fn receive(&mut self, sock: &UdpSocket, max: usize) -> io::Result<usize> {
        let max = max.min(self.bufs.len());
        self.count = 0;
        if max == 0 {
            return Ok(0);
        }
        // SAFETY: a zeroed sockaddr_storage is a valid value.
        let empty: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let room = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let mut names = vec![(empty, room); max];
        let mut iovs: Vec<libc::iovec> = self.bufs[..max]
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        let mut msgs = headers(&mut names, &mut iovs);
        let got = sock.try_io(Interest::READABLE, || {
            // SAFETY: `msgs` points at `max` headers whose names and buffers live
            // until the call returns; MSG_DONTWAIT: never blocks.
            counted(unsafe {
                libc::recvmmsg(
                    sock.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    max as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            })
        });
        let got = match got {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        for (i, m) in msgs.iter().enumerate().take(got) {
            self.lens[i] = m.msg_len as usize;
            self.froms[i] = from_sockaddr(&names[i].0, m.msg_hdr.msg_namelen);
        }
        self.count = got;
        Ok(got)
    }

    /// The datagrams of the last [`RecvBatch::receive`], with their senders (a sender
    /// that is not an IP address, which a UDP socket never has, is skipped).
    pub fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> {
        (0..self.count).filter_map(|i| Some((self.froms[i]?, &self.bufs[i][..self.lens[i]])))
    }
}

/// Send `datagrams` with as few `sendmmsg` calls as the kernel takes them in (at most
/// 64 each), without waiting: how many went. The rest (a full send buffer, or an error
/// at the first of them) is for the caller to send one by one, which waits and says
/// the error.
pub fn send_batch(sock: &UdpSocket, datagrams: &[(SocketAddr, &[u8])]) -> usize {
    const CHUNK: usize = 64;
    let mut sent = 0;
    while sent < datagrams.len() {
        let chunk = &datagrams[sent..datagrams.len().min(sent + CHUNK)];
        let mut names: Vec<(libc::sockaddr_storage, libc::socklen_t)> =
            chunk.iter().map(|(a, _)| to_sockaddr(a)).collect();
        let mut iovs: Vec<libc::iovec> = chunk
            .iter()
            .map(|(_, d)| libc::iovec {
                iov_base: d.as_ptr() as *mut libc::c_void,
                iov_len: d.len(),
            })
            .collect();
        let mut msgs = headers(&mut names, &mut iovs);
        let r = sock.try_io(Interest::WRITABLE, || {
            // SAFETY: `msgs` points at headers whose names and buffers outlive the
            // call; MSG_DONTWAIT: never blocks.
            counted(unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    msgs.len() as u32,
                    libc::MSG_DONTWAIT,
                )
            })
        });
        match r {
            Ok(n) if n > 0 => {
                sent += n;
                if n < chunk.len() {
                    // The kernel took part of a chunk: the rest waits.
                    break;
                }
            }
            _ => break,
        }
    }
    sent
}

/// A message header for each name (a socket address and its length) and buffer: the
/// names and buffers must outlive the system call that takes the headers.
fn headers(
    names: &mut [(libc::sockaddr_storage, libc::socklen_t)],
    iovs: &mut [libc::iovec],
) -> Vec<libc::mmsghdr> {
    names
        .iter_mut()
        .zip(iovs.iter_mut())
        .map(|((name, len), iov)| {
            // SAFETY: a zeroed mmsghdr is a valid value.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_name = (name as *mut libc::sockaddr_storage).cast();
            m.msg_hdr.msg_namelen = *len;
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect()
}

/// A system call's count, or its error.
fn counted(r: libc::c_int) -> io::Result<usize> {
    usize::try_from(r).map_err(|_| io::Error::last_os_error())
}

/// A socket address as the kernel takes it.
fn to_sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: a zeroed sockaddr_storage is valid, and large and aligned enough for
    // either family's address written into it.
    let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            unsafe { std::ptr::write((&mut s as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            unsafe { std::ptr::write((&mut s as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (s, len as libc::socklen_t)
}

/// The socket address the kernel wrote (`len` octets of it), if it is an IP one.
fn from_sockaddr(s: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match i32::from(s.ss_family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says it is a sockaddr_in, and it is that long.
            let sin: libc::sockaddr_in =
                unsafe { std::ptr::read((s as *const libc::sockaddr_storage).cast()) };
            Some(SocketAddr::from((
                sin.sin_addr.s_addr.to_ne_bytes(),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: libc::sockaddr_in6 =
                unsafe { std::ptr::read((s as *const libc::sockaddr_storage).cast()) };
            Some(SocketAddr::V6(std::net::SocketAddrV6::new(
                sin6.sin6_addr.s6_addr.into(),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn socket_addresses_go_to_the_kernel_and_back_unchanged() {
        for a in [
            "127.0.0.7:8805",
            "10.1.2.3:1",
            "[2001:db8::7]:8805",
            "[fe80::1%3]:65535",
        ] {
            let a: SocketAddr = a.parse().unwrap();
            let (s, len) = to_sockaddr(&a);
            assert_eq!(from_sockaddr(&s, len), Some(a));
            assert_eq!(from_sockaddr(&s, len - 1), None, "cut short");
        }
    }

    /// Datagrams queued on a socket come in one call, in order and whole, each with
    /// its sender; what is sent in one call arrives as that many datagrams.
    #[test]
    fn batches_go_and_come_whole_and_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let rx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let tx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let to = rx.local_addr().unwrap();
            // Within the receive buffer's default size (UDP drops what does not fit).
            const N: usize = 40;
            let payloads: Vec<Vec<u8>> =
                (0..N).map(|i| vec![i as u8; 1 + (i * 97) % 1200]).collect();
            let batch: Vec<(SocketAddr, &[u8])> =
                payloads.iter().map(|p| (to, p.as_slice())).collect();
            let mut sent = send_batch(&tx, &batch);
            for (a, d) in &batch[sent..] {
                tx.send_to(d, a).await.unwrap();
                sent += 1;
            }
            assert_eq!(sent, N);
            let mut got = Vec::new();
            let mut b = RecvBatch::new(16);
            while got.len() < N {
                let n = b.receive(&rx, 16).unwrap();
                if n == 0 {
                    let wait = tokio::time::timeout(Duration::from_secs(10), rx.readable());
                    assert!(wait.await.is_ok(), "{} of {N} came", got.len());
                    continue;
                }
                assert!(n <= 16);
                for (from, d) in b.datagrams() {
                    assert_eq!(from, tx.local_addr().unwrap());
                    got.push(d.to_vec());
                }
            }
            assert_eq!(got, payloads);
            assert_eq!(b.receive(&rx, 16).unwrap(), 0, "nothing left");
        });
    }
}
