//! `/check` in steps: the session books read a few at a time between the event loop's
//! other work, and judged at one moment at the end ([`upf::sessions::CheckWalk`]). Read
//! in one go, a million sessions held N4 for about 2 s. After a step the event loop has
//! as long again for the rest, as after a snapshot's: a step due at once starved N4 (the
//! runtime never looked at the sockets), and one due after a yield starved the check
//! while N4 was busy.

use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use upf::n4::N4;
use upf::sessions::CheckWalk;

use super::Reply;

/// A step reads sessions for at most this long, then the rest has as long again.
const STEP_TIME: Duration = Duration::from_millis(1);
/// Sessions read between two looks at the clock.
const STEP_GROUP: usize = 256;

/// A `/check` being answered.
pub struct Checking {
    walk: CheckWalk,
    reply: oneshot::Sender<Reply>,
    next_step: Instant,
    steps: u32,
    longest: Duration,
}

impl Checking {
    /// Begin: the SEIDs to read, and the sessions changed from now on noted.
    pub fn begin(n4: &mut N4, reply: oneshot::Sender<Reply>) -> Checking {
        let t = Instant::now();
        let walk = n4.check_begin();
        Checking {
            walk,
            reply,
            next_step: Instant::now() + t.elapsed(),
            steps: 1,
            longest: t.elapsed(),
        }
    }

    /// When the next step is due.
    pub fn step_due(&self) -> Instant {
        self.next_step
    }

    /// One step; at the last, the verdict sent (None: more steps to come).
    pub fn step(mut self, n4: &mut N4) -> Option<Checking> {
        // Its client has gone (the API thread dropped the answer's receiver): no one
        // reads the verdict, and the next /check would get 429 until this one ended.
        if self.reply.is_closed() {
            n4.check_end_unjudged();
            debug!(
                "api: /check abandoned after {} step(s): its client left",
                self.steps
            );
            drop_elsewhere(self.walk);
            return None;
        }
        let t = Instant::now();
        let mut more = true;
        while more && t.elapsed() < STEP_TIME {
            more = n4.check_step(&mut self.walk, STEP_GROUP);
        }
        if more {
            let took = t.elapsed();
            self.steps += 1;
            self.longest = self.longest.max(took);
            self.next_step = Instant::now() + took;
            return Some(self);
        }
        if self.walk.gave_up() {
            n4.check_end_unjudged();
            debug!(
                "api: /check gave up after {} step(s): sessions changed faster than it counted them again",
                self.steps
            );
            let busy = super::Response::error(
                503,
                "/check gave up: N4 changed sessions faster than the check could count them again; try again when N4 is quieter",
            )
            .header("retry-after", "10");
            let _ = self.reply.send(Reply::Done(busy));
            drop_elsewhere(self.walk);
            return None;
        }
        let verdict = n4.check_end(&mut self.walk);
        self.longest = self.longest.max(t.elapsed());
        debug!(
            "api: /check read {} session(s) in {} step(s), the longest {:?}",
            n4.sessions().len(),
            self.steps + 1,
            self.longest
        );
        let answer = super::views::check_answer(verdict, n4.sessions().len());
        let _ = self.reply.send(Reply::Done(answer));
        drop_elsewhere(self.walk);
        None
    }
}

/// Drop `walk` on a thread of its own: it holds a reference to every session read, and
/// dropping them all (and the last of those deleted meanwhile) took 20-95 ms at 400,000
/// sessions.
fn drop_elsewhere(walk: CheckWalk) {
    let _ = std::thread::Builder::new()
        .name("upfd-check-drop".into())
        .spawn(move || drop(walk));
}
