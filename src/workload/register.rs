//! The register workload: read, write and compare-and-set on one key of the
//! lock service's own store, checked for linearizability (`cas-register`).
//!
//! One small trait, [`RegisterClient`], with one implementation per store:
//! Redis (`GET`, `SET`, a Lua compare-and-set; also used on the Sentinel
//! primary's address as given), etcd (range, put, a transaction comparing the
//! value), ZooKeeper (a persistent node created holding `null`; write =
//! `setData`; cas = `getData`, then `setData` with the version read, so it
//! takes effect only if nothing changed in between). Redlock has no single
//! store and is refused. Values are small integers; the register starts
//! absent (`null`), which is why a run uses a key of its own.
//!
//! History ops (process numbers as for the lock workloads): `read` (ok value
//! = what was read, `null` = absent), `write` (value), `cas` (value
//! `[old, new]`; `fail` = the value was not `old`).

use super::step::Procs;
use super::Workload;
use crate::client::{self, ClientError};
use crate::cluster::System;
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Sink};
use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// One client of a store holding a register.
#[async_trait]
pub trait RegisterClient: Send {
    async fn read(&mut self, key: &str) -> Result<Value, ClientError>;
    async fn write(&mut self, key: &str, v: i64) -> Result<(), ClientError>;
    /// `Ok(false)`: the value was not `old`; nothing changed.
    async fn cas(&mut self, key: &str, old: i64, new: i64) -> Result<bool, ClientError>;
}

/// Connect a register client to `system` (endpoints as announced, dialled
/// through `dial`).
pub async fn connect(
    system: System,
    endpoints: &[String],
    dial: &HashMap<String, String>,
    t: Duration,
) -> Result<Box<dyn RegisterClient>, String> {
    let addr = |e: &String| dial.get(e).cloned().unwrap_or_else(|| e.clone());
    let first = endpoints
        .first()
        .ok_or_else(|| "no endpoints (hint: pass --endpoints host:port,...)".to_string())?;
    Ok(match system {
        System::Redis => Box::new(RedisRegister::connect(&addr(first), t).await?),
        System::Sentinel => {
            let mut cfg = client::ClientConfig::new(endpoints.to_vec());
            cfg.dial = dial.clone();
            let a = crate::cluster::sentinel::ask_primary(&addr(first), t).await?;
            Box::new(RedisRegister::connect(&cfg.dial_addr(&a), t).await?)
        }
        System::Etcd => Box::new(EtcdRegister::connect(endpoints.iter().map(addr).collect(), t).await?),
        System::Zookeeper => Box::new(ZkRegister::connect(endpoints.iter().map(addr).collect(), t).await?),
        System::Redlock => {
            return Err("the register workload needs one store; Redlock's nodes are independent (hint: use redis, sentinel, etcd or zookeeper)".into())
        }
    })
}

/// Draws register ops and records them.
pub struct Generator {
    key: String,
    read_ratio: f64,
    values: u64,
    think: Duration,
    rng: StdRng,
    procs: Procs,
}

impl Generator {
    pub fn new(w: &Workload, seed: u64, procs: Procs) -> Generator {
        Generator {
            key: w.register_key.clone(),
            read_ratio: w.read_ratio,
            values: w.values,
            think: Duration::from_millis(w.think_ms),
            rng: StdRng::seed_from_u64(seed),
            procs,
        }
    }

    /// One op, recorded, then the think time.
    pub async fn step(&mut self, c: &mut dyn RegisterClient, clock: &RunClock, sink: &dyn Sink) {
        let x: f64 = self.rng.gen();
        let a = self.rng.gen_range(0..self.values) as i64;
        let b = self.rng.gen_range(0..self.values) as i64;
        let (f, value) = if x < self.read_ratio {
            ("read", Value::Null)
        } else if x < self.read_ratio + (1.0 - self.read_ratio) / 2.0 {
            ("write", Value::from(a))
        } else {
            ("cas", Value::from(vec![a, b]))
        };
        let mut inv = Op::new(clock.now(), self.procs.process(), OpType::Invoke, f);
        inv.key = Some(self.key.clone());
        inv.value = value;
        sink.record(inv.clone());
        let r: Result<(OpType, Value), ClientError> = match f {
            "read" => c.read(&self.key).await.map(|v| (OpType::Ok, v)),
            "write" => c
                .write(&self.key, a)
                .await
                .map(|()| (OpType::Ok, inv.value.clone())),
            _ => c.cas(&self.key, a, b).await.map(|ok| {
                let kind = if ok { OpType::Ok } else { OpType::Fail };
                (kind, inv.value.clone())
            }),
        };
        let mut done = inv;
        done.time = clock.now();
        match r {
            Ok((kind, v)) => {
                done.kind = kind;
                done.value = v;
            }
            Err(e) => {
                done.error = Some(e.to_string());
                if e.is_definite() {
                    done.kind = OpType::Fail;
                } else {
                    done.kind = OpType::Info;
                    self.procs.bump();
                }
            }
        }
        sink.record(done);
        if !self.think.is_zero() {
            tokio::time::sleep(self.think).await;
        }
    }
}

fn parse_value(bytes: Option<&[u8]>) -> Result<Value, ClientError> {
    match bytes {
        None => Ok(Value::Null),
        Some(b) => serde_json::from_slice(b)
            .map_err(|e| ClientError::Definite(format!("the register holds something else: {e}"))),
    }
}

const CAS: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0";

/// A register on one Redis server.
pub struct RedisRegister {
    conn: redis::aio::MultiplexedConnection,
    cas: redis::Script,
    t: Duration,
}

impl RedisRegister {
    pub async fn connect(addr: &str, t: Duration) -> Result<RedisRegister, String> {
        let conn = client::redis::open(addr, t)
            .await
            .map_err(|e| e.to_string())?;
        Ok(RedisRegister {
            conn,
            cas: redis::Script::new(CAS),
            t,
        })
    }
}

#[async_trait]
impl RegisterClient for RedisRegister {
    async fn read(&mut self, key: &str) -> Result<Value, ClientError> {
        let c = &mut self.conn;
        let got: Option<Vec<u8>> = client::timed(self.t, "get", async {
            redis::cmd("GET")
                .arg(key)
                .query_async(c)
                .await
                .map_err(|e| client::redis::classify("get", e))
        })
        .await?;
        parse_value(got.as_deref())
    }

    async fn write(&mut self, key: &str, v: i64) -> Result<(), ClientError> {
        let c = &mut self.conn;
        client::timed(self.t, "set", async {
            redis::cmd("SET")
                .arg(key)
                .arg(v.to_string())
                .query_async::<()>(c)
                .await
                .map_err(|e| client::redis::classify("set", e))
        })
        .await
    }

    async fn cas(&mut self, key: &str, old: i64, new: i64) -> Result<bool, ClientError> {
        let mut inv = self.cas.key(key);
        inv.arg(old.to_string()).arg(new.to_string());
        let c = &mut self.conn;
        let n: i64 = client::timed(self.t, "cas", async {
            inv.invoke_async(c)
                .await
                .map_err(|e| client::redis::classify("cas", e))
        })
        .await?;
        Ok(n == 1)
    }
}

/// A register on an etcd cluster.
pub struct EtcdRegister {
    client: etcd_client::Client,
    t: Duration,
}

impl EtcdRegister {
    pub async fn connect(addrs: Vec<String>, t: Duration) -> Result<EtcdRegister, String> {
        let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
        let opts = etcd_client::ConnectOptions::new()
            .with_connect_timeout(t)
            .with_timeout(t);
        let client = tokio::time::timeout(t * 2, etcd_client::Client::connect(urls, Some(opts)))
            .await
            .map_err(|_| format!("connect to {}: timed out", addrs.join(",")))?
            .map_err(|e| format!("connect to {}: {e}", addrs.join(",")))?;
        Ok(EtcdRegister { client, t })
    }
}

#[async_trait]
impl RegisterClient for EtcdRegister {
    async fn read(&mut self, key: &str) -> Result<Value, ClientError> {
        let mut c = self.client.clone();
        let r = client::timed(self.t, "get", async {
            c.get(key, None)
                .await
                .map_err(|e| client::etcd::classify("get", e))
        })
        .await?;
        parse_value(r.kvs().first().map(|kv| kv.value()))
    }

    async fn write(&mut self, key: &str, v: i64) -> Result<(), ClientError> {
        let mut c = self.client.clone();
        client::timed(self.t, "put", async {
            c.put(key, v.to_string(), None)
                .await
                .map(drop)
                .map_err(|e| client::etcd::classify("put", e))
        })
        .await
    }

    async fn cas(&mut self, key: &str, old: i64, new: i64) -> Result<bool, ClientError> {
        use etcd_client::{Compare, CompareOp, Txn, TxnOp};
        let txn = Txn::new()
            .when(vec![Compare::value(key, CompareOp::Equal, old.to_string())])
            .and_then(vec![TxnOp::put(key, new.to_string(), None)]);
        let mut c = self.client.clone();
        let r = client::timed(self.t, "cas", async {
            c.txn(txn)
                .await
                .map_err(|e| client::etcd::classify("cas", e))
        })
        .await?;
        Ok(r.succeeded())
    }
}

/// A register on a ZooKeeper ensemble: one persistent node.
pub struct ZkRegister {
    client: zookeeper_client::Client,
    t: Duration,
    created: Option<String>,
}

impl ZkRegister {
    pub async fn connect(addrs: Vec<String>, t: Duration) -> Result<ZkRegister, String> {
        let connect = addrs.join(",");
        let fut = zookeeper_client::Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .with_connection_timeout(t)
            .connect(&connect);
        let client = tokio::time::timeout(t * 2, fut)
            .await
            .map_err(|_| format!("connect to {connect}: timed out"))?
            .map_err(|e| format!("connect to {connect}: {e}"))?;
        Ok(ZkRegister {
            client,
            t,
            created: None,
        })
    }

    fn path(key: &str) -> String {
        format!("/{}", key.replace('/', "%2F"))
    }

    /// Create the node holding `null` once (another worker may have first).
    async fn ensure(&mut self, key: &str) -> Result<String, ClientError> {
        let path = Self::path(key);
        if self.created.as_deref() == Some(path.as_str()) {
            return Ok(path);
        }
        let mode = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        let c = &self.client;
        let r = client::timed(self.t, "create", async {
            match c.create(&path, b"null", &mode).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => Ok(()),
                Err(e) => Err(client::zookeeper::classify("create", e)),
            }
        })
        .await;
        r?;
        self.created = Some(path.clone());
        Ok(path)
    }

    async fn get(&mut self, key: &str) -> Result<(Value, i32), ClientError> {
        let path = self.ensure(key).await?;
        let c = &self.client;
        let (data, stat) = client::timed(self.t, "get", async {
            c.get_data(&path)
                .await
                .map_err(|e| client::zookeeper::classify("get", e))
        })
        .await?;
        Ok((parse_value(Some(&data))?, stat.version))
    }

    async fn set(&mut self, key: &str, v: i64, version: Option<i32>) -> Result<bool, ClientError> {
        let path = self.ensure(key).await?;
        let c = &self.client;
        client::timed(self.t, "set", async {
            match c.set_data(&path, v.to_string().as_bytes(), version).await {
                Ok(_) => Ok(true),
                Err(zookeeper_client::Error::BadVersion) => Ok(false),
                Err(e) => Err(client::zookeeper::classify("set", e)),
            }
        })
        .await
    }
}

#[async_trait]
impl RegisterClient for ZkRegister {
    async fn read(&mut self, key: &str) -> Result<Value, ClientError> {
        self.get(key).await.map(|(v, _)| v)
    }

    async fn write(&mut self, key: &str, v: i64) -> Result<(), ClientError> {
        self.set(key, v, None).await.map(drop)
    }

    async fn cas(&mut self, key: &str, old: i64, new: i64) -> Result<bool, ClientError> {
        let (cur, version) = self.get(key).await?;
        if cur != old {
            return Ok(false);
        }
        self.set(key, new, Some(version)).await
    }
}
