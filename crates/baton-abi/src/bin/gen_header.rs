//! Writes `mpi.h` to the path given as the first argument (or to stdout).

fn main() {
    let abi = baton_abi::data::load(&baton_abi::data::abi_dir()).expect("read abi/*.tsv");
    let text = baton_abi::header::render(&abi);
    match std::env::args().nth(1) {
        Some(path) => std::fs::write(&path, text).expect("write header"),
        None => print!("{text}"),
    }
}
