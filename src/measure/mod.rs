//! Environment capture, statistics, and the rules a timing session and the readers of its
//! records share (rounds, interference, the host's states).

pub mod env;
pub mod inputs;
pub mod interference;
pub mod rounds;
pub mod states;
pub mod stats;
