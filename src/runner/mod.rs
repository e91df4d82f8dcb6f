//! The runner: wires cluster, workers, nemesis, storage and Toxiproxy into a recorded, checked run.

pub mod cli;
