//! The tools test binary: the protected storage over TCP, the embedded
//! Toxiproxy server (HTTP API and data path through a real redis-server,
//! its one-shot toxics, what it refuses), reports and comparisons end to end, and the
//! README and docs/contributing.md against the code. Helpers:
//! `report_common`, `toxiproxy_common`.

mod actionlint;
mod adapters;
mod contributing;
mod dist;
mod help;
mod junit;
mod readme;
mod remote;
mod report_common;
mod report_compare;
mod report_e2e;
mod report_witness;
mod storage;
mod toxiproxy_api;
mod toxiproxy_common;
mod toxiproxy_conformance;
mod toxiproxy_data;
mod toxiproxy_limits;
mod toxiproxy_oneshot;
