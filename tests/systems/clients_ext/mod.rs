//! Integration tests of the register and election clients against the real
//! servers (Debian's redis-server, redis-sentinel, etcd, ZooKeeper), on
//! loopback ports 40000-44999 only. One shared cluster per system per
//! binary; proxies (embedded Toxiproxy) where a client must be cut off.

mod election;
mod lock_smoke;
mod register;
mod util;
