# lockjaw adapter (protocol 1, docs/adapters.md) for pottery's Redlock, on
# independent Redis nodes (system redlock). Run by ./adapter in the venv.
#   ttl     -> Redlock(auto_release_time=seconds); the PX it sends is ttl_ms
#   wait    -> acquire(timeout=seconds) (0: one non-blocking attempt)
#   owner   -> the grant's token (the value Redlock writes on each node)
#   renew   -> extend() (pottery allows 3 extensions per grant by default)
#   release -> release(); ReleaseUnlockedLock is "not held"
#   probe   -> PTTL of the key on every node that still holds our token;
#              lease_ms = the largest L that a majority of nodes exceed
# No fencing token; the lease starts at the acquire; no background renewals.
# Old releases (versions/0.42, 0.43: docs/adapters.md "Library versions")
# count auto_release_time in milliseconds, name the token _value (a float),
# return False from extend() rather than raising, and run on redis-py 2.10.
import itertools
import os
from concurrent.futures import ThreadPoolExecutor
import sys
import threading
from importlib.metadata import version

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "lib"))
import redis  # noqa: E402
from pottery import Redlock, ReleaseUnlockedLock, TooManyExtensions  # noqa: E402
try:
    from pottery import ExtendUnlockedLock  # noqa: E402
except ImportError:  # pottery < 1: extend() returns False instead
    class ExtendUnlockedLock(Exception):
        pass
from lockjaw_adapter import Adapter, Fail, Info, secs  # noqa: E402

PROBE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pttl', KEYS[1]) end
return -3
"""

a = Adapter()
h = a.hello
if h["system"] != "redlock":
    a.unsupported("pottery's Redlock needs independent Redis nodes (system redlock)")

# Lost replies per request: pottery logs a node's error and goes on, so each
# node's client counts them here, under the request that sent the command
# (a straggler from an earlier request counts under that one).
request = itertools.count()
current = [next(request)]
errors = {}
granted = {}  # per request: nodes that answered OK to its SET NX
errors_lock = threading.Lock()


class CountingRedis(redis.Redis):
    def execute_command(self, *args, **options):
        op = current[0]
        try:
            reply = super().execute_command(*args, **options)
            if reply and str(args[0]).upper() == "SET":
                with errors_lock:
                    granted[op] = granted.get(op, 0) + 1
            return reply
        except (redis.ConnectionError, redis.TimeoutError):
            # No reply: the command may have been applied. (An error reply,
            # e.g. NOSCRIPT before pottery loads its script, was not.)
            with errors_lock:
                errors[op] = errors.get(op, 0) + 1
            raise


def new_request():
    current[0] = next(request)
    with errors_lock:
        errors.clear()
        granted.clear()


def node_errors():
    with errors_lock:
        return errors.get(current[0], 0)


# pottery before 1.0 counts auto_release_time in ms (AUTO_RELEASE_TIME = 10000).
UNIT_MS = getattr(Redlock, "AUTO_RELEASE_TIME", 0) >= 1000
try:
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    no_retry = {"retry": Retry(NoBackoff(), 0)}
except ImportError:  # redis-py 2.10 retries nothing by itself
    no_retry = {}


def release_time(ttl_ms):
    return ttl_ms if UNIT_MS else secs(ttl_ms)


def lease_ms(lock):
    """The PX pottery sent each node (ttl_ms)."""
    return int(lock.auto_release_time if UNIT_MS else lock.auto_release_time * 1000)


def token(lock):
    """The value Redlock wrote on each node, as Redis stores it."""
    if hasattr(lock, "_uuid"):
        return lock._uuid  # pottery has no public name for it
    return repr(lock._value)  # pottery < 1: a float, sent as its repr


t = a.timeout_s
masters = []
# --auth: the ACL user on every node, and TLS verifying server_name.
user = a.redis_user_kwargs(redis)
for e in a.endpoints():
    host, port = e.rsplit(":", 1)
    # redis-py 8 retries a lost connection 3 times with backoff by default,
    # which alone outlasts lockjaw's op timeout: one try, bounded by t.
    opts = dict(socket_timeout=t, socket_connect_timeout=t, **no_retry, **user)
    tls = a.redis_pool(redis, host, int(port), **opts)
    if tls:
        masters.append(CountingRedis(connection_pool=tls))
    else:
        masters.append(CountingRedis(host=host, port=int(port), **opts))
majority = len(masters) // 2 + 1
probe_scripts = [(m, m.register_script(PROBE)) for m in masters]
pool = ThreadPoolExecutor(max_workers=len(masters))

# What pottery documents: its Redlock implements the Redlock algorithm,
# which counts a grant only while the validity (the lease less the time
# the acquire took) is left, and releases with a script that deletes the
# key only while it holds its own value. It does not renew by itself.
a.hello_ok("pottery", version("pottery"), fence=False, lease="acquire", renewals="none",
           auth=True, promises={"own_token_release": True, "validity_check": True,
                     "renews_itself": False})


def undecided(what):
    """A failure with node errors may have been applied on those nodes."""
    if node_errors():
        raise Info("%s failed with %d node errors" % (what, node_errors()))


def acquire(q):
    new_request()
    lock = Redlock(key=q["key"], masters=masters, auto_release_time=release_time(q["ttl_ms"]))
    wait = q.get("wait_ms", 0)
    if wait > 0:
        got = lock.acquire(timeout=secs(wait))
    else:
        got = lock.acquire(blocking=False)
    if not got:
        undecided("acquire")
        with errors_lock:
            nodes = granted.get(current[0], 0)
        if nodes >= majority:
            # A majority set the key, and pottery refused it anyway: its
            # validity (the lease less the time the acquire took) ran out.
            raise Fail("validity ran out: %d of %d nodes granted" % (nodes, len(masters)))
        raise Fail("held")
    owner = token(lock)
    a.grants[owner] = lock
    return {"owner": owner, "lease_ms": lease_ms(lock)}


def renew(q):
    lock = a.grant(q["owner"])
    new_request()
    try:
        extended = lock.extend()
    except TooManyExtensions:
        raise Fail("too many extensions (pottery's num_extensions)")
    except ExtendUnlockedLock:
        extended = False
    if extended is False:  # pottery < 1 answers False; newer ones raise
        undecided("extend")
        raise Fail("not held")
    return {"lease_ms": lease_ms(lock)}


def release(q):
    lock = a.grant(q["owner"])
    del a.grants[q["owner"]]
    new_request()
    try:
        lock.release()
    except ReleaseUnlockedLock:
        undecided("release")
        raise Fail("not held")


def probe(q):
    lock = a.grant(q["owner"])
    new_request()
    def pttl(node):
        m, script = node
        try:
            return script(keys=[lock.key], args=[q["owner"]], client=m)
        except (redis.ConnectionError, redis.TimeoutError):
            return None

    answers = list(pool.map(pttl, probe_scripts))  # all nodes at once
    ttls = [x for x in answers if x is not None]
    failed = len(answers) - len(ttls)
    held = sorted((x for x in ttls if x > 0), reverse=True)
    if len(held) >= majority:
        # A majority of nodes hold our key for at least this long.
        return {"lease_ms": held[majority - 1]}
    if len(held) + failed >= majority:
        raise Info("%d nodes did not answer" % failed)
    raise Fail("not held on a majority")


a.run({"acquire": acquire, "renew": renew, "release": release, "probe": probe})
