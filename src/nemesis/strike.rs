//! `strike-command`: match a worker's next Redis or ZooKeeper request by
//! content in its proxy (the embedded Toxiproxy's `match_next` toxic, a
//! lockjaw extension) and act on it. Needs no announcement, so it strikes the
//! requests a library makes on its own (a second command of a non-atomic
//! acquire or release, a background refresh), with `--client` adapters as
//! with the built-in client.
//!
//! ```toml
//! name = "crash-after-setnx"
//! fault = "strike-command"
//! strike = { command = "SETNX", action = "crash-after", window_ms = 5000 }
//! ```
//!
//! Actions: `hold` (for `hold_ms`, or with `until = "grant"` until another
//! worker reports a grant, at most the fault's length), `reset-before`
//! (the connection is reset before the request is forwarded: not applied),
//! `reset-after` (reset when its reply arrives: applied, reply lost), and
//! `crash-after`: once the request's reply is on its way to the client,
//! every later upstream byte of that proxy is held; the worker's process
//! group is SIGKILLed (and waited for), then its connections are cut, and
//! nothing it sent after the reply reaches the server. The worker is
//! started again after the fault's length.
//!
//! With `target = "holder"`, `"waiter"` or `"renewer"` the matcher is
//! armed on that one worker's links only ([`super::aim`] picks it; the
//! start record's `aimed` names it), and matches that worker's next
//! request; the default, `all-clients`, arms it on every worker's links.
//!
//! On ZooKeeper links `command` names ZooKeeper operations as the proxy
//! frames them (`create`, `delete`, `getChildren2`, ...; `script` and
//! `sha1` are Redis only).
//!
//! The stop record carries the matched command (`struck`), the link
//! (`proxy`, `slot`) and the moment (`struck_ns`, run clock, within 2 ms of
//! the match); a matcher that matched nothing within `window_ms` did not
//! land.

use super::{aim, Ctx, Fault, Nemesis, NemesisError};
use crate::toxiproxy::{
    command_flaw, MatchAction, Stream, Toxic, ToxicKind, COMMAND_HINT, ZOOKEEPER_OPS,
};
use crate::workload::step::Phase;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::broadcast;

/// The `strike` table of a `strike-command` nemesis file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrikeSpec {
    /// The command name (`SETNX`, `DEL`, `EVALSHA`), any case.
    pub command: Option<String>,
    /// A substring of the script of an `EVAL`/`EVALSHA`.
    pub script: Option<String>,
    /// The SHA1 of an `EVALSHA`'s script.
    pub sha1: Option<String>,
    #[serde(default)]
    pub action: StrikeAction,
    /// `hold`: how long (without it and `until`, until the fault's length).
    pub hold_ms: Option<u64>,
    /// `hold`: `"grant"` holds until another worker reports a grant.
    pub until: Option<Until>,
    /// How long an armed matcher waits for its request (default 10 s).
    pub window_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StrikeAction {
    #[default]
    Hold,
    ResetBefore,
    ResetAfter,
    CrashAfter,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Until {
    Grant,
}

impl StrikeSpec {
    /// Check the table: (field, message, hint) as the registry wants.
    pub fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        if self.command.is_none() && self.script.is_none() && self.sha1.is_none() {
            return Err((
                "strike",
                "names no request to match".into(),
                "give `command`, `script` or `sha1`, e.g. strike = { command = \"DEL\" }",
            ));
        }
        if let Some(why) = self.command.as_deref().and_then(command_flaw) {
            return Err(("strike.command", why, COMMAND_HINT));
        }
        if self.script.as_deref() == Some("") {
            return Err((
                "strike.script",
                "script \"\" is empty: give a part of the script to match".into(),
                "e.g. script = \"'del'\", or leave script out to match by command alone",
            ));
        }
        if let Some(h) = &self.sha1 {
            if h.len() != 40 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err((
                    "strike.sha1",
                    format!("sha1 {h:?} is not 40 hex digits, so it matches no script"),
                    "give the SHA1 of the script, as EVALSHA sends it",
                ));
            }
        }
        if self.action != StrikeAction::Hold && (self.hold_ms.is_some() || self.until.is_some()) {
            return Err((
                "strike",
                "hold_ms and until belong to action \"hold\"".into(),
                "drop them, or use action = \"hold\"",
            ));
        }
        if self.hold_ms.is_some() && self.until.is_some() {
            return Err((
                "strike",
                "both hold_ms and until are set".into(),
                "keep one of them",
            ));
        }
        if self.hold_ms.is_some_and(|h| h == 0 || h > 86_400_000)
            || self.window_ms.is_some_and(|w| w == 0 || w > 86_400_000)
        {
            return Err((
                "strike",
                "hold_ms and window_ms must be from 1 ms to a day".into(),
                "e.g. window_ms = 5000",
            ));
        }
        Ok(())
    }

    fn toxic(&self, hold: Duration) -> Toxic {
        let action = match self.action {
            StrikeAction::Hold => MatchAction::Hold,
            StrikeAction::ResetBefore => MatchAction::ResetBefore,
            StrikeAction::ResetAfter => MatchAction::ResetAfter,
            StrikeAction::CrashAfter => MatchAction::FreezeAfterReply,
        };
        let kind = ToxicKind::MatchNext {
            action,
            hold: if self.until.is_some() {
                0
            } else {
                hold.as_millis() as i64
            },
            window: self.window_ms.unwrap_or(10_000) as i64,
        };
        let mut t = Toxic::new("", Stream::Upstream, kind);
        for (k, v) in [
            ("command", &self.command),
            ("script", &self.script),
            ("sha1", &self.sha1),
        ] {
            if let Some(v) = v {
                t.attributes.insert(k.into(), json!(v));
            }
        }
        t
    }
}

/// On ZooKeeper links a `strike` names operations as the proxy frames
/// them (`create`, `delete`, `getChildren2`: the case matters here);
/// `script` and `sha1` match Redis scripts only. The error names the field
/// and lists the operations.
pub fn zookeeper_ops(n: &super::NemesisSpec) -> Result<(), String> {
    let Some(s) = &n.strike else {
        return Ok(());
    };
    if s.script.is_some() || s.sha1.is_some() {
        return Err(format!(
            "strike.script and strike.sha1 (nemesis {}) match Redis scripts, and ZooKeeper requests carry none (hint: match the operation, e.g. strike = {{ command = \"delete\" }})",
            n.name
        ));
    }
    // Pings pass under every one-shot: never matched.
    let known: Vec<&str> = ZOOKEEPER_OPS
        .iter()
        .map(|(_, name)| *name)
        .filter(|name| *name != "ping")
        .collect();
    for alt in s.command.as_deref().unwrap_or_default().split('|') {
        if !known.contains(&alt) {
            return Err(format!(
                "strike.command (nemesis {}): {alt:?} is no ZooKeeper operation, so it matches no request on these links (hint: use the operation names as the proxy frames them: {})",
                n.name,
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// Whether a lock-taking command's reply says it took the key: `SETNX`
/// answered 1, `SET ... NX` answered OK.
fn took_key(command: &str, reply: &str) -> Option<bool> {
    match command {
        "SETNX" => Some(reply == ":1"),
        "SET" => Some(reply == "+OK"),
        _ => None,
    }
}

/// The nemesis.
pub struct Strike {
    spec: StrikeSpec,
    events: Option<broadcast::Receiver<super::WorkerEvent>>,
}

impl Strike {
    pub fn new(spec: StrikeSpec) -> Strike {
        Strike { spec, events: None }
    }

    /// Wait until one toxic fired (at most `limit`): its index.
    async fn first_fired(
        &self,
        ctx: &mut Ctx,
        armed: &[(usize, String, String)],
        limit: Duration,
    ) -> Option<usize> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            for (i, (_, p, n)) in armed.iter().enumerate() {
                if ctx.toxic_fired(p, n).await {
                    return Some(i);
                }
            }
            if tokio::time::Instant::now() >= deadline || !ctx.sleep(Duration::from_millis(2)).await
            {
                return None;
            }
        }
    }

    /// Wait (at most `limit`) until the matched request's reply is on its
    /// way and the proxy holds everything after it.
    async fn wait_frozen(&self, ctx: &mut Ctx, proxy: &str, name: &str, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let frozen = ctx
                .toxiproxy
                .toxic(proxy, name)
                .await
                .ok()
                .and_then(|t| t.attributes.get("frozen").and_then(Value::as_i64))
                == Some(1);
            if frozen {
                return true;
            }
            if tokio::time::Instant::now() >= deadline || !ctx.sleep(Duration::from_millis(1)).await
            {
                return false;
            }
        }
    }

    /// `crash-after`: once the matched request's reply went on (the proxy
    /// holds every later upstream byte), SIGKILL the worker's process
    /// group and wait for it, then cut its connections (what the proxy
    /// held is dropped) and take the toxic back. Where the reply says the
    /// request took the key, the start record names the process
    /// (`crashed_process`): the checker's stuck-lock figure counts from
    /// this moment, with the ttl as the lease.
    async fn crash(
        &mut self,
        ctx: &mut Ctx,
        state: &mut Value,
        target: &mut Value,
        undo: &mut Vec<u64>,
    ) -> Result<(), NemesisError> {
        let slot = state["slot"].as_u64().unwrap_or(0) as usize;
        let proxy = state["proxy"].as_str().unwrap_or_default().to_string();
        let toxic = state["toxic"].as_str().unwrap_or_default().to_string();
        let frozen = self
            .wait_frozen(ctx, &proxy, &toxic, ctx.ttl + Duration::from_secs(1))
            .await;
        state["reply_passed"] = json!(frozen);
        let reply = ctx
            .toxiproxy
            .toxic(&proxy, &toxic)
            .await
            .ok()
            .and_then(|t| {
                t.attributes
                    .get("reply")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        state["reply"] = json!(reply);
        let last = ctx.workers.view(slot).last;
        let process = last.as_ref().map(|s| s.process);
        let key = last.and_then(|s| s.key);
        let struck = state["struck"].as_str().unwrap_or_default().to_string();
        // A lock-taking command that did not take the key (the lock was
        // held): no crash worth making; the toxic goes, what it held is
        // delivered in order, and the injection did not land.
        let took = reply.as_deref().and_then(|r| took_key(&struck, r));
        state["took_key"] = json!(took);
        if took == Some(false) || !frozen {
            ctx.revert(self.name(), undo).await?;
            undo.clear();
            state["killed"] = json!(false);
            return Ok(());
        }
        let killed = ctx.workers.kill(slot).await.is_ok();
        state["killed"] = json!(killed);
        // Cut before removing the toxic: what it holds is dropped.
        for p in ctx.links.node_proxies(slot) {
            let _ = ctx.toxiproxy.cut_connections(&p).await;
        }
        ctx.revert(self.name(), undo).await?;
        undo.clear();
        if let (true, Some(p), Some(true)) = (killed, process, took) {
            target["crashed_process"] = json!(p);
            target["lease_ms"] = json!(ctx.ttl.as_millis() as u64);
            target["key"] = json!(key);
        }
        target["slot"] = state["slot"].clone();
        Ok(())
    }

    /// Add a matcher to the proxies of the workers of `slots` and wait (at
    /// most `limit`) for the first to fire; the others are taken back at
    /// once (one strike per fault). Returns the state and the undo ids
    /// left.
    async fn arm_and_wait(
        &mut self,
        ctx: &mut Ctx,
        slots: &[usize],
        length: Duration,
        limit: Duration,
    ) -> Result<(Value, Vec<u64>), NemesisError> {
        let hold = self.spec.hold_ms.map_or(length, Duration::from_millis);
        let (mut undo, mut armed) = (Vec::new(), Vec::new());
        for &slot in slots {
            for p in ctx.links.node_proxies(slot) {
                match ctx
                    .add_named_toxic(self.name(), &p, self.spec.toxic(hold))
                    .await
                {
                    Ok((id, name)) => {
                        undo.push(id);
                        armed.push((slot, p, name));
                    }
                    Err(e) => {
                        let _ = ctx.revert(self.name(), &undo).await;
                        return Err(e);
                    }
                }
            }
        }
        let Some(i) = self
            .first_fired(ctx, &armed, limit + Duration::from_millis(5))
            .await
        else {
            return Ok((json!({ "fired": false }), undo));
        };
        let (slot, proxy, name) = armed[i].clone();
        let others: Vec<u64> = (0..undo.len())
            .filter(|j| *j != i)
            .map(|j| undo[j])
            .collect();
        ctx.revert(self.name(), &others).await?;
        let state = json!({
            "fired": true,
            "slot": slot,
            "proxy": proxy,
            "toxic": name,
            "struck": ctx.toxic_struck(&proxy, &name).await,
            "struck_ns": ctx.clock.now(),
        });
        Ok((state, vec![undo[i]]))
    }

    /// A grant reported by a worker other than `slot` after `after` (run
    /// clock), at most `limit`.
    async fn wait_grant(&mut self, slot: usize, after: u64, limit: Duration) -> Option<Value> {
        let rx = self.events.as_mut()?;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Err(_) | Ok(Err(broadcast::error::RecvError::Closed)) => return None,
                Ok(Err(_)) => {}
                Ok(Ok(ev))
                    if ev.slot != slot
                        && ev.state.phase == Phase::Granted
                        && ev.state.time > after =>
                {
                    return Some(
                        json!({"slot": ev.slot, "process": ev.state.process, "granted_ns": ev.state.time}),
                    )
                }
                Ok(Ok(_)) => {}
            }
        }
    }
}

#[async_trait]
impl Nemesis for Strike {
    fn name(&self) -> &'static str {
        "strike-command"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        self.events = Some(ctx.workers.subscribe());
        let length = ctx.spec.duration(ctx.ttl);
        let mut target = json!({ "strike": self.spec, "length_ms": length.as_millis() as u64 });
        // One worker's links for a worker target, else every worker's.
        let slots: Vec<usize> = if aim::is_worker_target(ctx.spec.target) {
            let Some(a) = aim::next_worker(ctx, self.name()).await? else {
                return Ok(None);
            };
            target["aimed"] = a.json();
            vec![a.ev.slot]
        } else {
            (0..ctx.workers.slots()).collect()
        };
        let invoked_at = ctx.clock.now();
        let window = Duration::from_millis(self.spec.window_ms.unwrap_or(10_000));
        let deadline = tokio::time::Instant::now() + window;
        let mut tries = 0u32;
        loop {
            tries += 1;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let (mut state, mut undo) = self.arm_and_wait(ctx, &slots, length, left).await?;
            state["tries"] = json!(tries);
            if self.spec.action != StrikeAction::CrashAfter || state["fired"] != json!(true) {
                return Ok(Some(Fault {
                    invoked_at,
                    undo,
                    hold: Duration::ZERO,
                    target,
                    state,
                }));
            }
            self.crash(ctx, &mut state, &mut target, &mut undo).await?;
            // A lock-taking request that found the lock held: match the
            // next one, within the window.
            let again = state["took_key"] == json!(false)
                && tokio::time::Instant::now() < deadline
                && !ctx.is_stopping();
            if !again {
                let at = ctx.clock.now();
                return Ok(Some(Fault {
                    invoked_at: at,
                    undo,
                    hold: Duration::ZERO,
                    target,
                    state,
                }));
            }
        }
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let mut out = fault.state.clone();
        if fault.state["fired"] != json!(true) {
            ctx.revert(self.name(), &fault.undo).await?;
            out["landed_inside"] = json!(false);
            return Ok(out);
        }
        let slot = fault.state["slot"].as_u64().unwrap_or(0) as usize;
        let proxy = fault.state["proxy"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let toxic = fault.state["toxic"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let length = Duration::from_millis(fault.target["length_ms"].as_u64().unwrap_or(0));
        let landed = match self.spec.action {
            StrikeAction::Hold => {
                if self.spec.until.is_some() {
                    let after = fault.state["struck_ns"].as_u64().unwrap_or(0);
                    let g = self.wait_grant(slot, after, length).await;
                    out["regranted"] = g.clone().unwrap_or(Value::Null);
                    ctx.revert(self.name(), &fault.undo).await?;
                    g.is_some()
                } else {
                    let hold = self.spec.hold_ms.map_or(length, Duration::from_millis);
                    ctx.sleep(hold + Duration::from_millis(50)).await;
                    ctx.revert(self.name(), &fault.undo).await?;
                    true
                }
            }
            StrikeAction::ResetBefore | StrikeAction::ResetAfter => {
                // reset-after strikes when the reply arrives: give it time.
                ctx.sleep(Duration::from_millis(200)).await;
                ctx.revert(self.name(), &fault.undo).await?;
                true
            }
            StrikeAction::CrashAfter => {
                let _ = (&proxy, &toxic);
                let killed = fault.state["killed"] == json!(true);
                if killed && ctx.sleep(length).await {
                    let r = ctx.workers.respawn(slot).await;
                    out["respawned"] = json!(r.is_ok());
                }
                killed
            }
        };
        out["landed_inside"] = json!(landed);
        Ok(out)
    }
}

#[cfg(test)]
#[path = "strike_tests.rs"]
mod tests;
