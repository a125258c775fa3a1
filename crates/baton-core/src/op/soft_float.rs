//! Software binary floating point, correctly rounded to nearest even: what the kernels use for
//! the formats Rust has no type for. Values are the raw bits in a `u128` (sign above exponent
//! above fraction); a [`Fmt`] ([`HALF`], [`X87`], [`QUAD`]) says how to read them.

use std::cmp::Ordering;

/// A binary interchange-like format. `frac` counts the stored fraction bits, the integer bit
/// included when `explicit` (x87 stores it; IEEE formats imply it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fmt {
    pub exp: u32,
    pub frac: u32,
    pub explicit: bool,
    /// Bytes of the value in memory.
    pub bytes: usize,
}

pub const HALF: Fmt = Fmt { exp: 5, frac: 10, explicit: false, bytes: 2 };
pub const X87: Fmt = Fmt { exp: 15, frac: 64, explicit: true, bytes: 10 };
pub const QUAD: Fmt = Fmt { exp: 15, frac: 112, explicit: false, bytes: 16 };

/// A decoded value; a finite one is `sig * 2^exp` with `sig` non-zero.
#[derive(Clone, Copy, Debug)]
enum V {
    Nan,
    Inf(bool),
    Zero(bool),
    Fin(bool, i32, u128),
}

impl Fmt {
    /// Significand bits.
    fn prec(self) -> u32 {
        if self.explicit {
            self.frac
        } else {
            self.frac + 1
        }
    }

    fn bias(self) -> i32 {
        (1 << (self.exp - 1)) - 1
    }

    fn field_max(self) -> u128 {
        (1 << self.exp) - 1
    }

    fn sign_bit(self) -> u128 {
        1 << (self.exp + self.frac)
    }

    /// Exponent of the last significand bit of the smallest normal number (and of every
    /// subnormal one).
    fn emin(self) -> i32 {
        2 - self.bias() - self.prec() as i32
    }

    pub fn load(self, b: &[u8]) -> u128 {
        let mut x = [0u8; 16];
        if cfg!(target_endian = "little") {
            x[..self.bytes].copy_from_slice(&b[..self.bytes]);
            u128::from_le_bytes(x)
        } else {
            x[16 - self.bytes..].copy_from_slice(&b[..self.bytes]);
            u128::from_be_bytes(x)
        }
    }

    /// Writes the value's bytes, leaving any padding after them (x87's 6 bytes) alone.
    pub fn store(self, v: u128, b: &mut [u8]) {
        if cfg!(target_endian = "little") {
            b[..self.bytes].copy_from_slice(&v.to_le_bytes()[..self.bytes]);
        } else {
            b[..self.bytes].copy_from_slice(&v.to_be_bytes()[16 - self.bytes..]);
        }
    }

    pub fn neg(self, x: u128) -> u128 {
        x ^ self.sign_bit()
    }

    fn decode(self, x: u128) -> V {
        let sign = x & self.sign_bit() != 0;
        let field = (x >> self.frac) & self.field_max();
        let frac = x & ((1 << self.frac) - 1);
        let int_bit = 1u128 << (self.prec() - 1);
        if field == self.field_max() {
            // x87 infinities have the integer bit set; without it ("pseudo-infinity") the
            // encoding is invalid, which the hardware treats as a NaN.
            let rest = if self.explicit { frac & !int_bit } else { frac };
            return if rest == 0 && (!self.explicit || frac & int_bit != 0) { V::Inf(sign) } else { V::Nan };
        }
        if field == 0 {
            return if frac == 0 { V::Zero(sign) } else { V::Fin(sign, self.emin(), frac) };
        }
        let sig = if self.explicit {
            if frac & int_bit == 0 {
                // An "unnormal": invalid operand to the x87.
                return V::Nan;
            }
            frac
        } else {
            frac | int_bit
        };
        V::Fin(sign, field as i32 - self.bias() - (self.prec() as i32 - 1), sig)
    }

    /// The default quiet NaN the hardware produces for invalid operations.
    fn nan(self) -> u128 {
        let quiet = 1u128 << (self.prec() - 2);
        let int_bit = if self.explicit { 1u128 << (self.prec() - 1) } else { 0 };
        self.sign_bit() | (self.field_max() << self.frac) | int_bit | quiet
    }

    fn inf(self, sign: bool) -> u128 {
        let int_bit = if self.explicit { 1u128 << (self.prec() - 1) } else { 0 };
        (if sign { self.sign_bit() } else { 0 }) | (self.field_max() << self.frac) | int_bit
    }

    fn quieted(self, x: u128) -> u128 {
        x | (1u128 << (self.prec() - 2))
    }

    /// `sig * 2^e` rounded to nearest even and encoded. When bits were lost before, `sig`
    /// carries at least two bits below the result's last bit and has its lowest bit set
    /// ("sticky"), which is all the rounding needs to know about them.
    fn round(self, sign: bool, sig: u128, e: i32) -> u128 {
        let s = if sign { self.sign_bit() } else { 0 };
        if sig == 0 {
            return s;
        }
        let p = self.prec() as i32;
        let len = 128 - sig.leading_zeros() as i32;
        let target = (e + len - p).max(self.emin());
        let mut sig = if target > e { shr_even(sig, (target - e) as u32) } else { sig << (e - target) };
        let mut e = target;
        if sig >> p != 0 {
            // Rounding carried into a new bit: the significand is now exactly 2^p.
            sig >>= 1;
            e += 1;
        }
        let int_bit = 1u128 << (p - 1);
        let field = if sig & int_bit != 0 { (e - self.emin() + 1) as u128 } else { 0 };
        if field >= self.field_max() {
            return self.inf(sign);
        }
        let frac = if self.explicit { sig } else { sig & (int_bit - 1) };
        s | (field << self.frac) | frac
    }

    /// A finite value with its significand shifted up to exactly `prec` bits.
    fn normal(self, e: i32, sig: u128) -> (i32, u128) {
        let sh = sig.leading_zeros() as i32 - (128 - self.prec() as i32);
        (e - sh, sig << sh)
    }

    pub fn add(self, a: u128, b: u128) -> u128 {
        match (self.decode(a), self.decode(b)) {
            (V::Nan, _) => self.quieted(a),
            (_, V::Nan) => self.quieted(b),
            (V::Inf(x), V::Inf(y)) if x != y => self.nan(),
            (V::Inf(_), _) => a,
            (_, V::Inf(_)) => b,
            (V::Zero(x), V::Zero(y)) => self.round(x && y, 0, 0),
            (V::Zero(_), V::Fin(s, e, m)) | (V::Fin(s, e, m), V::Zero(_)) => self.round(s, m, e),
            (V::Fin(sa, ea, ma), V::Fin(sb, eb, mb)) => {
                let (ea, ma) = self.normal(ea, ma);
                let (eb, mb) = self.normal(eb, mb);
                let ((s, e, big), (_, es, small)) =
                    if (ea, ma) >= (eb, mb) { ((sa, ea, ma), (sb, eb, mb)) } else { ((sb, eb, mb), (sa, ea, ma)) };
                // Three guard bits, and the bits shifted out of the smaller operand folded
                // into its lowest one.
                let (big, small) = (big << 3, small << 3);
                let d = (e - es) as u32;
                let aligned = if d == 0 {
                    small
                } else if d > self.prec() + 3 {
                    1
                } else {
                    (small >> d) | (small & ((1 << d) - 1) != 0) as u128
                };
                let sig = if sa == sb { big + aligned } else { big - aligned };
                // An exact zero difference is +0 when rounding to nearest.
                self.round(s && sig != 0, sig, e - 3)
            }
        }
    }

    pub fn mul(self, a: u128, b: u128) -> u128 {
        match (self.decode(a), self.decode(b)) {
            (V::Nan, _) => self.quieted(a),
            (_, V::Nan) => self.quieted(b),
            (V::Inf(_), V::Zero(_)) | (V::Zero(_), V::Inf(_)) => self.nan(),
            (V::Inf(x), V::Inf(y) | V::Fin(y, _, _)) | (V::Fin(x, _, _), V::Inf(y)) => self.inf(x != y),
            (V::Zero(x), V::Zero(y) | V::Fin(y, _, _)) | (V::Fin(x, _, _), V::Zero(y)) => self.round(x != y, 0, 0),
            (V::Fin(sa, ea, ma), V::Fin(sb, eb, mb)) => {
                let (hi, lo) = mul_wide(ma, mb);
                let e = ea + eb;
                if hi == 0 {
                    return self.round(sa != sb, lo, e);
                }
                // Keep 125 bits (enough for rounding at any precision up to 113) and fold
                // the rest into the sticky bit.
                let len = 256 - hi.leading_zeros();
                let sh = len - 125;
                let sig = (hi << (128 - sh)) | (lo >> sh) | (lo & ((1 << sh) - 1) != 0) as u128;
                self.round(sa != sb, sig, e + sh as i32)
            }
        }
    }

    /// Numeric comparison: None when either is a NaN; the two zeros are equal.
    pub fn cmp(self, a: u128, b: u128) -> Option<Ordering> {
        // (negative, magnitude class, exponent, significand) with significands normalized,
        // so that magnitudes order lexicographically.
        let key = |v: V| -> Option<(bool, u8, i32, u128)> {
            Some(match v {
                V::Nan => return None,
                V::Zero(_) => (false, 0, 0, 0),
                V::Fin(s, e, m) => {
                    let (e, m) = self.normal(e, m);
                    (s, 1, e, m)
                }
                V::Inf(s) => (s, 2, 0, 0),
            })
        };
        let (na, ca, ea, ma) = key(self.decode(a))?;
        let (nb, cb, eb, mb) = key(self.decode(b))?;
        Some(match (na, nb) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (neg, _) => {
                let o = (ca, ea, ma).cmp(&(cb, eb, mb));
                if neg {
                    o.reverse()
                } else {
                    o
                }
            }
        })
    }
}

/// `x >> sh` rounded to nearest, ties to even.
fn shr_even(x: u128, sh: u32) -> u128 {
    if sh > 128 {
        return 0;
    }
    if sh == 128 {
        return (x > 1 << 127) as u128;
    }
    let q = x >> sh;
    let rem = x & ((1 << sh) - 1);
    let half = 1u128 << (sh - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// The 256-bit product of two numbers below 2^127, as (high, low) halves.
fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    let m = u64::MAX as u128;
    let (a0, a1, b0, b1) = (a & m, a >> 64, b & m, b >> 64);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (p00 >> 64) + (p01 & m) + (p10 & m);
    let lo = (p00 & m) | (mid << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (hi, lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SINGLE: Fmt = Fmt { exp: 8, frac: 23, explicit: false, bytes: 4 };
    const DOUBLE: Fmt = Fmt { exp: 11, frac: 52, explicit: false, bytes: 8 };

    /// A deterministic stream of awkward bit patterns: random, near powers of two,
    /// subnormals, extremes, zeros, infinities and NaNs.
    fn patterns(n: usize) -> Vec<u64> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut v = vec![0, 1 << 63, 1, 0x7ff0 << 48, 0xfff0 << 48, 0x7ff8 << 48, 0x7fef_ffff_ffff_ffff];
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(match i % 4 {
                0 => x,
                1 => x & 0x800f_ffff_ffff_ffff | (((x >> 52) & 3) + 1020) << 52,
                2 => x & 0x8000_0000_ffff_ffff,
                _ => x & 0xfff0_0000_0000_0000 | (x & 7),
            });
        }
        v
    }

    fn same64(a: f64, got: u128) -> bool {
        let g = f64::from_bits(got as u64);
        (a.is_nan() && g.is_nan()) || a.to_bits() == g.to_bits()
    }

    #[test]
    fn double_matches_the_hardware() {
        let p = patterns(3000);
        for (k, &a) in p.iter().enumerate() {
            for &b in p.iter().skip(k % 7).step_by(37) {
                let (x, y) = (f64::from_bits(a), f64::from_bits(b));
                let (a, b) = (a as u128, b as u128);
                assert!(same64(x + y, DOUBLE.add(a, b)), "{x:e} + {y:e}");
                assert!(same64(x * y, DOUBLE.mul(a, b)), "{x:e} * {y:e}");
                assert_eq!(x.partial_cmp(&y), DOUBLE.cmp(a, b), "{x:e} <> {y:e}");
            }
        }
    }

    #[test]
    fn single_matches_the_hardware() {
        let p: Vec<u32> = patterns(3000).iter().map(|&x| (x >> 32) as u32 ^ x as u32).collect();
        for (k, &a) in p.iter().enumerate() {
            for &b in p.iter().skip(k % 5).step_by(41) {
                let (x, y) = (f32::from_bits(a), f32::from_bits(b));
                let ok = |r: f32, got: u128| {
                    let g = f32::from_bits(got as u32);
                    (r.is_nan() && g.is_nan()) || r.to_bits() == g.to_bits()
                };
                assert!(ok(x + y, SINGLE.add(a as u128, b as u128)), "{x:e} + {y:e}");
                assert!(ok(x * y, SINGLE.mul(a as u128, b as u128)), "{x:e} * {y:e}");
            }
        }
    }

    /// An x87 value from a double (exact: 64 significand bits hold 53).
    fn ext(x: f64) -> u128 {
        let b = x.to_bits();
        let sign = (b >> 63) as u128;
        let field = ((b >> 52) & 0x7ff) as i32;
        let frac = (b & ((1 << 52) - 1)) as u128;
        assert!(field != 0 && field != 0x7ff, "normal doubles only");
        let e = field - 1023 + 16383;
        (sign << 79) | ((e as u128) << 64) | (1 << 63) | (frac << 11)
    }

    #[test]
    fn x87_and_quad_agree_with_double_where_exact() {
        for (x, y) in [(1.5, 2.25), (-3.0, 0.125), (1e300, 1e300), (7.0, -7.0), (1e-300, 3.0)] {
            assert_eq!(X87.add(ext(x), ext(y)), if x + y == 0.0 { 0 } else { ext(x + y) });
            // Products that are exact in a double are exact in x87 too.
            if (x * y).is_finite() && (x * y).abs() > 1e-290 {
                assert_eq!(X87.mul(ext(x), ext(y)), ext(x * y), "{x} * {y}");
            }
        }
        // 1e300 * 1e300 fits x87's exponent range though not a double's.
        assert_eq!(X87.cmp(X87.mul(ext(1e300), ext(1e300)), ext(1e300)), Some(Ordering::Greater));
        let one = 0x3fffu128 << 112;
        let two = 0x4000u128 << 112;
        assert_eq!(QUAD.add(one, one), two);
        assert_eq!(QUAD.mul(two, QUAD.neg(two)), QUAD.neg(0x4001u128 << 112));
        // 1 + 2^-113 is a tie between 1 and 1 + 2^-112: even wins.
        let tiny = (0x3fffu128 - 113) << 112;
        assert_eq!(QUAD.add(one, tiny), one);
        assert_eq!(QUAD.add(one, QUAD.add(tiny, tiny)), one | 1);
    }

    #[test]
    fn x87_rounds_at_64_bits() {
        // (2^64 - 1) * 2^-63 plus 2^-64 lies halfway to 2: rounds to even (2).
        let max_sig = (0x3fffu128 << 64) | u64::MAX as u128;
        let half_ulp = (0x3fffu128 - 64) << 64 | 1 << 63;
        assert_eq!(X87.add(max_sig, half_ulp), (0x4000u128 << 64) | 1 << 63);
        // The x87 largest value doubled overflows to infinity (integer bit set).
        let big = (0x7ffeu128 << 64) | u64::MAX as u128;
        assert_eq!(X87.add(big, big), (0x7fffu128 << 64) | 1 << 63);
    }

    #[test]
    fn half_rounds_and_overflows() {
        let h = |x: u16| x as u128;
        assert_eq!(HALF.add(h(0x3c00), h(0x3c00)), h(0x4000)); // 1 + 1 = 2
        assert_eq!(HALF.add(h(0x3c00), h(0x1000)), h(0x3c00)); // 1 + 2^-11: tie, even
        assert_eq!(HALF.mul(h(0x7bff), h(0x4000)), h(0x7c00)); // 65504 * 2 = inf
        assert_eq!(HALF.mul(h(0x0001), h(0x3800)), h(0x0000)); // smallest subnormal / 2: tie to 0
        assert_eq!(HALF.mul(h(0x0003), h(0x3800)), h(0x0002)); // 1.5 ulp: tie to even 2
    }
}
