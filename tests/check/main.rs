//! The checker test binary: `lockjaw check`/`convert` as a user runs them,
//! the reference corpus, the hand-written lock examples, generated lock
//! histories from the lease-lock simulator (`sim/`, test-only), and the
//! randomized and differential tests of the linearizability search. Starts
//! no servers.

mod check_cli;
mod corpus;
mod differential;
mod hostile_files;
mod late_proof;
mod liveness;
mod lock_examples;
mod lock_sim;
mod random_histories;
mod random_input;
mod sim;
mod unprotected_writes;
mod witness_cli;
