//! Connection set-up as state machines without I/O: [`Dial`] for the process that opens a
//! connection, [`Answer`] for the one that accepts it. Each is fed what happened (connected,
//! bytes received, sent, timed out, a lookup's result) and answers with what to do next
//! ([`DialStep`], [`AnswerStep`]): send these bytes, read at most that many, look something up,
//! adopt the connection as lane `k` of process `p`, yield to the peer's connection, or give up
//! and say why. `handshake.rs` carries the steps out on sockets; the tests drive both machines
//! against each other in memory.
//!
//! The conversation, all of it fixed-size so that nothing of variable length is read from an
//! unauthenticated peer:
//!
//! 1. the job-secret challenge-response of `baton_pmi::auth` under its `TRANSPORT` protocol,
//!    keyed: the client's hello names (by key id) which of the secrets the server trusts it
//!    proves; the secret never crosses the wire;
//! 2. client → server: `BTID`, job (u64), rank in that job (u32), lane (u32), little-endian;
//! 3. server → client: one verdict byte, `ACCEPT`, `USE_MINE` or `REFUSE`.
//!
//! The authentication is driven through the machines as bytes (`ClientExchange`,
//! `ServerHello`, `ServerExchange` compute them), not run as one blocking step: so the machines
//! own every decision and timeout of the set-up, and the tests can run a wrong secret, garbage
//! or a forged key id without sockets or threads.
//!
//! Invariants:
//! - A step that reads never asks for more than the rest of the message it expects: the
//!   connection carries frames right after the verdict, and the set-up must not swallow them.
//! - A connection is adopted by both ends, or by neither: the client adopts on `ACCEPT`, which
//!   the server sends only after it marked the lane [`Link::Up`] ([`tie_break`]).
//! - When two processes dial each other at once, each answer sees its own side's lane
//!   `Connecting`; the connection opened by the lower (job, rank) wins, the other process is
//!   told `USE_MINE` and yields. So each pair ends with one connection per lane, and nothing but
//!   the set-up was ever sent on the loser.
//! - An answer waits up to `LEARN_WAIT` for a secret or a process it does not know yet to be
//!   registered: a process of a job that just connected may dial before this side learnt of it.

use crate::engine::ProcIdx;
use baton_pmi::auth::{ClientExchange, Secret, ServerExchange, ServerHello, TRANSPORT, UNKNOWN_KEY};
use std::io;
use std::time::{Duration, Instant};

/// The server's verdict on a connection, after the client named itself: it is accepted.
const ACCEPT: u8 = 1;
/// The server's own connection for that lane wins; the client waits for it.
const USE_MINE: u8 = 2;
/// The server does not know, or does not admit, the process the client names.
const REFUSE: u8 = 3;
const IDENT_MAGIC: [u8; 4] = *b"BTID";
const IDENT_LEN: usize = 20;
/// The longest message either side reads.
pub(super) const MAX_MESSAGE: usize = ClientExchange::ANSWER_LEN;
/// How long an unauthenticated client may take for each of its messages.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an answer waits for the secret or the process a client names to be registered.
const LEARN_WAIT: Duration = Duration::from_secs(4);
/// How often it looks again meanwhile.
const LEARN_POLL: Duration = Duration::from_millis(1);
/// How long a dial waits after a refused connect (a full backlog) before it tries again.
const RETRY_AFTER: Duration = Duration::from_millis(10);

/// The state of one lane to one process, shared by this process's dials and answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Link {
    Down,
    /// This process is dialling it.
    Connecting,
    /// A connection exists, or was accepted and is on its way to the process.
    Up,
}

/// A process as the wire names it: its job and its rank in that job.
pub(super) type Who = (u64, u32);

/// Whether this process dials a lane whose state here is `link` (it is then `Connecting`), or
/// only waits for the connection that is up or on its way to it.
pub(super) fn start_dial(link: &mut Link) -> bool {
    if *link == Link::Up {
        return false;
    }
    *link = Link::Connecting;
    true
}

/// The verdict on a client's connection for a lane whose state here is `link`, between this
/// process (`me`) and the client (`them`); marks the lane up when the connection is accepted.
pub(super) fn tie_break(link: &mut Link, me: Who, them: Who) -> u8 {
    match *link {
        Link::Up => USE_MINE,
        Link::Connecting if me < them => USE_MINE,
        Link::Connecting | Link::Down => {
            *link = Link::Up;
            ACCEPT
        }
    }
}

/// I/O a step asks for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Io {
    /// Send all of `bytes`, within `within`.
    Send { bytes: Vec<u8>, within: Duration },
    /// Read at least one byte and at most `want`, within `within`.
    Recv { want: usize, within: Duration },
}

/// What became of the I/O a step asked for.
#[derive(Debug)]
pub(super) enum Done<'a> {
    Sent,
    Received(&'a [u8]),
    /// The peer closed the connection.
    Closed,
    TimedOut,
    Failed(io::Error),
}

impl Done<'_> {
    /// Why the I/O failed, for messages.
    fn failure(&self) -> String {
        match self {
            Done::Closed => "the connection closed".into(),
            Done::TimedOut => "timed out".into(),
            Done::Failed(e) => e.to_string(),
            Done::Sent | Done::Received(_) => "out of order".into(),
        }
    }
}

/// The message a machine reads: the bytes so far, of how many.
struct Reading {
    need: usize,
    got: Vec<u8>,
}

impl Reading {
    fn new(need: usize) -> Reading {
        Reading { need, got: Vec::with_capacity(need) }
    }

    /// The step that reads the rest.
    fn recv(&self, within: Duration) -> Io {
        Io::Recv { want: self.need - self.got.len(), within }
    }

    /// Adds what arrived: the whole message once complete. More than was asked is a bug of the
    /// caller, which must not read past the message.
    fn add(&mut self, b: &[u8]) -> Result<Option<&[u8]>, String> {
        if b.len() > self.need - self.got.len() {
            return Err("read more than the handshake message".into());
        }
        self.got.extend_from_slice(b);
        Ok((self.got.len() == self.need).then_some(&self.got[..]))
    }
}

/// What a [`Dial`] asks for next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum DialStep {
    /// Open a TCP connection to the process, waiting at most `within`; then
    /// [`Dial::connected`].
    Connect { within: Duration },
    /// Wait that long, then [`Dial::waited`].
    Wait(Duration),
    /// Then [`Dial::io_done`].
    Io(Io),
    /// The connection is the lane asked for: use it.
    Adopt,
    /// The process's own connection for this lane wins: close this one and wait for that.
    Yield,
    /// Give up, for this reason.
    Fail(String),
}

enum DialPhase {
    Connect,
    Retry,
    /// Sending the hello, then reading the server's answer.
    Hello(ClientExchange),
    Answer(ClientExchange, Reading),
    /// Sending the proof, then reading the server's verdict on it.
    Proof(ClientExchange),
    Accepted(ClientExchange, Reading),
    /// Sending who this process is, then reading the verdict on the connection.
    Ident,
    Verdict(Reading),
    Over,
}

/// The client side of one connection's set-up: process `me` opens lane `lane` to a process
/// that holds `secret`, before `deadline`.
pub(super) struct Dial {
    me: Who,
    lane: u32,
    secret: Secret,
    deadline: Instant,
    phase: DialPhase,
}

impl Dial {
    pub(super) fn new(me: Who, lane: u32, secret: Secret, deadline: Instant) -> Dial {
        Dial { me, lane, secret, deadline, phase: DialPhase::Connect }
    }

    /// The first step.
    pub(super) fn start(&mut self, now: Instant) -> DialStep {
        self.phase = DialPhase::Connect;
        DialStep::Connect { within: self.left(now) }
    }

    /// Time left until the deadline (at least a millisecond: a timeout of 0 means none).
    fn left(&self, now: Instant) -> Duration {
        self.deadline.saturating_duration_since(now).max(Duration::from_millis(1))
    }

    fn fail(&mut self, why: String) -> DialStep {
        self.phase = DialPhase::Over;
        DialStep::Fail(why)
    }

    /// The connect asked for ended: `Ok` when connected. A refusal is retried until the
    /// deadline: the process published its address, so it listens, but its backlog may be
    /// full for a moment.
    pub(super) fn connected(&mut self, r: io::Result<()>, now: Instant) -> DialStep {
        match r {
            Ok(()) => match ClientExchange::start(&self.secret, &TRANSPORT, true) {
                Ok((ex, hello)) => {
                    self.phase = DialPhase::Hello(ex);
                    DialStep::Io(Io::Send { bytes: hello, within: self.left(now) })
                }
                Err(e) => self.fail(e.message().to_string()),
            },
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && now < self.deadline => {
                self.phase = DialPhase::Retry;
                DialStep::Wait(RETRY_AFTER)
            }
            Err(e) => self.fail(e.to_string()),
        }
    }

    /// The wait asked for is over.
    pub(super) fn waited(&mut self, now: Instant) -> DialStep {
        match self.phase {
            DialPhase::Retry => self.start(now),
            _ => self.fail("the connection set-up went out of order".into()),
        }
    }

    /// The I/O asked for is done.
    pub(super) fn io_done(&mut self, done: Done<'_>, now: Instant) -> DialStep {
        let within = self.left(now);
        match (std::mem::replace(&mut self.phase, DialPhase::Over), done) {
            (DialPhase::Hello(ex), Done::Sent) => {
                self.read(DialPhase::Answer(ex, Reading::new(ClientExchange::ANSWER_LEN)), within)
            }
            (DialPhase::Proof(ex), Done::Sent) => self.read(DialPhase::Accepted(ex, Reading::new(1)), within),
            (DialPhase::Ident, Done::Sent) => self.read(DialPhase::Verdict(Reading::new(1)), within),
            (DialPhase::Answer(ex, mut r), Done::Received(b)) => match r.add(b) {
                Ok(Some(answer)) => {
                    let answer: &[u8; ClientExchange::ANSWER_LEN] = answer.try_into().expect("a whole answer");
                    match ex.prove(answer) {
                        Ok(proof) => {
                            self.phase = DialPhase::Proof(ex);
                            DialStep::Io(Io::Send { bytes: proof.to_vec(), within })
                        }
                        Err(e) => self.fail(e.message().to_string()),
                    }
                }
                Ok(None) => self.read(DialPhase::Answer(ex, r), within),
                Err(why) => self.fail(why),
            },
            (DialPhase::Accepted(ex, mut r), Done::Received(b)) => match r.add(b) {
                Ok(Some(v)) => match ex.check_verdict(v[0]) {
                    Ok(()) => {
                        self.phase = DialPhase::Ident;
                        DialStep::Io(Io::Send { bytes: self.ident().to_vec(), within })
                    }
                    Err(e) => self.fail(e.message().to_string()),
                },
                Ok(None) => self.read(DialPhase::Accepted(ex, r), within),
                Err(why) => self.fail(why),
            },
            (DialPhase::Verdict(mut r), Done::Received(b)) => match r.add(b) {
                Ok(Some(v)) => match v[0] {
                    ACCEPT => DialStep::Adopt,
                    USE_MINE => DialStep::Yield,
                    _ => self.fail("the peer refused the connection (it does not know this process)".into()),
                },
                Ok(None) => self.read(DialPhase::Verdict(r), within),
                Err(why) => self.fail(why),
            },
            (phase, done) => {
                let what = match phase {
                    DialPhase::Hello(_) => "sending the authentication challenge".to_string(),
                    DialPhase::Answer(..) => format!("{} did not answer the challenge", TRANSPORT.server_name),
                    DialPhase::Proof(_) => "sending the authentication proof".to_string(),
                    DialPhase::Accepted(ex, _) => ex.rejected(),
                    DialPhase::Ident => "sending this process's name".to_string(),
                    DialPhase::Verdict(_) => "no verdict on the connection".to_string(),
                    DialPhase::Connect | DialPhase::Retry | DialPhase::Over => {
                        "the connection set-up went out of order".to_string()
                    }
                };
                self.fail(format!("{what} ({})", done.failure()))
            }
        }
    }

    fn read(&mut self, phase: DialPhase, within: Duration) -> DialStep {
        let io = match &phase {
            DialPhase::Answer(_, r) | DialPhase::Accepted(_, r) | DialPhase::Verdict(r) => r.recv(within),
            _ => unreachable!("only reading phases read"),
        };
        self.phase = phase;
        DialStep::Io(io)
    }

    /// Who this process is and which lane it opens, as the server reads it.
    fn ident(&self) -> [u8; IDENT_LEN] {
        let mut id = [0u8; IDENT_LEN];
        id[..4].copy_from_slice(&IDENT_MAGIC);
        id[4..12].copy_from_slice(&self.me.0.to_le_bytes());
        id[12..16].copy_from_slice(&self.me.1.to_le_bytes());
        id[16..20].copy_from_slice(&self.lane.to_le_bytes());
        id
    }
}

/// What an [`Answer`] asks for next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AnswerStep {
    /// Then [`Answer::io_done`].
    Io(Io),
    /// Wait that long, then [`Answer::waited`].
    Wait(Duration),
    /// Find the secret with this key id among those this process trusts, then [`Answer::key`].
    FindKey([u8; 8]),
    /// Find the process `who` names if `secret` admits its job, then [`Answer::process`].
    FindProc { who: Who, secret: Secret },
    /// Call [`Answer::claim`] with lane `lane` of process `from`, under the lock of the lanes'
    /// states (a dial of this process may be changing it).
    Claim { from: ProcIdx, lane: usize },
    /// The connection is lane `lane` of process `from`: hand it to the process.
    Adopt { from: ProcIdx, lane: usize },
    /// Close the connection. `why` (to log): it was refused; `None`: it lost to ours.
    Close { why: Option<String> },
}

enum AnswerPhase {
    Hello(Reading),
    FindKey(ServerHello, Instant),
    /// Sending the answer to the challenge, then reading the proof.
    Answer(ServerExchange),
    Proof(ServerExchange, Reading),
    /// Sending the verdict on the proof, then reading who the client is.
    Accepted(ServerExchange),
    Ident(ServerExchange, Reading),
    FindProc(ServerExchange, Who, usize, Instant),
    Claim(Who, ProcIdx, usize),
    /// Sending the verdict on the connection, then this.
    Verdict(Box<AnswerStep>),
    Over,
}

/// The server side of one connection's set-up, in process `me`, which has `lanes` lanes to
/// every process.
pub(super) struct Answer {
    me: Who,
    lanes: usize,
    phase: AnswerPhase,
}

impl Answer {
    pub(super) fn new(me: Who, lanes: usize) -> Answer {
        Answer { me, lanes, phase: AnswerPhase::Over }
    }

    /// The first step: read the client's hello.
    pub(super) fn start(&mut self) -> AnswerStep {
        let r = Reading::new(ServerHello::len(true));
        let io = r.recv(HANDSHAKE_TIMEOUT);
        self.phase = AnswerPhase::Hello(r);
        AnswerStep::Io(io)
    }

    fn close(&mut self, why: String) -> AnswerStep {
        self.phase = AnswerPhase::Over;
        AnswerStep::Close { why: Some(why) }
    }

    fn send(&mut self, phase: AnswerPhase, bytes: &[u8]) -> AnswerStep {
        self.phase = phase;
        AnswerStep::Io(Io::Send { bytes: bytes.to_vec(), within: HANDSHAKE_TIMEOUT })
    }

    /// Refuses the connection: the verdict tells the client, then it is closed and `why` logged.
    fn refuse(&mut self, why: String) -> AnswerStep {
        self.send(AnswerPhase::Verdict(Box::new(AnswerStep::Close { why: Some(why) })), &[REFUSE])
    }

    /// The I/O asked for is done.
    pub(super) fn io_done(&mut self, done: Done<'_>, now: Instant) -> AnswerStep {
        match (std::mem::replace(&mut self.phase, AnswerPhase::Over), done) {
            (AnswerPhase::Hello(mut r), Done::Received(b)) => match r.add(b) {
                Ok(Some(hello)) => match ServerHello::parse(&TRANSPORT, true, hello) {
                    Ok(hello) => {
                        let key = hello.key().expect("a keyed hello names its key");
                        self.phase = AnswerPhase::FindKey(hello, now + LEARN_WAIT);
                        AnswerStep::FindKey(key)
                    }
                    Err(e) => self.close(format!("authentication failed ({})", e.message())),
                },
                Ok(None) => self.read(AnswerPhase::Hello(r)),
                Err(why) => self.close(why),
            },
            (AnswerPhase::Answer(ex), Done::Sent) => {
                self.read(AnswerPhase::Proof(ex, Reading::new(ServerExchange::PROOF_LEN)))
            }
            (AnswerPhase::Proof(ex, mut r), Done::Received(b)) => match r.add(b) {
                Ok(Some(proof)) => match ex.check(proof.try_into().expect("a whole proof")) {
                    Ok(verdict) => self.send(AnswerPhase::Accepted(ex), &verdict),
                    Err(e) => self.close(format!("authentication failed ({})", e.message())),
                },
                Ok(None) => self.read(AnswerPhase::Proof(ex, r)),
                Err(why) => self.close(why),
            },
            (AnswerPhase::Accepted(ex), Done::Sent) => self.read(AnswerPhase::Ident(ex, Reading::new(IDENT_LEN))),
            (AnswerPhase::Ident(ex, mut r), Done::Received(b)) => match r.add(b) {
                Ok(Some(id)) => {
                    let job = u64::from_le_bytes(id[4..12].try_into().expect("8 bytes"));
                    let rank = u32::from_le_bytes(id[12..16].try_into().expect("4 bytes"));
                    let lane = u32::from_le_bytes(id[16..20].try_into().expect("4 bytes")) as usize;
                    if id[..4] != IDENT_MAGIC || lane >= self.lanes || (job, rank) == self.me {
                        return self.refuse(bad_ident((job, rank), lane));
                    }
                    let secret = ex.secret().clone();
                    self.phase = AnswerPhase::FindProc(ex, (job, rank), lane, now + LEARN_WAIT);
                    AnswerStep::FindProc { who: (job, rank), secret }
                }
                Ok(None) => self.read(AnswerPhase::Ident(ex, r)),
                Err(why) => self.close(why),
            },
            (AnswerPhase::Verdict(then), Done::Sent) => *then,
            (phase, done) => {
                let what = match phase {
                    AnswerPhase::Hello(_) => "authentication failed (no authentication challenge)",
                    AnswerPhase::Answer(_) => "authentication failed (answering the challenge)",
                    AnswerPhase::Proof(..) => "authentication failed (no authentication proof)",
                    AnswerPhase::Accepted(_) => "authentication failed (confirming it)",
                    AnswerPhase::Ident(..) => "no identification",
                    AnswerPhase::Verdict(_) => "could not send its verdict",
                    AnswerPhase::FindKey(..)
                    | AnswerPhase::FindProc(..)
                    | AnswerPhase::Claim(..)
                    | AnswerPhase::Over => "the connection set-up went out of order",
                };
                self.close(format!("{what}: {}", done.failure()))
            }
        }
    }

    fn read(&mut self, phase: AnswerPhase) -> AnswerStep {
        let io = match &phase {
            AnswerPhase::Hello(r) | AnswerPhase::Proof(_, r) | AnswerPhase::Ident(_, r) => r.recv(HANDSHAKE_TIMEOUT),
            _ => unreachable!("only reading phases read"),
        };
        self.phase = phase;
        AnswerStep::Io(io)
    }

    /// The secret asked for by [`AnswerStep::FindKey`], if this process holds it.
    pub(super) fn key(&mut self, found: Option<Secret>, now: Instant) -> AnswerStep {
        let AnswerPhase::FindKey(hello, until) = std::mem::replace(&mut self.phase, AnswerPhase::Over) else {
            return self.close("the connection set-up went out of order".into());
        };
        match found {
            Some(secret) => match hello.answer(&secret) {
                Ok((ex, answer)) => self.send(AnswerPhase::Answer(ex), &answer),
                Err(e) => self.close(format!("authentication failed ({})", e.message())),
            },
            None if now > until => self.close(format!("authentication failed ({UNKNOWN_KEY})")),
            None => {
                self.phase = AnswerPhase::FindKey(hello, until);
                AnswerStep::Wait(LEARN_POLL)
            }
        }
    }

    /// The process asked for by [`AnswerStep::FindProc`], if known and admitted.
    pub(super) fn process(&mut self, found: Option<ProcIdx>, now: Instant) -> AnswerStep {
        let AnswerPhase::FindProc(ex, who, lane, until) = std::mem::replace(&mut self.phase, AnswerPhase::Over) else {
            return self.close("the connection set-up went out of order".into());
        };
        match found {
            Some(from) => {
                self.phase = AnswerPhase::Claim(who, from, lane);
                AnswerStep::Claim { from, lane }
            }
            None if now > until => self.refuse(bad_ident(who, lane)),
            None => {
                self.phase = AnswerPhase::FindProc(ex, who, lane, until);
                AnswerStep::Wait(LEARN_POLL)
            }
        }
    }

    /// The wait asked for is over: look again.
    pub(super) fn waited(&mut self) -> AnswerStep {
        match &self.phase {
            AnswerPhase::FindKey(hello, _) => AnswerStep::FindKey(hello.key().expect("a keyed hello names its key")),
            AnswerPhase::FindProc(ex, who, ..) => AnswerStep::FindProc { who: *who, secret: ex.secret().clone() },
            _ => self.close("the connection set-up went out of order".into()),
        }
    }

    /// Decides on the lane asked for by [`AnswerStep::Claim`], whose state here is `link`.
    pub(super) fn claim(&mut self, link: &mut Link) -> AnswerStep {
        let AnswerPhase::Claim(who, from, lane) = std::mem::replace(&mut self.phase, AnswerPhase::Over) else {
            return self.close("the connection set-up went out of order".into());
        };
        let verdict = tie_break(link, self.me, who);
        let then = if verdict == ACCEPT { AnswerStep::Adopt { from, lane } } else { AnswerStep::Close { why: None } };
        self.send(AnswerPhase::Verdict(Box::new(then)), &[verdict])
    }
}

fn bad_ident((job, rank): Who, lane: usize) -> String {
    format!("bad identification (job {job:#x}, rank {rank}, lane {lane})")
}

#[cfg(test)]
mod tests;
