"""Baton benchmark runner: builds the suite per MPI, runs it interleaved,
writes raw results and a report (see docs/PERFORMANCE.md)."""
