//! The "external32" representation (`MPI_Pack_external`): big-endian, the standard's sizes, each
//! basic element converted as its [`Conv`] says.

use super::{Basic, Conv, Layout};

impl Layout {
    /// Bytes of one element in external32.
    pub fn external_size(&self) -> usize {
        match &self.pieces {
            None => self.elems.iter().map(|&(b, n)| b.ext as usize * n as usize).sum(),
            Some(ps) => ps.iter().map(|p| p.count * p.inner.external_size()).sum(),
        }
    }

    /// Converts the native packed bytes of whole elements to external32.
    pub fn to_external(&self, native: &[u8]) -> Vec<u8> {
        self.convert(native, true)
    }

    /// Converts external32 bytes of whole elements to native packed bytes.
    pub fn from_external(&self, ext: &[u8]) -> Vec<u8> {
        self.convert(ext, false)
    }

    /// Converts the whole elements in `src`: native to external32 when `encoding`, else back.
    /// A trailing partial element is left out.
    fn convert(&self, src: &[u8], encoding: bool) -> Vec<u8> {
        let (from, to) = if encoding { (self.size, self.external_size()) } else { (self.external_size(), self.size) };
        let whole = src.len() / from.max(1);
        let mut out = Vec::with_capacity(whole * to);
        if let Some(b) = self.uniform_basic() {
            // One kind of element: the type map's shape does not matter.
            let unit = if encoding { b.size } else { b.ext } as usize;
            for v in src[..whole * from].chunks_exact(unit) {
                if encoding {
                    encode(b, v, &mut out)
                } else {
                    decode(b, v, &mut out)
                }
            }
            return out;
        }
        let mut rest = src;
        for _ in 0..whole {
            self.convert_one(&mut rest, &mut out, encoding);
        }
        out
    }

    /// Converts the bytes of one element at the front of `src` (native to external32 when
    /// `encoding`, else back) and advances `src` past them.
    fn convert_one(&self, src: &mut &[u8], out: &mut Vec<u8>, encoding: bool) {
        if let Some(ps) = &self.pieces {
            for p in ps.iter() {
                for _ in 0..p.count {
                    p.inner.convert_one(src, out, encoding);
                }
            }
            return;
        }
        for &(b, n) in &self.elems {
            for _ in 0..n {
                let w = if encoding { b.size } else { b.ext } as usize;
                let (v, rest) = src.split_at(w);
                if encoding {
                    encode(b, v, out)
                } else {
                    decode(b, v, out)
                }
                *src = rest;
            }
        }
    }
}

fn encode(b: Basic, v: &[u8], out: &mut Vec<u8>) {
    match b.conv {
        Conv::Int { signed } => {
            let mut x = [0u8; 16];
            x[..v.len()].copy_from_slice(v);
            let n = if cfg!(target_endian = "little") {
                u128::from_le_bytes(x)
            } else {
                u128::from_be_bytes(x) >> (128 - 8 * v.len())
            };
            out.extend_from_slice(&widen(n, v.len(), signed).to_be_bytes()[16 - b.ext as usize..]);
        }
        conv => by_parts(conv, v, out, encode_ld),
    }
}

fn decode(b: Basic, v: &[u8], out: &mut Vec<u8>) {
    match b.conv {
        Conv::Int { signed } => {
            let mut x = [0u8; 16];
            x[16 - v.len()..].copy_from_slice(v);
            let n = widen(u128::from_be_bytes(x), v.len(), signed);
            let sz = b.size as usize;
            if cfg!(target_endian = "little") {
                out.extend_from_slice(&n.to_le_bytes()[..sz]);
            } else {
                out.extend_from_slice(&n.to_be_bytes()[16 - sz..]);
            }
        }
        conv => by_parts(conv, v, out, decode_ld),
    }
}

/// The integer `n` of `bytes` bytes widened to 128 bits, its sign extended when `signed`.
fn widen(n: u128, bytes: usize, signed: bool) -> u128 {
    if signed && bytes < 16 && n >> (8 * bytes - 1) & 1 == 1 {
        n | !0u128 << (8 * bytes)
    } else {
        n
    }
}

/// Converts a value that is not an integer, part by part (a complex value has two parts, real
/// and imaginary): bytes as they are, IEEE floats by byte order (the same permutation both
/// ways), `long double`s with `ld`, which converts one in the direction wanted.
fn by_parts(conv: Conv, v: &[u8], out: &mut Vec<u8>, ld: fn(&[u8], &mut Vec<u8>)) {
    let swap: fn(&[u8], &mut Vec<u8>) = |p, out| out.extend(native_to_be(p));
    let (part, parts) = match conv {
        Conv::Raw => return out.extend_from_slice(v),
        Conv::Int { .. } => unreachable!("integers are converted by value"),
        Conv::Float => (swap, 1),
        Conv::Complex => (swap, 2),
        Conv::LongDouble => (ld, 1),
        Conv::LongDoubleComplex => (ld, 2),
    };
    for p in v.chunks_exact(v.len() / parts) {
        part(p, out);
    }
}

/// Native byte order to big-endian (and back: the same permutation).
fn native_to_be(v: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let rev = cfg!(target_endian = "little");
    (0..v.len()).map(move |i| if rev { v[v.len() - 1 - i] } else { v[i] })
}

/// x87 80-bit extended (in 16 bytes) to IEEE quad, big-endian. Both have a 15-bit exponent with
/// the same bias; x87 keeps the integer bit explicitly.
fn encode_ld(v: &[u8], out: &mut Vec<u8>) {
    if cfg!(target_arch = "x86_64") || cfg!(target_arch = "x86") {
        let mant = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
        let se = u16::from_le_bytes([v[8], v[9]]) as u128;
        let frac = ((mant & !(1u64 << 63)) as u128) << 49;
        out.extend_from_slice(&((se << 112) | frac).to_be_bytes());
    } else {
        out.extend(native_to_be(v));
    }
}

fn decode_ld(v: &[u8], out: &mut Vec<u8>) {
    if cfg!(target_arch = "x86_64") || cfg!(target_arch = "x86") {
        let q = u128::from_be_bytes(v[..16].try_into().expect("16 bytes"));
        let se = (q >> 112) as u16;
        let int_bit = if se & 0x7fff != 0 { 1u64 << 63 } else { 0 };
        let mant = ((q >> 49) as u64 & !(1u64 << 63)) | int_bit;
        out.extend_from_slice(&mant.to_le_bytes());
        out.extend_from_slice(&se.to_le_bytes());
        out.extend_from_slice(&[0u8; 6]);
    } else {
        out.extend(native_to_be(v));
    }
}
