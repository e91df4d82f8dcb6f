//! The systems test binary: everything that starts real lock services
//! (redis-server, redis-sentinel, etcd, ZooKeeper): the local clusters and
//! lock clients (`clusters/`), the register and election clients
//! (`clients_ext/`), and `lockjaw run` end to end (`run_*`). Each part
//! keeps its own loopback port range, so their tests may run side by side.
//! Helpers every part may use live in three modules: `shared_clusters`
//! (clusters and temp dirs that last as long as the binary), `recording`
//! (a sink and client configs that record lease refreshes) and `run_util`
//! (running `lockjaw` and reading what a run wrote).

mod adapter_timed;
mod adapters;
mod adapters_go;
mod adapters_java;
mod adapters_node;
mod adapters_python;
mod advice;
mod attach_bed;
mod attach_long;
mod attach_proof;
mod attach_remote;
mod attach_run;
mod attach_util;
mod attach_words;
mod auth_heal;
mod auth_redis;
mod auth_tls;
mod auth_zk_pg;
mod bug_rows;
mod bugs_catalogue;
mod bugs_node;
mod bugs_outside;
mod bugs_python;
mod check_path;
mod ci_shard;
mod client_clock;
mod client_versions;
mod clients_ext;
mod clusters;
mod deadman;
mod explore;
mod guard_renew;
mod handshake_jail;
mod heal_files;
mod heal_kills;
mod heal_long;
mod lease_guard;
mod leftovers;
mod leftovers_long;
mod max_rate;
mod recording;
mod redis_py_asyncio;
mod remote_hosts;
mod repeat_rates;
mod restart_empty;
mod run_cas;
mod run_errors;
mod run_etcd;
mod run_heal;
mod run_interrupt;
mod run_jobs;
mod run_leader;
mod run_mariadb;
mod run_nemeses;
mod run_postgres;
mod run_redis;
mod run_redis_cluster;
mod run_reuse;
mod run_systems;
mod run_util;
mod run_verdict;
mod secrets;
mod secrets_long;
mod shards;
mod shared_clusters;
mod shrink;
mod storage_mariadb;
mod storage_postgres;
mod strike_command;
mod sweep;
mod targets;
mod testbed;
mod timed_faults;
mod together;
mod wire_lease;
mod wire_tap;
mod witness_util;
