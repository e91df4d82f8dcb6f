//! Embedded Toxiproxy-compatible server and the Toxiproxy API client.

pub mod cli;
