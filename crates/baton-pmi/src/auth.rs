//! Mutual challenge-response authentication of a bootstrap connection.
//!
//! Both sides know the job secret ([`Secret`], 32 random bytes handed to the
//! ranks through the environment); it never crosses the socket. The
//! exchange, all fixed-size so the launcher reads nothing of variable length
//! from an unauthenticated peer:
//!
//! 1. client → launcher: `MAGIC` (8 bytes) ‖ client nonce `Nc` (32 bytes)
//! 2. launcher → client: launcher nonce `Ns` (32) ‖ `HMAC(secret, "baton-pmi server" ‖ Nc ‖ Ns)`
//! 3. client checks that MAC, then sends `HMAC(secret, "baton-pmi client" ‖ Ns ‖ Nc)`
//! 4. launcher checks it and answers one byte `ACCEPTED`
//!
//! The labels keep a launcher MAC from ever being valid as a client MAC, and
//! the fresh nonces on both sides make recorded exchanges useless. Other
//! sockets of the job (the TCP transport between ranks) run the same exchange
//! under a [`Protocol`] of their own: another magic and other labels, so a MAC
//! from one kind of connection is never accepted by another.
//!
//! The exchange itself does no I/O: [`ClientExchange`], [`ServerHello`] and [`ServerExchange`]
//! turn the bytes received into the bytes to send. The `*_handshake*` functions run them over
//! a blocking stream; a caller with a state machine of its own (the TCP transport) feeds them.

use std::io::{Read, Write};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{PmiError, PmiErrorKind};

/// Identifies protocol and version at the very start of a bootstrap connection.
pub const MAGIC: [u8; 8] = *b"BATONPM1";
const NONCE_LEN: usize = 32;
const MAC_LEN: usize = 32;
const ACCEPTED: u8 = 0xA5;

/// What distinguishes one kind of authenticated connection from another.
#[derive(Debug, Clone, Copy)]
pub struct Protocol {
    pub magic: [u8; 8],
    pub server_label: &'static [u8],
    pub client_label: &'static [u8],
    /// Who the server is, for error messages ("the launcher", "the peer").
    pub server_name: &'static str,
}

/// Rank ↔ launcher (bootstrap) connections.
pub const BOOTSTRAP: Protocol = Protocol {
    magic: MAGIC,
    server_label: b"baton-pmi server",
    client_label: b"baton-pmi client",
    server_name: "the launcher",
};

/// Rank ↔ rank connections of the TCP transport. Keyed (see [`client_handshake_keyed`]): a
/// process trusts its own job's secret and the secrets it shares with connected jobs.
pub const TRANSPORT: Protocol = Protocol {
    magic: *b"BATONTC2",
    server_label: b"baton-tcp server",
    client_label: b"baton-tcp client",
    server_name: "the peer",
};

/// The connection of `MPI_Comm_connect` to the port of `MPI_Comm_accept`, proved with the port's
/// own secret (part of the port name).
pub const PORT: Protocol = Protocol {
    magic: *b"BATONPT1",
    server_label: b"baton-port server",
    client_label: b"baton-port client",
    server_name: "the port",
};

/// The per-job shared secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub [u8; 32]);

impl Secret {
    /// Fresh secret from the operating system's CSPRNG.
    pub fn generate() -> Result<Secret, PmiError> {
        let mut s = [0u8; 32];
        fill_random(&mut s)?;
        Ok(Secret(s))
    }

    /// A key for another purpose, computed as `HMAC(self, label)`. Knowing
    /// the derived key reveals nothing about `self`: the launcher hands the
    /// ranks a key derived from the job secret, so a rank cannot pose as a
    /// proxy of the launcher tree.
    pub fn derive(&self, label: &str) -> Secret {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        m.update(b"baton derive ");
        m.update(label.as_bytes());
        Secret(m.finalize().into_bytes().into())
    }

    /// Names this secret on the wire without revealing it, so a server holding several secrets
    /// knows which one a client claims before the challenge.
    pub fn key_id(&self) -> [u8; 8] {
        let d = self.derive("key id");
        d.0[..8].try_into().expect("8 bytes")
    }

    /// Lower-case hex, the form used in `BATON_PMI_SECRET`.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(s: &str) -> Result<Secret, PmiError> {
        let bad = || PmiError::new(PmiErrorKind::Environment, "malformed job secret");
        let s = s.as_bytes();
        if s.len() != 64 {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, pair) in s.chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16).ok_or_else(bad)?;
            let lo = (pair[1] as char).to_digit(16).ok_or_else(bad)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Ok(Secret(out))
    }
}

// Never print the secret, even in debug output.
impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

pub(crate) fn fill_random(buf: &mut [u8]) -> Result<(), PmiError> {
    getrandom::fill(buf).map_err(|e| PmiError::new(PmiErrorKind::Io, format!("cannot obtain random bytes: {e}")))
}

fn mac(secret: &Secret, label: &[u8], a: &[u8], b: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&secret.0).expect("HMAC takes any key length");
    m.update(label);
    m.update(a);
    m.update(b);
    m
}

fn auth_err(msg: &str) -> PmiError {
    PmiError::new(PmiErrorKind::Auth, msg)
}

fn read_fixed(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<(), PmiError> {
    r.read_exact(buf).map_err(|e| auth_err(&format!("{what}: {e}")))
}

/// The client's half of an exchange, without I/O: the hello to send, the proof that answers the
/// server's challenge, the check of its verdict. The `*_handshake*` functions run it over a
/// blocking stream; the TCP transport drives it from its own connection state machine.
pub struct ClientExchange {
    secret: Secret,
    p: Protocol,
    nc: [u8; NONCE_LEN],
}

impl ClientExchange {
    /// Bytes of the server's answer to the hello: its nonce and MAC.
    pub const ANSWER_LEN: usize = NONCE_LEN + MAC_LEN;

    /// Starts an exchange of protocol `p` proving `secret`; returns it with the hello to send
    /// (a keyed hello names the secret by [`Secret::key_id`], so the server may hold several).
    pub fn start(secret: &Secret, p: &Protocol, keyed: bool) -> Result<(ClientExchange, Vec<u8>), PmiError> {
        let mut nc = [0u8; NONCE_LEN];
        fill_random(&mut nc)?;
        let mut hello = Vec::with_capacity(p.magic.len() + 8 + NONCE_LEN);
        hello.extend_from_slice(&p.magic);
        if keyed {
            hello.extend_from_slice(&secret.key_id());
        }
        hello.extend_from_slice(&nc);
        Ok((ClientExchange { secret: secret.clone(), p: *p, nc }, hello))
    }

    /// Checks the server's answer (it must know the secret); returns the proof to send.
    pub fn prove(&self, answer: &[u8; Self::ANSWER_LEN]) -> Result<[u8; MAC_LEN], PmiError> {
        let (ns, server_mac) = answer.split_at(NONCE_LEN);
        mac(&self.secret, self.p.server_label, &self.nc, ns)
            .verify_slice(server_mac)
            .map_err(|_| auth_err(&format!("{} does not know the job secret", self.p.server_name)))?;
        Ok(mac(&self.secret, self.p.client_label, ns, &self.nc).finalize().into_bytes().into())
    }

    /// Checks the server's verdict on the proof.
    pub fn check_verdict(&self, verdict: u8) -> Result<(), PmiError> {
        if verdict != ACCEPTED {
            return Err(auth_err(&self.rejected()));
        }
        Ok(())
    }

    /// What it means when the verdict does not come, or says no.
    pub fn rejected(&self) -> String {
        format!("{} rejected the job secret", self.p.server_name)
    }
}

/// A client's hello as the server reads it, before it knows which secret to check.
pub struct ServerHello {
    p: Protocol,
    key: Option<[u8; 8]>,
    nc: [u8; NONCE_LEN],
}

impl ServerHello {
    /// Bytes of a hello (keyed: with the key id).
    pub const fn len(keyed: bool) -> usize {
        MAGIC.len() + if keyed { 8 } else { 0 } + NONCE_LEN
    }

    /// Parses a hello of [`len`](Self::len)`(keyed)` bytes of protocol `p`.
    pub fn parse(p: &Protocol, keyed: bool, hello: &[u8]) -> Result<ServerHello, PmiError> {
        if hello.len() != Self::len(keyed) || hello[..MAGIC.len()] != p.magic {
            return Err(auth_err("not a Baton client of this protocol (bad magic)"));
        }
        let rest = &hello[MAGIC.len()..];
        let (key, nc) = if keyed { (Some(rest[..8].try_into().expect("8 bytes")), &rest[8..]) } else { (None, rest) };
        Ok(ServerHello { p: *p, key, nc: nc.try_into().expect("nonce") })
    }

    /// The secret a keyed hello names ([`Secret::key_id`]).
    pub fn key(&self) -> Option<[u8; 8]> {
        self.key
    }

    /// Answers the challenge with `secret`; returns the exchange with the answer to send.
    pub fn answer(self, secret: &Secret) -> Result<(ServerExchange, [u8; ClientExchange::ANSWER_LEN]), PmiError> {
        let mut ns = [0u8; NONCE_LEN];
        fill_random(&mut ns)?;
        let server_mac = mac(secret, self.p.server_label, &self.nc, &ns).finalize().into_bytes();
        let mut answer = [0u8; ClientExchange::ANSWER_LEN];
        answer[..NONCE_LEN].copy_from_slice(&ns);
        answer[NONCE_LEN..].copy_from_slice(&server_mac);
        Ok((ServerExchange { secret: secret.clone(), p: self.p, nc: self.nc, ns }, answer))
    }
}

/// The server's half of an exchange once it has answered, without I/O.
pub struct ServerExchange {
    secret: Secret,
    p: Protocol,
    nc: [u8; NONCE_LEN],
    ns: [u8; NONCE_LEN],
}

impl ServerExchange {
    /// Bytes of the client's proof.
    pub const PROOF_LEN: usize = MAC_LEN;

    /// Checks the client's proof; returns the verdict to send (the client is then trusted).
    pub fn check(&self, proof: &[u8; MAC_LEN]) -> Result<[u8; 1], PmiError> {
        mac(&self.secret, self.p.client_label, &self.ns, &self.nc)
            .verify_slice(proof)
            .map_err(|_| auth_err("wrong job secret"))?;
        Ok([ACCEPTED])
    }

    /// The secret the client proved.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
}

/// Client side of the bootstrap handshake; on success the stream is ready for frames.
pub fn client_handshake<S: Read + Write>(stream: &mut S, secret: &Secret) -> Result<(), PmiError> {
    client_handshake_for(stream, secret, &BOOTSTRAP)
}

/// Launcher side of the bootstrap handshake. The caller should have set a
/// read timeout so a silent peer cannot hold the connection forever.
pub fn server_handshake<S: Read + Write>(stream: &mut S, secret: &Secret) -> Result<(), PmiError> {
    server_handshake_for(stream, secret, &BOOTSTRAP)
}

/// Client side of the handshake of protocol `p`.
pub fn client_handshake_for<S: Read + Write>(stream: &mut S, secret: &Secret, p: &Protocol) -> Result<(), PmiError> {
    client_inner(stream, secret, p, false)
}

/// Client side of a keyed handshake: the hello names the secret (by [`Secret::key_id`]), so the
/// server may hold several.
pub fn client_handshake_keyed<S: Read + Write>(stream: &mut S, secret: &Secret, p: &Protocol) -> Result<(), PmiError> {
    client_inner(stream, secret, p, true)
}

fn client_inner<S: Read + Write>(stream: &mut S, secret: &Secret, p: &Protocol, keyed: bool) -> Result<(), PmiError> {
    let (ex, hello) = ClientExchange::start(secret, p, keyed)?;
    stream.write_all(&hello).map_err(|e| PmiError::io("sending the authentication challenge", e))?;
    let mut answer = [0u8; ClientExchange::ANSWER_LEN];
    read_fixed(stream, &mut answer, &format!("{} did not answer the challenge", p.server_name))?;
    let proof = ex.prove(&answer)?;
    stream.write_all(&proof).map_err(|e| PmiError::io("sending the authentication proof", e))?;
    let mut verdict = [0u8; 1];
    read_fixed(stream, &mut verdict, &ex.rejected())?;
    ex.check_verdict(verdict[0])
}

/// Server side of the handshake of protocol `p` (see [`server_handshake`]).
pub fn server_handshake_for<S: Read + Write>(stream: &mut S, secret: &Secret, p: &Protocol) -> Result<(), PmiError> {
    let mut hello = [0u8; ServerHello::len(false)];
    read_fixed(stream, &mut hello, "no authentication challenge")?;
    server_rest(stream, secret, ServerHello::parse(p, false, &hello)?)
}

/// Server side of a keyed handshake: `lookup` turns the key id the client names into one of the
/// secrets this server trusts (it may wait a little for one being registered). Returns the
/// secret the client proved.
pub fn server_handshake_keyed<S: Read + Write>(
    stream: &mut S,
    lookup: impl Fn(&[u8; 8]) -> Option<Secret>,
    p: &Protocol,
) -> Result<Secret, PmiError> {
    let mut hello = [0u8; ServerHello::len(true)];
    read_fixed(stream, &mut hello, "no authentication challenge")?;
    let hello = ServerHello::parse(p, true, &hello)?;
    let key = hello.key().expect("a keyed hello names its key");
    let secret = lookup(&key).ok_or_else(|| auth_err(UNKNOWN_KEY))?;
    server_rest(stream, &secret, hello)?;
    Ok(secret)
}

/// Why a keyed hello is refused when the server holds no secret of that id.
pub const UNKNOWN_KEY: &str = "the client names a secret this process does not hold";

fn server_rest<S: Read + Write>(stream: &mut S, secret: &Secret, hello: ServerHello) -> Result<(), PmiError> {
    let (ex, answer) = hello.answer(secret)?;
    stream.write_all(&answer).map_err(|e| PmiError::io("answering the authentication challenge", e))?;
    let mut proof = [0u8; MAC_LEN];
    read_fixed(stream, &mut proof, "no authentication proof")?;
    let verdict = ex.check(&proof)?;
    stream.write_all(&verdict).map_err(|e| PmiError::io("confirming authentication", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::thread;

    fn run_pair(server_secret: Secret, client_secret: Secret) -> (Result<(), PmiError>, Result<(), PmiError>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let r = server_handshake(&mut s, &server_secret);
            drop(s);
            r
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let client = client_handshake(&mut c, &client_secret);
        // A failed client hangs up, which is what unblocks the server.
        drop(c);
        (server.join().unwrap(), client)
    }

    #[test]
    fn same_secret_authenticates_both_ways() {
        let s = Secret::generate().unwrap();
        let (srv, cli) = run_pair(s.clone(), s);
        srv.unwrap();
        cli.unwrap();
    }

    #[test]
    fn wrong_secret_fails_on_both_sides() {
        let a = Secret::generate().unwrap();
        let b = Secret::generate().unwrap();
        let (srv, cli) = run_pair(a, b);
        assert_eq!(srv.unwrap_err().kind(), PmiErrorKind::Auth);
        assert_eq!(cli.unwrap_err().kind(), PmiErrorKind::Auth);
    }

    #[test]
    fn garbage_client_is_rejected() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let secret = Secret::generate().unwrap();
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            server_handshake(&mut s, &secret)
        });
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(&[0x42; 64]).unwrap();
        assert_eq!(server.join().unwrap().unwrap_err().kind(), PmiErrorKind::Auth);
    }

    #[test]
    fn keyed_handshake_finds_the_claimed_secret() {
        let ours = Secret::generate().unwrap();
        let theirs = Secret::generate().unwrap();
        let stranger = Secret::generate().unwrap();
        for (client, ok) in [(theirs.clone(), true), (ours.clone(), true), (stranger, false)] {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let held = [ours.clone(), theirs.clone()];
            let server = thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                server_handshake_keyed(&mut s, |k| held.iter().find(|h| h.key_id() == *k).cloned(), &TRANSPORT)
            });
            let mut c = TcpStream::connect(addr).unwrap();
            let r = client_handshake_keyed(&mut c, &client, &TRANSPORT);
            drop(c);
            let srv = server.join().unwrap();
            assert_eq!(r.is_ok(), ok);
            match srv {
                Ok(s) => assert!(ok && s == client),
                Err(e) => assert!(!ok && e.kind() == PmiErrorKind::Auth),
            }
        }
    }

    /// The exchange as values: a client and a server that share the secret agree; a server
    /// with another secret is caught by the client, and a proof made without the secret by the
    /// server.
    #[test]
    fn the_exchange_runs_without_io() {
        let s = Secret::generate().unwrap();
        let (cx, hello) = ClientExchange::start(&s, &TRANSPORT, true).unwrap();
        let h = ServerHello::parse(&TRANSPORT, true, &hello).unwrap();
        assert_eq!(h.key(), Some(s.key_id()));
        let (sx, answer) = h.answer(&s).unwrap();
        let verdict = sx.check(&cx.prove(&answer).unwrap()).unwrap();
        cx.check_verdict(verdict[0]).unwrap();
        assert!(sx.secret() == &s);
        assert!(cx.check_verdict(0).is_err());

        let (cx, hello) = ClientExchange::start(&s, &TRANSPORT, true).unwrap();
        let other = Secret::generate().unwrap();
        let (sx, answer) = ServerHello::parse(&TRANSPORT, true, &hello).unwrap().answer(&other).unwrap();
        assert_eq!(cx.prove(&answer).unwrap_err().kind(), PmiErrorKind::Auth);
        assert_eq!(sx.check(&[0x17; MAC_LEN]).unwrap_err().kind(), PmiErrorKind::Auth);

        let (_, hello) = ClientExchange::start(&s, &BOOTSTRAP, false).unwrap();
        assert!(ServerHello::parse(&BOOTSTRAP, false, &hello).is_ok());
        assert!(ServerHello::parse(&TRANSPORT, false, &hello).is_err(), "another protocol's magic");
        assert!(ServerHello::parse(&BOOTSTRAP, true, &hello).is_err(), "an unkeyed hello read as keyed");
    }

    #[test]
    fn hex_round_trip_and_rejection() {
        let s = Secret::generate().unwrap();
        assert_eq!(Secret::from_hex(&s.to_hex()).unwrap(), s);
        assert!(Secret::from_hex("abc").is_err());
        assert!(Secret::from_hex(&"zz".repeat(32)).is_err());
        assert_eq!(format!("{s:?}"), "Secret(..)");
        assert_ne!(s.derive("a"), s);
        assert_ne!(s.derive("a"), s.derive("b"));
        assert_eq!(s.derive("a"), s.derive("a"));
    }
}
