// The protocol side shared by lockjaw's Node adapters (protocol 1, see
// docs/adapters.md): load the library from the pinned environment lockjaw
// names (LOCKJAW_CLIENT_ENV, LOCKJAW_CLIENT_SOURCE), read the hello, answer
// it, then answer each request line exactly once. An adapter supplies the
// library side: one async function per request type, returning the reply's
// fields, or throwing Fail (certainly not applied) or anything else (info:
// may have been applied). Only protocol lines go to stdout; logs go to
// stderr.
'use strict';

const Module = require('module');
const path = require('path');
const readline = require('readline');

class Fail extends Error {}

let tag = 'adapter';

function log(...args) {
  process.stderr.write(`${tag}: ${args.join(' ')}\n`);
}

// Name the adapter in its log lines (stderr goes to the worker's log).
function named(name) {
  tag = name;
}

function send(m) {
  process.stdout.write(JSON.stringify(m) + '\n');
}

// CLOCK_MONOTONIC in ns (what `renewed` events carry).
function nowNs() {
  return Number(process.hrtime.bigint());
}

// The library's environment: `require` for its modules and the version
// lockjaw asked for (null: the adapter's default). LOCKJAW_CLIENT_ENV is a
// version folder with node_modules (clients/lib/build-env builds it);
// LOCKJAW_CLIENT_SOURCE a library's source tree, searched first (its own
// node_modules, then the environment's).
function environment(adapterDir, defaultVersion) {
  const version = process.env.LOCKJAW_CLIENT_VERSION || null;
  const env = process.env.LOCKJAW_CLIENT_ENV || path.join(adapterDir, 'versions', defaultVersion);
  const modules = path.join(env, 'node_modules');
  const source = process.env.LOCKJAW_CLIENT_SOURCE || null;
  // NODE_PATH is where a module found nowhere else is looked up: the
  // source tree's own `require('ioredis')` then finds the environment's.
  process.env.NODE_PATH = [modules, process.env.NODE_PATH].filter(Boolean).join(path.delimiter);
  Module._initPaths();
  const base = source ? path.join(source, 'package.json') : path.join(env, 'package.json');
  const req = Module.createRequire(base);
  return { version, env, source, require: req };
}

// The library's package name resolved in the environment, or the source
// tree itself when it is that package.
function load(e, name) {
  if (e.source) {
    try {
      const pkg = require(path.join(e.source, 'package.json'));
      if (pkg.name === name) return { lib: require(e.source), version: pkg.version };
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND') throw err;
    }
  }
  return { lib: e.require(name), version: packageOf(e.require.resolve(name), name).version };
}

// The package.json of package `name` above its resolved entry point (read
// from the file: a package's `exports` may hide it from require).
function packageOf(entry, name) {
  for (let d = path.dirname(entry); d !== path.dirname(d); d = path.dirname(d)) {
    try {
      const pkg = JSON.parse(require('fs').readFileSync(path.join(d, 'package.json'), 'utf8'));
      if (pkg.name === name) return pkg;
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
  }
  throw new Error(`no package.json of ${name} above ${entry}`);
}

function hostPort(addr) {
  const i = addr.lastIndexOf(':');
  return { host: addr.slice(0, i), port: Number(addr.slice(i + 1)) };
}

// ioredis options for the hello's `auth` (lockjaw's --auth, docs/adapters.md
// "The handshake"): the ACL user, and TLS that trusts the file's CA, presents
// its client certificate and verifies `server_name` (Node checks the
// certificate against `servername`, not the proxy address dialled). {}
// without --auth. The password is a secret: never log these options.
function ioredisAuth(hello) {
  const a = hello.auth || {};
  const o = {};
  if (a.user) {
    o.username = a.user.name;
    // No password in the handshake before a run (lockjaw only asks there).
    if (a.user.password !== undefined) o.password = a.user.password;
  }
  if (a.tls) {
    const fs = require('fs');
    o.tls = { ca: fs.readFileSync(a.tls.ca), servername: a.tls.server_name };
    if (a.tls.cert) {
      o.tls.cert = fs.readFileSync(a.tls.cert);
      o.tls.key = fs.readFileSync(a.tls.key);
    }
  }
  return o;
}

// ioredis options for one server through the worker's proxy: timeouts below
// lockjaw's op timeout, one send per command (a command on a dropped
// connection fails rather than being resent), connect on the first command.
function ioredisOptions(hello, ep) {
  const t = Math.max(5, Math.floor(hello.op_timeout_ms / 2));
  return {
    ...hostPort(ep),
    connectTimeout: t,
    commandTimeout: t,
    maxRetriesPerRequest: 0,
    enableReadyCheck: false,
    lazyConnect: true,
    retryStrategy: (times) => Math.min(times * 20, t),
    ...ioredisAuth(hello),
  };
}

// The endpoint to dial: the hello's, through the worker's proxy.
function endpoint(hello, i) {
  const given = hello.endpoints[i];
  return (hello.dial && hello.dial[given]) || given;
}

// Token-checked PTTL: the key's remaining ms if it holds our token, else -2.
const PROBE = "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('pttl',KEYS[1]) end return -2";

// Serve the protocol. `onHello(hello)` returns the hello_ok fields or
// {unsupported: reason}; `handlers` maps request types to async functions
// (request -> reply fields). Requests run concurrently, each answered once.
function serve(name, onHello, handlers) {
  tag = name;
  // A library's own timer callbacks (a background refresh that timed out)
  // may reject with nobody to catch it: logged, never fatal.
  process.on('unhandledRejection', (e) => log(`unhandled: ${e && e.stack ? e.stack : e}`));
  let hello = null;
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  rl.on('line', (line) => {
    if (hello === null) {
      try {
        hello = JSON.parse(line);
      } catch (e) {
        log(`bad hello: ${e.message}`);
        process.exit(2);
      }
      if (hello.type !== 'hello' || hello.protocol !== 1) {
        send({ type: 'unsupported', reason: `${name} speaks protocol 1, got ${JSON.stringify(hello.protocol)}` });
        process.exit(0);
      }
      const a = onHello(hello);
      if (a.unsupported) {
        send({ type: 'unsupported', reason: a.unsupported });
        process.exit(0);
      }
      send({ type: 'hello_ok', ...a });
      return;
    }
    const q = JSON.parse(line);
    const h = handlers[q.type];
    const r = h ? h(q) : Promise.reject(new Fail(`unknown request type ${q.type}`));
    r.then(
      (fields) => send({ id: q.id, type: 'ok', ...fields }),
      (e) => send({ id: q.id, type: e instanceof Fail ? 'fail' : 'info', error: String(e && e.message) })
    );
  });
  // lockjaw closed stdin: exit at once, releasing nothing.
  rl.on('close', () => process.exit(0));
}

module.exports = {
  Fail, log, named, send, nowNs, environment, load, ioredisAuth, ioredisOptions, endpoint, PROBE, serve,
};
