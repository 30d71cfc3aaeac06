//! A delay line: datagrams held a fixed time, then handed on in the order they came.
//!
//! The emulator's `--dl-delay-ms` and `--ul-delay-ms` model the N3 transport between the
//! UPF and the gNB, so that a UPF measuring packet delay by QoS monitoring (TS 23.501
//! clause 5.33.3.2) sees a known delay. One thread per line waits on a condition
//! variable until the oldest datagram is due (no busy waiting); the delay is the same for
//! every datagram, so holding them in a FIFO keeps their order. The queue is bounded in
//! datagrams and octets ([`MAX_HELD`], [`MAX_HELD_OCTETS`]) and in time (a delay of at
//! most [`MAX_DELAY`]): what does not fit is refused and the caller counts it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// The longest delay a line accepts.
pub const MAX_DELAY: Duration = Duration::from_secs(10);
/// Datagrams held at most at once.
pub const MAX_HELD: usize = 65536;
/// Octets held at most at once.
pub const MAX_HELD_OCTETS: usize = 64 << 20;
/// Buffers kept for reuse once handed on, so that a steady flow does not allocate.
const SPARE_BUFFERS: usize = 1024;
/// How often a waiting line looks at the stop flag.
const TICK: Duration = Duration::from_millis(200);

/// One datagram held in a line.
#[derive(Debug)]
pub struct Held {
    /// When it is handed on.
    pub due: Instant,
    /// The wall-clock time given with it (when it arrived, or when it was stamped).
    pub at: SystemTime,
    /// The peer: where it came from (downlink) or where it goes (uplink).
    pub addr: SocketAddr,
    /// The datagram.
    pub data: Vec<u8>,
}

#[derive(Debug, Default)]
struct Queue {
    held: VecDeque<Held>,
    octets: usize,
    spare: Vec<Vec<u8>>,
}

/// Datagrams held `delay`, then handed to [`DelayLine::run`]'s function in order.
#[derive(Debug)]
pub struct DelayLine {
    delay: Duration,
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl DelayLine {
    /// A line that holds each datagram `delay` (at most [`MAX_DELAY`]; longer is cut
    /// to it: the callers check their configuration first).
    pub fn new(delay: Duration) -> DelayLine {
        DelayLine {
            delay: delay.min(MAX_DELAY),
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
        }
    }

    /// The delay.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic in the handing-on function cannot leave the queue inconsistent.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds a copy of `data`, due `delay` from now. False, and nothing held, when the
    /// line is full.
    pub fn push(&self, data: &[u8], addr: SocketAddr, at: SystemTime) -> bool {
        let due = Instant::now() + self.delay;
        let mut q = self.lock();
        if q.held.len() >= MAX_HELD || q.octets + data.len() > MAX_HELD_OCTETS {
            return false;
        }
        let mut buf = q.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        q.octets += buf.len();
        let was_empty = q.held.is_empty();
        q.held.push_back(Held {
            due,
            at,
            addr,
            data: buf,
        });
        drop(q);
        // A waiting line sleeps until its oldest datagram is due: only a first one
        // changes that.
        if was_empty {
            self.ready.notify_one();
        }
        true
    }

    /// Datagrams held now.
    pub fn len(&self) -> usize {
        self.lock().held.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands each datagram to `f` once it is due, in the order pushed, until `stop` is
    /// set (seen within [`TICK`]); what is still held then is dropped.
    pub fn run(&self, stop: &AtomicBool, mut f: impl FnMut(&Held)) {
        let mut q = self.lock();
        while !stop.load(Relaxed) {
            let now = Instant::now();
            let wait = match q.held.front() {
                Some(h) if h.due <= now => None,
                Some(h) => Some((h.due - now).min(TICK)),
                None => Some(TICK),
            };
            if let Some(wait) = wait {
                q = self
                    .ready
                    .wait_timeout(q, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            let Some(held) = q.held.pop_front() else {
                continue;
            };
            q.octets -= held.data.len();
            drop(q);
            f(&held);
            q = self.lock();
            if q.spare.len() < SPARE_BUFFERS {
                q.spare.push(held.data);
            }
        }
        q.held.clear();
        q.octets = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn addr() -> SocketAddr {
        "127.0.0.1:2152".parse().unwrap()
    }

    #[test]
    fn hands_on_in_order_after_the_delay() {
        let line = Arc::new(DelayLine::new(Duration::from_millis(30)));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let runner = {
            let (line, stop) = (line.clone(), stop.clone());
            std::thread::spawn(move || {
                line.run(&stop, |h| {
                    let _ = tx.send((h.data.clone(), h.due, Instant::now()));
                })
            })
        };
        let pushed = Instant::now();
        for i in 0..50u8 {
            assert!(line.push(&[i; 3], addr(), SystemTime::now()));
        }
        let mut got = Vec::new();
        while got.len() < 50 {
            let (data, due, at) = rx.recv_timeout(Duration::from_secs(30)).expect("handed on");
            // Never before it is due, and due a delay after it was pushed.
            assert!(at >= due && due >= pushed + Duration::from_millis(30));
            got.push(data[0]);
        }
        assert_eq!(got, (0..50).collect::<Vec<u8>>());
        stop.store(true, Relaxed);
        runner.join().unwrap();
    }

    #[test]
    fn refuses_what_does_not_fit_and_drops_on_stop() {
        let line = DelayLine::new(Duration::from_secs(5));
        for _ in 0..MAX_HELD {
            assert!(line.push(&[0], addr(), SystemTime::now()));
        }
        assert!(!line.push(&[0], addr(), SystemTime::now()));
        assert_eq!(line.len(), MAX_HELD);
        let big = DelayLine::new(MAX_DELAY * 2);
        assert_eq!(big.delay(), MAX_DELAY);
        let chunk = vec![0u8; 65536];
        for _ in 0..MAX_HELD_OCTETS / chunk.len() {
            assert!(big.push(&chunk, addr(), SystemTime::now()));
        }
        assert!(!big.push(&[0], addr(), SystemTime::now()));
        let stop = AtomicBool::new(true);
        big.run(&stop, |_| panic!("nothing is due"));
        assert!(big.is_empty());
    }
}
