//! Workloads: what each worker does per step, read from `workloads/*.toml`.
