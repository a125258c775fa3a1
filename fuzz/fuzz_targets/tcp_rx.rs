#![no_main]
//! The TCP receive path (header decoding, buffering, direct placement) on arbitrary bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| baton_transport::stream::fuzz_rx(data));
