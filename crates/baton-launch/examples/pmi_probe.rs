//! Test client for the launcher's integration tests: a tiny "MPI program"
//! that drives `baton_pmi::PmiClient` in the way named by its first
//! argument and checks what it gets back. Built with the examples, so it is
//! always present next to the test binaries.

use std::io::Write;
use std::net::TcpStream;
use std::process::exit;
use std::time::Duration;

use baton_pmi::auth::Secret;
use baton_pmi::{PmiClient, PmiErrorKind};

fn check(cond: bool, what: &str) {
    if !cond {
        eprintln!("pmi_probe: check failed: {what}");
        exit(99);
    }
}

fn init() -> PmiClient {
    match PmiClient::from_env() {
        Ok(Some(c)) => c,
        Ok(None) => {
            eprintln!("pmi_probe: not started by mpiexec");
            exit(98);
        }
        Err(e) => {
            eprintln!("pmi_probe: init failed: {e}");
            exit(97);
        }
    }
}

/// put / fence / get over two epochs, plus the memfd shared by each host's ranks.
fn kv(c: &mut PmiClient) {
    let (rank, size) = (c.rank(), c.size());
    check(std::env::var("BATON_PMI_SECRET").is_err(), "secret removed from env");
    c.put("addr", format!("addr-of-{rank}").as_bytes()).unwrap();
    c.put("big", &vec![rank as u8; 100_000]).unwrap();
    let fd = c.shm_fd().expect("shm fd");
    // The memfd is per host: the first rank of each host writes it and the
    // other ranks of that host (same BATON_NODE) must see it.
    let node = std::env::var("BATON_NODE").unwrap_or_default();
    check(!node.is_empty(), "BATON_NODE set");
    let local_rank: u32 = std::env::var("BATON_LOCAL_RANK").ok().and_then(|v| v.parse().ok()).unwrap_or(u32::MAX);
    check(local_rank != u32::MAX, "BATON_LOCAL_RANK set");
    if local_rank == 0 {
        let msg = format!("job-{}-{node}", c.job_id());
        // SAFETY: fd is the open memfd; msg is a valid buffer.
        let n = unsafe { libc::pwrite(fd, msg.as_ptr().cast(), msg.len(), 0) };
        check(n == msg.len() as isize, "pwrite to memfd");
    }
    c.fence().unwrap();
    for r in 0..size {
        let v = c.get(r, "addr").unwrap();
        check(v.as_deref() == Some(format!("addr-of-{r}").as_bytes()), "epoch 1 value");
        let big = c.get(r, "big").unwrap().unwrap();
        check(big.len() == 100_000 && big.iter().all(|&b| b == r as u8), "big value");
    }
    let expect = format!("job-{}-{node}", c.job_id());
    let mut buf = vec![0u8; expect.len()];
    // SAFETY: fd is the open memfd; buf is writable for its length.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    check(n == buf.len() as isize && buf == expect.as_bytes(), "memfd shared by the ranks of a host");
    c.put("second", &[rank as u8, 7]).unwrap();
    c.fence().unwrap();
    for r in 0..size {
        check(c.get(r, "second").unwrap() == Some(vec![r as u8, 7]), "epoch 2 value");
    }
    check(c.get(0, "nothing").unwrap().is_none(), "missing key");
    println!("rank {rank} of {size} ok appnum {} universe {}", c.appnum(), c.universe_size());
}

fn print_pid(c: &PmiClient) {
    println!("rank {} pid {}", c.rank(), std::process::id());
    std::io::stdout().flush().unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("");
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    if mode == "singleton" {
        match PmiClient::from_env() {
            Ok(None) => println!("singleton"),
            other => {
                eprintln!("unexpected: {other:?}");
                exit(1)
            }
        }
        return;
    }
    let mut c = init();
    let rank = c.rank();
    match mode {
        "kv" => kv(&mut c),
        "badauth" => {
            let addr = std::env::var("BATON_PMI_ADDR").unwrap();
            if rank == 0 {
                let wrong = Secret::generate().unwrap();
                let e = PmiClient::connect(&addr, &wrong, 0, c.job_id()).unwrap_err();
                check(e.kind() == PmiErrorKind::Auth, "wrong secret refused");
                let mut raw = TcpStream::connect(&addr).unwrap();
                raw.write_all(&[0xffu8; 64]).unwrap();
                drop(raw);
            }
            kv(&mut c);
        }
        "abort" => {
            c.fence().unwrap();
            if rank == 1 {
                let code: i32 = arg(1).parse().unwrap();
                let e = c.abort(code, &arg(2));
                eprintln!("pmi_probe: abort returned {e:?}");
                exit(96);
            }
            std::thread::sleep(Duration::from_secs(30));
        }
        "nofinalize" => {
            c.fence().unwrap();
            if rank == 1 {
                exit(0);
            }
            std::thread::sleep(Duration::from_secs(30));
        }
        "late-exit" => {
            c.fence().unwrap();
            c.finalize().unwrap();
            if rank == 1 {
                exit(arg(1).parse().unwrap());
            }
            std::thread::sleep(Duration::from_millis(500));
            println!("rank {rank} done");
            return;
        }
        "selfkill" => {
            c.fence().unwrap();
            print_pid(&c);
            c.fence().unwrap();
            if rank == 1 {
                // SAFETY: signalling ourselves.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_secs(30));
        }
        "sleep" => {
            c.fence().unwrap();
            print_pid(&c);
            std::thread::sleep(Duration::from_secs(30));
        }
        _ => {
            eprintln!("pmi_probe: unknown mode '{mode}'");
            exit(2);
        }
    }
    c.finalize().unwrap();
}
