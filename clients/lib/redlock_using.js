// The library side of the adapters for Redlock's `using()` (auto-extension):
// npm redlock 5.x (clients/node-redlock5) and its fork
// @sesamecare-oss/redlock (clients/node-sesamecare-redlock), over ioredis,
// on one Redis server (system `redis`) or independent nodes (`redlock`).
//
//   acquire -> redlock.using([key], ttl_ms, {retryCount, retryDelay 100,
//              retryJitter 50, automaticExtensionThreshold}, routine): the ok
//              is sent when the routine starts (the lock is held); the
//              routine then waits for lockjaw's release. wait_ms 0: one
//              attempt; otherwise as many retries as fit in wait_ms. The
//              owner is the lock's random value; lease_ms the PX sent.
//   extensions the library's own (a timer `automaticExtensionThreshold`
//              before the expiration it computed): each one that succeeds
//              is a `renewed` event timed from before its first attempt to
//              its answer; when the routine's signal aborts (the library
//              gave the lock up) a `lost` event. lockjaw's worker, like a
//              routine that does not poll `signal.aborted`, keeps working.
//   renew   -> fail: using() extends the lock by itself and offers no call
//              to extend it from the routine (Lock.extend would invalidate
//              the Lock object using() keeps).
//   release -> the routine returns; using() releases (release script on
//              every node).
//   probe   -> token-checked PTTL on every node; a quorum must hold it.
// No fencing token; the lease (PX ttl) starts at the acquire.
//
// redlock 5.0.0-beta.2 computes a lock's expiration from the time before
// its *first* attempt (issue 169): after retries that took longer than the
// ttl, the first extension finds the lock "already expired" and aborts,
// though the key (set by the last attempt) lives on for a whole ttl and is
// then lost while the routine works. The fork times it from the last
// attempt (PR 274).
'use strict';

const path = require('path');
const lib = require('./lockjaw_adapter.js');
const { Fail, log, send, nowNs } = lib;

const RETRY_DELAY = 100;

// `name`: the adapter; `pkg`: the npm package; `defaultVersion`: the
// version folder used without LOCKJAW_CLIENT_ENV; `exportOf(module)`: the
// package's Redlock class.
function main({ name, adapterDir, pkg, defaultVersion, exportOf }) {
  lib.named(name);
  let mod, Redis, versions;
  let loadError = null;
  try {
    const e = lib.environment(adapterDir, defaultVersion);
    const r = lib.load(e, pkg);
    mod = r.lib;
    const io = e.require('ioredis');
    Redis = io.default || io;
    // redlock's package.json says "v5.0.0-beta.2".
    versions = { redlock: r.version.replace(/^v/, ''), ioredis: e.require('ioredis/package.json').version };
    log(`${pkg} ${versions.redlock} with ioredis ${versions.ioredis} from ${e.source || e.env}`);
  } catch (err) {
    loadError = err.message;
  }

  let hello = null;
  let clients = null;
  const grants = new Map(); // owner -> { finish, done, aborted }

  function nodes() {
    if (!clients) {
      clients = hello.endpoints.map((_, i) => {
        const ep = lib.endpoint(hello, i);
        const c = new Redis(lib.ioredisOptions(hello, ep));
        c.on('error', (err) => log(`${ep}: ${err.message}`));
        return c;
      });
    }
    return clients;
  }

  // A Redlock per grant: its acquire and extend are wrapped to catch the
  // Lock using() holds and to time each extension; its `error` events are
  // this grant's client errors (a ResourceLockedError is a "held" vote).
  function redlockFor(key, ttl) {
    const Redlock = exportOf(mod);
    // Extensions and the release: one attempt each (redlock 5.0.0-beta.2
    // uses these settings for them; the fork, the acquire's).
    const rl = new Redlock(nodes(), { retryCount: 0, retryDelay: RETRY_DELAY, retryJitter: 50 });
    const state = { lock: null, errors: [] };
    rl.on('error', (err) => state.errors.push(err));
    const acquire = rl.acquire.bind(rl);
    rl.acquire = async (...a) => {
      state.lock = await acquire(...a);
      return state.lock;
    };
    const extend = rl.extend.bind(rl);
    rl.extend = async (existing, duration, settings) => {
      const sent = nowNs();
      const l = await extend(existing, duration, settings);
      const done = nowNs();
      send({ type: 'renewed', key, owner: l.value, lease_ms: duration, sent_ns: sent, done_ns: done });
      return l;
    };
    return { rl, state };
  }

  // Only "held" votes (no client error): certainly not applied.
  function refused(err, state, what) {
    const other = state.errors.filter((e) => e.name !== 'ResourceLockedError');
    if (other.length === 0 && err && err.name === 'ExecutionError') return new Fail(what);
    return new Error(`${err && err.message}${other.length ? ` (${other.map((e) => e.message).join('; ')})` : ''}`);
  }

  async function acquire(q) {
    const ttl = q.ttl_ms;
    const { rl, state } = redlockFor(q.key, ttl);
    const settings = {
      retryCount: q.wait_ms > 0 ? Math.max(1, Math.floor(q.wait_ms / RETRY_DELAY)) : 0,
      retryDelay: RETRY_DELAY,
      retryJitter: 50,
      // The library's default (500 ms) where the ttl allows it.
      automaticExtensionThreshold: Math.min(500, Math.floor(ttl / 2)),
    };
    return new Promise((granted, refuse) => {
      let started = false;
      const g = {};
      g.done = rl
        .using([q.key], ttl, settings, (signal, context) => {
          started = true;
          // The fork hands the routine its Lock; redlock 5 does not.
          const lock = (context && context.lock) || state.lock;
          if (!lock) {
            refuse(new Error(`${pkg}'s using() did not acquire through Redlock#acquire: no lock value to report`));
            return Promise.resolve();
          }
          const owner = lock.value;
          signal.addEventListener('abort', () => {
            const why = signal.error ? signal.error.message : 'aborted';
            log(`lost ${owner}: ${why}`);
            send({ type: 'lost', key: q.key, owner, reason: `using() aborted: ${why}` });
          });
          grants.set(owner, g);
          granted({ owner, lease_ms: ttl });
          // The routine: until lockjaw releases.
          return new Promise((finish) => {
            g.finish = finish;
          });
        })
        .then(
          () => ({ ok: true }),
          (err) => ({ ok: false, err, state })
        );
      g.done.then((r) => {
        if (!started) refuse(refused(r.err, state, 'held'));
      });
    });
  }

  function held(q) {
    const g = grants.get(q.owner);
    if (!g) throw new Fail('unknown owner');
    return g;
  }

  async function release(q) {
    const g = held(q);
    grants.delete(q.owner);
    g.finish();
    const r = await g.done;
    if (!r.ok) throw refused(r.err, r.state, 'not held');
    return {};
  }

  async function renew(q) {
    held(q);
    throw new Fail('using() extends the lock by itself: no extend call for the routine');
  }

  // One token-checked PTTL per node. lease_ms: the largest L that a quorum
  // of nodes answered at least.
  async function probe(q) {
    held(q);
    const cs = nodes();
    const quorum = Math.floor(cs.length / 2) + 1;
    const answers = await Promise.all(
      cs.map((c) =>
        c.eval(lib.PROBE, 1, q.key, q.owner).then(
          (n) => ({ n: Number(n) }),
          (err) => ({ err: err.message })
        )
      )
    );
    const ms = answers.filter((a) => a.n > 0).map((a) => a.n);
    ms.sort((a, b) => b - a);
    if (ms.length >= quorum) return { lease_ms: ms[quorum - 1] };
    const errors = answers.filter((a) => a.err !== undefined).map((a) => a.err);
    if (ms.length + errors.length >= quorum) throw new Error(`no quorum of answers: ${errors.join('; ')}`);
    throw new Fail(`held on ${ms.length} of ${cs.length} nodes`);
  }

  lib.serve(
    name,
    (h) => {
      hello = h;
      if (loadError) {
        return {
          unsupported: `cannot load ${pkg}/ioredis (${loadError}): run scripts/install-deps.sh, or clients/lib/build-env ${path.join(adapterDir, 'versions', defaultVersion)}`,
        };
      }
      if (!['redis', 'redlock'].includes(h.system)) {
        return { unsupported: `${name} speaks to one Redis server or independent nodes: systems redis and redlock` };
      }
      if (h.ttl_ms < 200) {
        return { unsupported: `using() needs a ttl of at least 200 ms (the extension threshold plus 100 ms); got ${h.ttl_ms}` };
      }
      // auth: the ACL user and TLS, through lib.ioredisOptions.
      return { library: pkg, version: versions.redlock, fence: false, lease: 'acquire', renewals: 'all', auth: true };
    },
    { acquire, renew, release, probe }
  );
}

module.exports = { main };
