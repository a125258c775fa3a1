//! Process groups: ordered lists of process indices, and the standard's set operations.

use crate::engine::ProcIdx;
use baton_abi::consts as c;

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Group {
    pub procs: Vec<ProcIdx>,
}

impl Group {
    pub fn new(procs: Vec<ProcIdx>) -> Group {
        Group { procs }
    }

    pub fn size(&self) -> i32 {
        self.procs.len() as i32
    }

    /// Rank of process `p`, or `MPI_UNDEFINED`.
    pub fn rank_of(&self, p: ProcIdx) -> i32 {
        self.procs.iter().position(|&q| q == p).map(|i| i as i32).unwrap_or(c::MPI_UNDEFINED)
    }

    pub fn incl(&self, ranks: &[i32]) -> Group {
        Group::new(ranks.iter().map(|&r| self.procs[r as usize]).collect())
    }

    pub fn excl(&self, ranks: &[i32]) -> Group {
        let procs = (0..self.procs.len()).filter(|i| !ranks.contains(&(*i as i32))).map(|i| self.procs[i]).collect();
        Group::new(procs)
    }

    /// Expands `(first, last, stride)` triplets into ranks.
    pub fn expand_ranges(ranges: &[[i32; 3]]) -> Vec<i32> {
        let mut out = Vec::new();
        for &[first, last, stride] in ranges {
            let mut r = first;
            while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
                out.push(r);
                r += stride;
            }
        }
        out
    }

    /// Members of `self`, then members of `other` not in `self`.
    pub fn union(&self, other: &Group) -> Group {
        let mut procs = self.procs.clone();
        procs.extend(other.procs.iter().filter(|p| !self.procs.contains(p)));
        Group::new(procs)
    }

    /// Members of `self` also in `other`, in `self`'s order.
    pub fn intersection(&self, other: &Group) -> Group {
        Group::new(self.procs.iter().copied().filter(|p| other.procs.contains(p)).collect())
    }

    /// Members of `self` not in `other`, in `self`'s order.
    pub fn difference(&self, other: &Group) -> Group {
        Group::new(self.procs.iter().copied().filter(|p| !other.procs.contains(p)).collect())
    }

    pub fn compare(&self, other: &Group) -> i32 {
        if self.procs == other.procs {
            c::MPI_IDENT
        } else if self.procs.len() == other.procs.len() && self.procs.iter().all(|p| other.procs.contains(p)) {
            c::MPI_SIMILAR
        } else {
            c::MPI_UNEQUAL
        }
    }

    pub fn translate(&self, ranks: &[i32], other: &Group) -> Vec<i32> {
        ranks
            .iter()
            .map(|&r| if r == c::MPI_PROC_NULL { c::MPI_PROC_NULL } else { other.rank_of(self.procs[r as usize]) })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations_keep_the_standard_order() {
        let a = Group::new(vec![5, 1, 3, 7]);
        let b = Group::new(vec![3, 9, 5]);
        assert_eq!(a.union(&b).procs, vec![5, 1, 3, 7, 9]);
        assert_eq!(a.intersection(&b).procs, vec![5, 3]);
        assert_eq!(a.difference(&b).procs, vec![1, 7]);
        assert_eq!(b.translate(&[0, 1, 2, c::MPI_PROC_NULL], &a), vec![2, c::MPI_UNDEFINED, 0, c::MPI_PROC_NULL]);
        assert_eq!(Group::expand_ranges(&[[0, 6, 3], [5, 1, -2]]), vec![0, 3, 6, 5, 3, 1]);
        assert_eq!(a.compare(&Group::new(vec![1, 3, 5, 7])), c::MPI_SIMILAR);
    }
}
