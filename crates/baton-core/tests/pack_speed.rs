//! Packing and unpacking speed of the ddt benchmark's layouts in one process, frame by frame as
//! the engine does it (no transport). Not run by default:
//! `cargo test --release -p baton-core --test pack_speed -- --ignored --nocapture`.

use baton_abi::consts as c;
use baton_core::datatype::{predefined, Layout};
use baton_transport::mem::UserBuf;
use std::time::Instant;

#[test]
#[ignore]
fn pack_speed() {
    let dbl = predefined(c::MPI_DOUBLE).unwrap();
    let int = predefined(c::MPI_INT).unwrap();
    let chr = predefined(c::MPI_CHAR).unwrap();
    let st = Layout::structure(&[1, 1, 3], &[0, 8, 12], &[dbl, int, chr]).unwrap();
    let st = Layout::resized(&st, 0, 16);
    let col = Layout::vector(1024, 1, 1024, dbl).unwrap();
    let frame = 32 * 1024;
    for (name, lay, count) in [
        ("struct 64 KiB", &st, 4096usize),
        ("struct 1 MiB", &st, 65536),
        ("struct 4 MiB", &st, 262144),
        ("column 8 KiB", &col, 1),
    ] {
        let (lo, hi) = lay.span(count);
        let mem = vec![1u8; (hi - lo) as usize];
        let mut dst = vec![0u8; (hi - lo) as usize];
        // SAFETY: both vectors outlive every use of the spans below.
        let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
        // SAFETY: as above.
        let out = unsafe { UserBuf::new(dst.as_mut_ptr() as usize, dst.len()) };
        let total = lay.size * count;
        let mut win = vec![0u8; frame.min(total)];
        let reps = (256 << 20) / total.max(1) + 1;
        let t = Instant::now();
        for _ in 0..reps {
            let mut off = 0;
            while off < total {
                let n = (total - off).min(win.len());
                lay.pack_window(&span, -lo, off, &mut win[..n]);
                off += n;
            }
        }
        let p = t.elapsed().as_secs_f64() / reps as f64 * 1e6;
        let t = Instant::now();
        for _ in 0..reps {
            let mut off = 0;
            while off < total {
                let n = (total - off).min(win.len());
                lay.unpack_into(&out, -lo, off, &win[..n]);
                off += n;
            }
        }
        let u = t.elapsed().as_secs_f64() / reps as f64 * 1e6;
        println!(
            "{name}: pack {p:.2} us, unpack {u:.2} us ({:.2} / {:.2} GB/s)",
            total as f64 / p / 1e3,
            total as f64 / u / 1e3
        );
        drop(dst);
    }
}
