//! The `ngcc-pipe` binary: parse the command line and hand over to [`ngcc_pipe::cli`].

fn main() {
    std::process::exit(ngcc_pipe::cli::main());
}
