//! Handle tables: user-visible handles are checked integers, never pointers.
//!
//! A handle packs (kind, generation, slot): bit 31 clear, bits 27..31 the kind, bits 20..27 a
//! generation, bits 0..20 the slot. Every kind is at least 1, so a user handle is always above
//! the 1..4095 range the ABI reserves for predefined handles, and it fits in an `int` so the
//! `MPI_*_toint` functions are exact. A handle of the wrong kind, a freed one (stale
//! generation) or garbage (bits above 31) simply fails to look up.

use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    Comm = 1,
    Group = 2,
    Datatype = 3,
    Op = 4,
    Info = 5,
    Errhandler = 6,
    Request = 7,
    Message = 8,
    /// Persistent requests live in a table of their own; other requests are engine ids.
    PersistentRequest = 9,
    Win = 10,
}

/// Packs (kind, generation, slot) into a handle (see the module doc).
pub const fn encode(kind: Kind, slot: u32, gen: u32) -> usize {
    ((kind as usize) << KIND_SHIFT) | (((gen & ((1 << GEN_BITS) - 1)) as usize) << SLOT_BITS) | slot as usize
}

/// The (slot, generation) of a handle of `kind`, or None if it is not one.
pub fn decode(kind: Kind, h: usize) -> Option<(u32, u32)> {
    if h >> 31 != 0 || (h >> KIND_SHIFT) as u32 != kind as u32 {
        return None;
    }
    Some(((h & ((1 << SLOT_BITS) - 1)) as u32, ((h >> SLOT_BITS) & ((1 << GEN_BITS) - 1)) as u32))
}

const SLOT_BITS: u32 = 20;
const GEN_BITS: u32 = 7;
const KIND_SHIFT: u32 = SLOT_BITS + GEN_BITS;

pub struct Table<T> {
    kind: Kind,
    slots: Vec<Option<T>>,
    gens: Vec<u32>,
    free: VecDeque<u32>,
}

impl<T> Table<T> {
    pub fn new(kind: Kind) -> Table<T> {
        Table { kind, slots: Vec::new(), gens: Vec::new(), free: VecDeque::new() }
    }

    fn decode(&self, h: usize) -> Option<usize> {
        if h >> 31 != 0 || (h >> KIND_SHIFT) as u32 != self.kind as u32 {
            return None;
        }
        let slot = h & ((1 << SLOT_BITS) - 1);
        let gen = ((h >> SLOT_BITS) & ((1 << GEN_BITS) - 1)) as u32;
        (self.gens.get(slot) == Some(&gen) && self.slots[slot].is_some()).then_some(slot)
    }

    pub fn insert(&mut self, v: T) -> usize {
        // Reuse the oldest freed slot so a stale handle stays invalid for as long as possible.
        let slot = match self.free.pop_front() {
            Some(s) => s as usize,
            None => {
                assert!(self.slots.len() < (1 << SLOT_BITS), "handle table full");
                self.slots.push(None);
                self.gens.push(0);
                self.slots.len() - 1
            }
        };
        self.slots[slot] = Some(v);
        ((self.kind as usize) << KIND_SHIFT) | ((self.gens[slot] as usize) << SLOT_BITS) | slot
    }

    pub fn get(&self, h: usize) -> Option<&T> {
        self.decode(h).and_then(|s| self.slots[s].as_ref())
    }

    pub fn get_mut(&mut self, h: usize) -> Option<&mut T> {
        self.decode(h).and_then(|s| self.slots[s].as_mut())
    }

    /// Every live entry.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    pub fn remove(&mut self, h: usize) -> Option<T> {
        let s = self.decode(h)?;
        self.gens[s] = (self.gens[s] + 1) & ((1 << GEN_BITS) - 1);
        self.free.push_back(s as u32);
        self.slots[s].take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_wrong_kind_and_garbage_handles_fail() {
        let mut t: Table<u32> = Table::new(Kind::Comm);
        let a = t.insert(1);
        assert!(a > 4095 && a < (1 << 31));
        assert_eq!(t.get(a), Some(&1));
        assert_eq!(t.remove(a), Some(1));
        assert_eq!(t.get(a), None);
        let b = t.insert(2);
        assert_ne!(a, b);
        assert_eq!(t.get(a), None);
        let other: Table<u32> = Table::new(Kind::Group);
        assert_eq!(other.get(b), None);
        assert_eq!(t.get(0xdead_beef_0000), None);
        assert_eq!(t.get(0x101), None);
    }
}
