//! The set-up machines driven against each other in memory: no sockets, no threads, and time
//! that moves only when a test says so.

use super::*;
use std::collections::{HashMap, VecDeque};

const JOB: u64 = 7;

/// What a process knows, as the service thread's tables hold it.
struct Node {
    me: Who,
    lanes: usize,
    /// The secrets it trusts, by key id, each with the jobs it admits.
    keys: Vec<([u8; 8], Secret, Vec<u64>)>,
    /// The processes that may connect, by (job, rank).
    index: HashMap<Who, ProcIdx>,
    /// Per (process, lane).
    links: HashMap<(ProcIdx, usize), Link>,
}

impl Node {
    fn new(me: Who, lanes: usize, secret: &Secret) -> Node {
        Node {
            me,
            lanes,
            keys: vec![(secret.key_id(), secret.clone(), vec![me.0])],
            index: HashMap::new(),
            links: HashMap::new(),
        }
    }

    fn link(&mut self, p: ProcIdx, lane: usize) -> &mut Link {
        self.links.entry((p, lane)).or_insert(Link::Down)
    }
}

/// One connection being set up: a dial at one end, an answer at the other, what each sent
/// that the other has not read, every byte each sent, and the step each is at.
struct Conn {
    dial: Dial,
    answer: Answer,
    to_answer: VecDeque<u8>,
    to_dial: VecDeque<u8>,
    dial_sent: Vec<u8>,
    answer_sent: Vec<u8>,
    dial_step: DialStep,
    answer_step: AnswerStep,
    /// The answering process in the dialler's tables, and the lane.
    peer: ProcIdx,
    lane: usize,
}

impl Conn {
    /// Process `me` dials lane `lane` of `at`, which is process `peer` in its tables.
    fn new(me: Who, (peer, lane): (ProcIdx, usize), secret: &Secret, at: &Node, now: Instant) -> Conn {
        let mut dial = Dial::new(me, lane as u32, secret.clone(), now + Duration::from_secs(30));
        let mut answer = Answer::new(at.me, at.lanes);
        let dial_step = dial.start(now);
        let answer_step = answer.start();
        Conn {
            dial,
            answer,
            to_answer: VecDeque::new(),
            to_dial: VecDeque::new(),
            dial_sent: Vec::new(),
            answer_sent: Vec::new(),
            dial_step,
            answer_step,
            peer,
            lane,
        }
    }

    /// Carries out the dial's step if it can; false when it waits for bytes or is over.
    fn step_dial(&mut self, dialler: &mut Node, now: Instant) -> bool {
        let next = match &self.dial_step {
            DialStep::Connect { .. } => self.dial.connected(Ok(()), now),
            DialStep::Wait(_) => self.dial.waited(now),
            DialStep::Io(io) => {
                let mut buf = Vec::new();
                let Some(done) = pipe(io, &mut self.to_answer, &mut self.dial_sent, &mut self.to_dial, &mut buf) else {
                    return false;
                };
                self.dial.io_done(done, now)
            }
            DialStep::Adopt => {
                // What `TcpNet::open` does with an adopted dial.
                *dialler.link(self.peer, self.lane) = Link::Up;
                return false;
            }
            DialStep::Yield | DialStep::Fail(_) => return false,
        };
        self.dial_step = next;
        true
    }

    /// Carries out the answer's step if it can; false when it waits for bytes or is over.
    fn step_answer(&mut self, at: &mut Node, now: Instant) -> bool {
        let next = match &self.answer_step {
            AnswerStep::Io(io) => {
                let mut buf = Vec::new();
                let Some(done) = pipe(io, &mut self.to_dial, &mut self.answer_sent, &mut self.to_answer, &mut buf)
                else {
                    return false;
                };
                self.answer.io_done(done, now)
            }
            // Time moves only when the test says so (`wait_over`).
            AnswerStep::Wait(_) => return false,
            AnswerStep::FindKey(id) => {
                let found = at.keys.iter().find(|k| k.0 == *id).map(|k| k.1.clone());
                self.answer.key(found, now)
            }
            AnswerStep::FindProc { who, secret } => {
                let admitted = at.keys.iter().any(|k| k.1 == *secret && k.2.contains(&who.0));
                let found = if admitted { at.index.get(who).copied() } else { None };
                self.answer.process(found, now)
            }
            AnswerStep::Claim { from, lane } => {
                let (from, lane) = (*from, *lane);
                let mut link = *at.link(from, lane);
                let next = self.answer.claim(&mut link);
                *at.link(from, lane) = link;
                next
            }
            AnswerStep::Adopt { .. } | AnswerStep::Close { .. } => return false,
        };
        self.answer_step = next;
        true
    }

    /// The answer's wait is over.
    fn wait_over(&mut self) {
        assert!(matches!(self.answer_step, AnswerStep::Wait(_)), "{:?}", self.answer_step);
        self.answer_step = self.answer.waited();
    }

    /// Runs both ends until neither can go on.
    fn run(&mut self, dialler: &mut Node, at: &mut Node, now: Instant) {
        while self.step_dial(dialler, now) | self.step_answer(at, now) {}
    }
}

/// Carries out an I/O step on the in-memory connection: what is sent goes to `out` (and is
/// logged in `sent`), what is read comes from `inp` through `buf`. `None`: nothing to read yet.
fn pipe<'b>(
    io: &Io,
    out: &mut VecDeque<u8>,
    sent: &mut Vec<u8>,
    inp: &mut VecDeque<u8>,
    buf: &'b mut Vec<u8>,
) -> Option<Done<'b>> {
    match io {
        Io::Send { bytes, .. } => {
            out.extend(bytes);
            sent.extend(bytes);
            Some(Done::Sent)
        }
        Io::Recv { want, .. } => {
            let n = (*want).min(inp.len());
            *buf = inp.drain(..n).collect();
            (n > 0).then_some(Done::Received(buf))
        }
    }
}

fn two(lanes: usize) -> (Node, Node, Secret) {
    let secret = Secret::generate().unwrap();
    let mut a = Node::new((JOB, 0), lanes, &secret);
    let mut b = Node::new((JOB, 1), lanes, &secret);
    for n in [&mut a, &mut b] {
        n.index.insert((JOB, 0), 0);
        n.index.insert((JOB, 1), 1);
    }
    (a, b, secret)
}

/// A dial is authenticated, names its process and lane, and both ends adopt the connection;
/// the bytes are those of the protocol, in its order.
#[test]
fn a_dial_is_authenticated_named_and_adopted_by_both_ends() {
    let (mut a, mut b, secret) = two(1);
    let now = Instant::now();
    assert!(start_dial(a.link(1, 0)));
    let mut c = Conn::new(a.me, (1, 0), &secret, &b, now);
    c.run(&mut a, &mut b, now);
    assert_eq!(c.dial_step, DialStep::Adopt);
    assert_eq!(c.answer_step, AnswerStep::Adopt { from: 0, lane: 0 });
    assert_eq!((*a.link(1, 0), *b.link(0, 0)), (Link::Up, Link::Up));
    // Client: hello (magic, key id, nonce), proof, then its name.
    assert_eq!(c.dial_sent.len(), 48 + 32 + 20);
    assert_eq!(&c.dial_sent[..8], b"BATONTC2");
    assert_eq!(c.dial_sent[8..16], secret.key_id());
    let mut ident = b"BTID".to_vec();
    ident.extend(JOB.to_le_bytes());
    ident.extend(0u32.to_le_bytes());
    ident.extend(0u32.to_le_bytes());
    assert_eq!(c.dial_sent[80..], ident[..]);
    // Server: nonce and MAC, the authentication verdict, the connection's verdict.
    assert_eq!(c.answer_sent.len(), 64 + 1 + 1);
    assert_eq!(c.answer_sent[65], ACCEPT);
}

/// Reads are never asked to go past the message in flight (the connection carries frames
/// right after the verdict), and a message that arrives byte by byte is put together.
#[test]
fn reads_never_go_past_the_message_and_pieces_are_joined() {
    let (_, b, secret) = two(1);
    let now = Instant::now();
    let mut dial = Dial::new((JOB, 0), 0, secret.clone(), now + Duration::from_secs(30));
    dial.start(now);
    assert!(matches!(dial.connected(Ok(()), now), DialStep::Io(Io::Send { .. })));
    assert_eq!(dial.io_done(Done::Sent, now), DialStep::Io(Io::Recv { want: 64, within: Duration::from_secs(30) }));
    assert!(matches!(dial.io_done(Done::Received(&[0; 10]), now), DialStep::Io(Io::Recv { want: 54, .. })));
    assert!(matches!(dial.io_done(Done::Received(&[0; 55]), now), DialStep::Fail(_)), "read past the message");

    let mut answer = Answer::new(b.me, 1);
    assert!(matches!(answer.start(), AnswerStep::Io(Io::Recv { want: 48, .. })));
    let (_, hello) = ClientExchange::start(&secret, &TRANSPORT, true).unwrap();
    for (i, byte) in hello.iter().enumerate() {
        let step = answer.io_done(Done::Received(&[*byte]), now);
        if i + 1 < hello.len() {
            assert_eq!(step, AnswerStep::Io(Io::Recv { want: 47 - i, within: HANDSHAKE_TIMEOUT }));
        } else {
            assert_eq!(step, AnswerStep::FindKey(secret.key_id()));
        }
    }
}

/// Both processes dial each other on every lane at once, in every order of their steps: the
/// connection of the lower rank wins on each lane, the other dial yields after nothing but the
/// set-up crossed it, and both processes end with that lane up.
#[test]
fn simultaneous_dials_keep_the_lower_ranks_connection() {
    for lanes in [1, 2] {
        for order in 0..4 {
            let (mut a, mut b, secret) = two(lanes);
            let now = Instant::now();
            for lane in 0..lanes {
                // What `TcpNet::open` does before dialling.
                assert!(start_dial(a.link(1, lane)) && start_dial(b.link(0, lane)));
                let mut ab = Conn::new(a.me, (1, lane), &secret, &b, now);
                let mut ba = Conn::new(b.me, (0, lane), &secret, &a, now);
                match order {
                    // One after the other, either way round.
                    0 => {
                        ab.run(&mut a, &mut b, now);
                        ba.run(&mut b, &mut a, now);
                    }
                    1 => {
                        ba.run(&mut b, &mut a, now);
                        ab.run(&mut a, &mut b, now);
                    }
                    // In lock step, either one first.
                    _ => loop {
                        let (x, y) = if order == 2 { (&mut ab, &mut ba) } else { (&mut ba, &mut ab) };
                        let (nx, ny) = if order == 2 { (&mut a, &mut b) } else { (&mut b, &mut a) };
                        let moved = x.step_dial(nx, now) | x.step_answer(ny, now);
                        let moved = moved | y.step_dial(ny, now) | y.step_answer(nx, now);
                        if !moved {
                            break;
                        }
                    },
                }
                assert_eq!(ab.dial_step, DialStep::Adopt, "lanes {lanes}, order {order}: rank 0's dial wins");
                assert_eq!(ab.answer_step, AnswerStep::Adopt { from: 0, lane });
                assert_eq!(ba.dial_step, DialStep::Yield, "lanes {lanes}, order {order}: rank 1's dial yields");
                assert_eq!(ba.answer_step, AnswerStep::Close { why: None });
                assert_eq!(ba.dial_sent.len(), 48 + 32 + 20, "only the set-up crossed the losing connection");
                assert_eq!(ba.answer_sent[65], USE_MINE);
                assert_eq!((*a.link(1, lane), *b.link(0, lane)), (Link::Up, Link::Up));
            }
        }
    }
}

/// The lane states on their own: an existing connection always wins; between two dials, the
/// lower (job, rank) wins, jobs first; a process dials only a lane that is not up.
#[test]
fn the_tie_break_prefers_an_existing_connection_then_the_lower_process() {
    let cases = [
        (Link::Down, (7, 1), (7, 0), ACCEPT, Link::Up),
        (Link::Up, (7, 0), (7, 1), USE_MINE, Link::Up),
        (Link::Up, (7, 1), (7, 0), USE_MINE, Link::Up),
        (Link::Connecting, (7, 0), (7, 1), USE_MINE, Link::Connecting),
        (Link::Connecting, (7, 1), (7, 0), ACCEPT, Link::Up),
        (Link::Connecting, (3, 9), (7, 0), USE_MINE, Link::Connecting),
        (Link::Connecting, (7, 0), (3, 9), ACCEPT, Link::Up),
    ];
    for (before, me, them, verdict, after) in cases {
        let mut link = before;
        assert_eq!((tie_break(&mut link, me, them), link), (verdict, after), "{before:?} {me:?} {them:?}");
    }
    // A dial starts on a lane that is not up, and marks it.
    for (before, dials, after) in
        [(Link::Down, true, Link::Connecting), (Link::Connecting, true, Link::Connecting), (Link::Up, false, Link::Up)]
    {
        let mut link = before;
        assert_eq!((start_dial(&mut link), link), (dials, after));
    }
}

/// A client that proves another secret under a key id this process holds (a forged key id) is
/// refused by the server's proof check, and the client refuses the server whose answer does
/// not match its own secret.
#[test]
fn a_wrong_secret_fails_on_both_sides() {
    let (mut a, mut b, secret) = two(1);
    let now = Instant::now();
    // `b` holds another secret under the key id of `a`'s.
    b.keys[0].1 = Secret::generate().unwrap();
    let mut c = Conn::new(a.me, (1, 0), &secret, &b, now);
    c.run(&mut a, &mut b, now);
    let DialStep::Fail(why) = &c.dial_step else { panic!("{:?}", c.dial_step) };
    assert!(why.contains("does not know the job secret"), "{why}");
    // The client hung up: the server sees the end of the connection instead of a proof.
    let step = c.answer.io_done(Done::Closed, now);
    assert!(matches!(&step, AnswerStep::Close { why: Some(w) } if w.contains("no authentication proof")), "{step:?}");

    // A proof that does not prove the secret.
    let mut answer = Answer::new(b.me, 1);
    answer.start();
    let (_, hello) = ClientExchange::start(&secret, &TRANSPORT, true).unwrap();
    assert_eq!(answer.io_done(Done::Received(&hello), now), AnswerStep::FindKey(secret.key_id()));
    assert!(matches!(answer.key(Some(secret.clone()), now), AnswerStep::Io(Io::Send { .. })));
    assert!(matches!(answer.io_done(Done::Sent, now), AnswerStep::Io(Io::Recv { want: 32, .. })));
    let step = answer.io_done(Done::Received(&[0x5a; 32]), now);
    assert!(matches!(&step, AnswerStep::Close { why: Some(w) } if w.contains("wrong job secret")), "{step:?}");
}

/// Garbage is refused before anything is answered; a garbage answer or verdict ends the dial.
#[test]
fn garbage_is_refused() {
    let (a, b, secret) = two(1);
    let now = Instant::now();
    let mut answer = Answer::new(b.me, 1);
    answer.start();
    let step = answer.io_done(Done::Received(&[0x42; 48]), now);
    assert!(matches!(&step, AnswerStep::Close { why: Some(w) } if w.contains("bad magic")), "{step:?}");

    let mut dial = Dial::new(a.me, 0, secret.clone(), now + Duration::from_secs(30));
    dial.start(now);
    dial.connected(Ok(()), now);
    dial.io_done(Done::Sent, now);
    let step = dial.io_done(Done::Received(&[0x42; 64]), now);
    assert!(matches!(&step, DialStep::Fail(w) if w.contains("does not know the job secret")), "{step:?}");

    // A verdict that is none of the three.
    let mut c = Conn::new(a.me, (1, 0), &secret, &b, now);
    let (mut a, mut b) = (a, b);
    while !matches!(c.dial_step, DialStep::Io(Io::Recv { want: 1, .. })) || c.dial_sent.len() < 100 {
        assert!(c.step_dial(&mut a, now) | c.step_answer(&mut b, now));
    }
    let step = c.dial.io_done(Done::Received(&[9]), now);
    assert!(matches!(&step, DialStep::Fail(w) if w.contains("refused")), "{step:?}");
}

/// Runs a dial of `who` (proving `secret`, lane `lane`) against `at` until both ends stop,
/// letting time pass by `LEARN_WAIT` whenever the answer is left waiting to learn.
fn dial_patiently(who: Who, lane: usize, secret: &Secret, at: &mut Node) -> Conn {
    let mut dialler = Node::new(who, at.lanes, secret);
    let mut now = Instant::now();
    let mut c = Conn::new(who, (0, lane), secret, at, now);
    loop {
        c.run(&mut dialler, at, now);
        if !matches!(c.answer_step, AnswerStep::Wait(_)) {
            return c;
        }
        now += LEARN_WAIT + Duration::from_millis(1);
        c.wait_over();
    }
}

fn refused(c: &Conn, what: &str) {
    assert!(matches!(&c.dial_step, DialStep::Fail(w) if w.contains("refused")), "{what}: {:?}", c.dial_step);
    assert!(
        matches!(&c.answer_step, AnswerStep::Close { why: Some(w) } if w.contains("bad identification")),
        "{what}: {:?}",
        c.answer_step
    );
    assert_eq!(c.answer_sent.last(), Some(&REFUSE), "{what}");
}

/// A process this one does not know, or no longer knows (retired by a disconnect, or of a
/// job it stopped trusting), is refused once the learning wait is over; one that is
/// registered during the wait is accepted.
#[test]
fn unknown_and_retired_processes_are_refused_after_the_learning_wait() {
    let (_, mut b, secret) = two(1);
    refused(&dial_patiently((JOB, 5), 0, &secret, &mut b), "a rank the job does not have");
    b.index.remove(&(JOB, 0));
    refused(&dial_patiently((JOB, 0), 0, &secret, &mut b), "a retired process");
    // Itself, under its own name.
    refused(&dial_patiently(b.me, 0, &secret, &mut b), "this process itself");

    // Registered while the answer waits.
    b.index.remove(&(JOB, 0));
    let now = Instant::now();
    let mut dialler = Node::new((JOB, 0), 1, &secret);
    let mut c = Conn::new((JOB, 0), (0, 0), &secret, &b, now);
    c.run(&mut dialler, &mut b, now);
    assert!(matches!(c.answer_step, AnswerStep::Wait(_)), "{:?}", c.answer_step);
    b.index.insert((JOB, 0), 0);
    c.wait_over();
    c.run(&mut dialler, &mut b, now + LEARN_WAIT / 2);
    assert_eq!((c.dial_step, c.answer_step), (DialStep::Adopt, AnswerStep::Adopt { from: 0, lane: 0 }));
}

/// A bulk lane is adopted as that lane; a lane past the last is refused at once.
#[test]
fn a_bulk_lane_is_adopted_as_that_lane() {
    let (_, mut b, secret) = two(3);
    let c = dial_patiently((JOB, 0), 2, &secret, &mut b);
    assert_eq!((c.dial_step, c.answer_step), (DialStep::Adopt, AnswerStep::Adopt { from: 0, lane: 2 }));
    assert_eq!(*b.link(0, 2), Link::Up);
    let now = Instant::now();
    let mut dialler = Node::new((JOB, 0), 3, &secret);
    let mut c = Conn::new((JOB, 0), (0, 3), &secret, &b, now);
    c.run(&mut dialler, &mut b, now);
    refused(&c, "lane 3 of 3");
}

/// A process holding several secrets finds the one a client names by its key id, and admits
/// only the jobs that secret was trusted for.
#[test]
fn key_ids_pick_among_several_trusted_secrets() {
    let (_, mut b, ours) = two(1);
    let link = Secret::generate().unwrap();
    b.keys.push((link.key_id(), link.clone(), vec![8]));
    b.index.insert((8, 3), 5);
    let c = dial_patiently((8, 3), 0, &link, &mut b);
    assert_eq!((c.dial_step, c.answer_step), (DialStep::Adopt, AnswerStep::Adopt { from: 5, lane: 0 }));
    assert_eq!(c.dial_sent[8..16], link.key_id());
    // The other job's secret does not admit this job's processes, nor ours the other job's.
    refused(&dial_patiently((JOB, 0), 0, &link, &mut b), "job 7 proving job 8's secret");
    refused(&dial_patiently((8, 3), 0, &ours, &mut b), "job 8 proving job 7's secret");
    // A secret the process does not hold: no answer at all.
    let stranger = Secret::generate().unwrap();
    let c = dial_patiently((8, 3), 0, &stranger, &mut b);
    assert!(matches!(&c.answer_step, AnswerStep::Close { why: Some(w) } if w.contains(UNKNOWN_KEY)));
    assert!(c.answer_sent.is_empty());
}

/// A refused connect is tried again until the deadline; any other failure ends the dial.
#[test]
fn a_refused_connect_is_retried_until_the_deadline() {
    let secret = Secret::generate().unwrap();
    let t0 = Instant::now();
    let mut dial = Dial::new((JOB, 0), 0, secret.clone(), t0 + Duration::from_secs(2));
    assert_eq!(dial.start(t0), DialStep::Connect { within: Duration::from_secs(2) });
    let refused = || Err(io::Error::from(io::ErrorKind::ConnectionRefused));
    assert_eq!(dial.connected(refused(), t0), DialStep::Wait(RETRY_AFTER));
    let t1 = t0 + Duration::from_millis(500);
    assert_eq!(dial.waited(t1), DialStep::Connect { within: Duration::from_millis(1500) });
    assert_eq!(dial.connected(refused(), t1), DialStep::Wait(RETRY_AFTER));
    dial.waited(t1);
    assert!(matches!(dial.connected(refused(), t0 + Duration::from_secs(3)), DialStep::Fail(_)));

    let mut dial = Dial::new((JOB, 0), 0, secret, t0 + Duration::from_secs(2));
    dial.start(t0);
    let step = dial.connected(Err(io::Error::from(io::ErrorKind::HostUnreachable)), t0);
    assert!(matches!(step, DialStep::Fail(_)), "{step:?}");
}

/// A peer that stops talking ends the set-up on either side, with a reason.
#[test]
fn silence_ends_the_set_up() {
    let (a, b, secret) = two(1);
    let now = Instant::now();
    let mut dial = Dial::new(a.me, 0, secret, now + Duration::from_secs(30));
    dial.start(now);
    dial.connected(Ok(()), now);
    dial.io_done(Done::Sent, now);
    let step = dial.io_done(Done::TimedOut, now);
    assert!(matches!(&step, DialStep::Fail(w) if w.contains("did not answer") && w.contains("timed out")), "{step:?}");

    let mut answer = Answer::new(b.me, 1);
    answer.start();
    let step = answer.io_done(Done::TimedOut, now);
    assert!(matches!(&step, AnswerStep::Close { why: Some(w) } if w.contains("timed out")), "{step:?}");
}
