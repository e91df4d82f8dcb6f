//! Unit tests of the liveness figures.
