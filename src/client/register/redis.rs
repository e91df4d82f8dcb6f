//! Redis register (single server, or the Sentinel-named primary): `GET`,
//! `SET`, and compare-and-set as one Lua script (`GET` = old → `SET` new),
//! atomic on the server. Values are decimal strings under the key as given.

use super::{parse, read_error, RegisterClient};
use crate::client::redis::classify;
use crate::client::redis_target::RedisTarget;
use crate::client::{timed, ClientConfig, ClientError};
use async_trait::async_trait;

const CAS: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
return 0";

pub struct RedisRegister {
    target: RedisTarget,
    cas: redis::Script,
}

impl RedisRegister {
    /// On the first endpoint, a plain Redis server.
    pub async fn connect(cfg: &ClientConfig) -> Result<RedisRegister, ClientError> {
        RedisRegister::on(RedisTarget::fixed(cfg)).await
    }

    /// On the primary the sentinels in `cfg.endpoints` name.
    pub async fn connect_sentinel(cfg: &ClientConfig) -> Result<RedisRegister, ClientError> {
        RedisRegister::on(RedisTarget::sentinel(cfg)).await
    }

    async fn on(mut target: RedisTarget) -> Result<RedisRegister, ClientError> {
        target.conn().await?;
        Ok(RedisRegister {
            target,
            cas: redis::Script::new(CAS),
        })
    }

    /// The announced address of the server in use (the primary, for Sentinel).
    pub fn server(&self) -> Option<&str> {
        self.target.server()
    }
}

#[async_trait]
impl RegisterClient for RedisRegister {
    async fn read(&mut self, key: &str) -> Result<Option<i64>, ClientError> {
        let t = self.target.op_timeout();
        let r = async {
            let c = self.target.conn().await?;
            timed(t, "GET", async {
                let v: Option<Vec<u8>> = redis::cmd("GET")
                    .arg(key)
                    .query_async(c)
                    .await
                    .map_err(|e| classify("GET", e))?;
                v.map(|raw| parse(key, &raw)).transpose()
            })
            .await
        }
        .await;
        self.target.check(r).map_err(read_error)
    }

    async fn write(&mut self, key: &str, value: i64) -> Result<(), ClientError> {
        let t = self.target.op_timeout();
        let r = async {
            let c = self.target.conn().await?;
            timed(t, "SET", async {
                redis::cmd("SET")
                    .arg(key)
                    .arg(value)
                    .query_async::<()>(c)
                    .await
                    .map_err(|e| classify("SET", e))
            })
            .await
        }
        .await;
        self.target.check(r)
    }

    async fn cas(&mut self, key: &str, old: i64, new: i64) -> Result<bool, ClientError> {
        let t = self.target.op_timeout();
        let mut inv = self.cas.key(key);
        inv.arg(old).arg(new);
        let r = async {
            let c = self.target.conn().await?;
            timed(t, "cas", async {
                inv.invoke_async::<i64>(c)
                    .await
                    .map_err(|e| classify("cas", e))
            })
            .await
        }
        .await;
        self.target.check(r).map(|n| n == 1)
    }
}
