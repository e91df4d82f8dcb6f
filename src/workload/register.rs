//! The register workload's clients: read, write and compare-and-set on one
//! key of the lock service's own store (not implemented yet).
