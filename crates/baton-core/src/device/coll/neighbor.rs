//! The neighbourhood collectives (`MPI_Neighbor_allgather(v)`, `MPI_Neighbor_alltoall(v,w)`):
//! one round of the schedule engine ([`neighbor_exchange`]) that receives from the topology's
//! sources and sends to its destinations, in the order [`Topology::neighbors`] gives. They have
//! no algorithm to choose and no shared-memory form.

use super::{sched, Blocks, Call};
use crate::device::{Buffer, Device, Started};
use crate::err;
use crate::error::Result;
use crate::topo::{neighbor_exchange, Neighbors, Topology};

/// This process's neighbours in its communicator's topology.
pub struct Neighborhood {
    nb: Neighbors,
    /// Whether they come from a grid, whose sends [`neighbor_exchange`] posts in its own order.
    cart: bool,
}

impl Neighborhood {
    /// The neighbours of `rank` in `topo`: an error naming `call` when the communicator has no
    /// topology.
    pub fn of(call: &str, topo: Option<&Topology>, rank: i32) -> Result<Neighborhood> {
        let topo = topo.ok_or_else(|| {
            err!(MPI_ERR_TOPOLOGY, "{call}: comm has no process topology (neighbourhood collectives need one)")
        })?;
        Ok(Neighborhood { nb: topo.neighbors(rank), cart: matches!(topo, Topology::Cart(_)) })
    }

    /// The in-degree: blocks received.
    pub fn sources(&self) -> usize {
        self.nb.sources.len()
    }

    /// The out-degree: blocks sent.
    pub fn destinations(&self) -> usize {
        self.nb.destinations.len()
    }
}

/// What a neighbourhood collective sends.
enum Out {
    /// The same buffer to every destination (the allgathers).
    Same(Buffer),
    /// A block per destination.
    Blocks(Blocks),
}

impl Device {
    /// `MPI_Neighbor_allgather`: `send` to every destination, `recv` a block per source.
    pub fn neighbor_allgather(&self, at: Call, nbh: &Neighborhood, send: Buffer, recv: Buffer) -> Result<Started> {
        self.neighbor(at, "MPI_Neighbor_allgather", nbh, Out::Same(send), Blocks::Even(recv))
    }

    /// `MPI_Neighbor_allgatherv`: `send` to every destination, a buffer per source.
    pub fn neighbor_allgatherv(
        &self,
        at: Call,
        nbh: &Neighborhood,
        send: Buffer,
        recv: Vec<Buffer>,
    ) -> Result<Started> {
        self.neighbor(at, "MPI_Neighbor_allgatherv", nbh, Out::Same(send), Blocks::Each(recv))
    }

    /// `MPI_Neighbor_alltoall`: a block per destination, a block per source.
    pub fn neighbor_alltoall(&self, at: Call, nbh: &Neighborhood, send: Buffer, recv: Buffer) -> Result<Started> {
        self.neighbor(at, "MPI_Neighbor_alltoall", nbh, Out::Blocks(Blocks::Even(send)), Blocks::Even(recv))
    }

    /// `MPI_Neighbor_alltoallv` and `MPI_Neighbor_alltoallw` (`call` names which): a buffer per
    /// destination, a buffer per source. A `Buffer` carries its own datatype, so the `w` form's
    /// per-block datatypes need no other schedule.
    pub fn neighbor_alltoallvw(
        &self,
        at: Call,
        call: &'static str,
        nbh: &Neighborhood,
        send: Vec<Buffer>,
        recv: Vec<Buffer>,
    ) -> Result<Started> {
        self.neighbor(at, call, nbh, Out::Blocks(Blocks::Each(send)), Blocks::Each(recv))
    }

    /// One exchange: what `send` says to the destinations, `recv` a block per source.
    fn neighbor(&self, at: Call, call: &'static str, nbh: &Neighborhood, send: Out, recv: Blocks) -> Result<Started> {
        let mut s = sched(&at, call);
        let src = match send {
            Out::Blocks(bl) => bl.locs(&mut s, nbh.destinations()),
            Out::Same(one) => vec![one.region(&mut s); nbh.destinations()],
        };
        let dst = recv.locs(&mut s, nbh.sources());
        neighbor_exchange(&mut s, nbh.cart, &nbh.nb, &src, &dst);
        self.in_form(&at, s)
    }
}
