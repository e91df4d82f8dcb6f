//! Integration tests of the local clusters and lock clients against the
//! real servers (Debian's redis-server, redis-sentinel, etcd, ZooKeeper),
//! on loopback ports 20000-29999. One shared cluster per system per binary.

mod cleanup;
mod etcd;
mod redis;
mod redlock;
mod sentinel;
mod util;
mod zookeeper;
