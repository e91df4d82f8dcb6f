# The protocol side shared by lockjaw's Python adapters (protocol 1, see
# docs/adapters.md): read the hello, answer it, then answer each request
# line exactly once. An adapter supplies the library side: one function per
# request type, and which of the library's exceptions mean "certainly not
# applied" (fail); every other exception is "may have been applied" (info).
# Only protocol lines go to stdout; logs go to stderr.
import json
import math
import os
import sys
import threading
import time
import traceback


class Fail(Exception):
    """The request certainly had no effect (held, not held, unknown owner)."""


class Info(Exception):
    """The request may or may not have had an effect."""


def secs(ms):
    """Seconds as a float that libraries turn back into exactly `ms`
    milliseconds with int(s * 1000) (1001 / 1000 * 1000 is 1000.999...)."""
    s = ms / 1000
    while int(s * 1000) < ms:
        s = math.nextafter(s, math.inf)
    return s


def log(*args):
    print(*args, file=sys.stderr, flush=True)


class Adapter:
    """One adapter process: the hello, the request loop, the grants."""

    def __init__(self):
        self._out = threading.Lock()
        line = read_hello()
        if not line:
            sys.exit(0)
        self.hello = json.loads(line)
        # owner -> whatever the library needs to renew, release or probe it.
        self.grants = {}
        t = self.hello.get("op_timeout_ms", 1000)
        # The library's own timeouts, below lockjaw's op timeout so that its
        # errors (info) reach lockjaw before lockjaw gives up on the request.
        self.timeout_s = max(0.05, t * 0.6 / 1000)

    def endpoints(self):
        """The addresses to dial: the hello's endpoints, each through the
        `dial` map where it names one (lockjaw's worker proxies, so that
        network faults reach the library's own connections)."""
        dial = self.hello.get("dial") or {}
        return [dial.get(e, e) for e in self.hello["endpoints"]]

    def auth(self):
        """The hello's `auth` (lockjaw's --auth, docs/adapters.md "The
        handshake"): {} without it. Its password and digest are secrets:
        never print them."""
        return self.hello.get("auth") or {}

    def redis_user(self, lib_version=None):
        """redis-py's keyword arguments for the hello's ACL user
        (`username`, `password`), {} without one. `lib_version`: the
        redis-py version, to refuse one older than 4.0 (no `username`)."""
        u = self.auth().get("user")
        if not u:
            return {}
        if lib_version and int(lib_version.split(".")[0]) < 4:
            self.unsupported("redis-py %s has no ACL user (username came in 4.0); "
                             "use a newer version" % lib_version)
        # No password in the handshake before a run: lockjaw only asks there.
        return {"username": u["name"], "password": u.get("password")}

    def no_tls(self, why):
        """Refuse the hello's [tls] (an adapter that cannot use it)."""
        if self.auth().get("tls"):
            self.unsupported("no TLS here: %s (docs/adapters.md)" % why)

    def redis_connection_class(self, redis):
        """A redis-py Connection class for the hello's `auth`, or None when
        redis-py's own serves: TLS that trusts the file's CA, presents its
        client certificate and verifies server_name (the address dialled
        is lockjaw's proxy), and, for redis-py before 4.0 (no `username`),
        the ACL user's `AUTH name password` on each new connection."""
        tls = self.auth().get("tls")
        user = self.auth().get("user")
        old = int(redis.__version__.split(".")[0]) < 4
        if not tls and not (user and old):
            return None
        ctx = None
        if tls:
            import ssl
            ctx = ssl.create_default_context(cafile=tls["ca"])
            if tls.get("cert"):
                ctx.load_cert_chain(tls["cert"], tls["key"])

        class AuthConnection(redis.connection.Connection):
            def _connect(self):
                sock = super()._connect()
                if ctx is None:
                    return sock
                return ctx.wrap_socket(sock, server_hostname=tls["server_name"])

            def on_connect(self):
                if user and old:
                    # The reply's reader first (redis-py's on_connect makes
                    # it again, after the AUTH's reply is read).
                    self._parser.on_connect(self)
                    self.send_command("AUTH", user["name"], user.get("password") or "")
                    ok = self.read_response()
                    if (ok.decode() if isinstance(ok, bytes) else ok) != "OK":
                        raise redis.exceptions.AuthenticationError("AUTH answered %r" % ok)
                super().on_connect()
        return AuthConnection

    def redis_pool(self, redis, host, port, **kwargs):
        """A redis-py ConnectionPool to host:port with
        redis_connection_class(), or None when that is None. `kwargs`:
        the connections' own (timeouts; redis_user() with redis-py 4+)."""
        cls = self.redis_connection_class(redis)
        if cls is None:
            return None
        return redis.ConnectionPool(connection_class=cls, host=host, port=port, **kwargs)

    def redis_user_kwargs(self, redis):
        """redis_user() for redis-py 4.0+; {} before (the user then goes
        through redis_connection_class())."""
        if int(redis.__version__.split(".")[0]) < 4:
            return {}
        return self.redis_user(redis.__version__)

    def reexec(self, python, script):
        """Go on as `python script` in this process (same pid, process group
        and stdin), handing it the hello already read (see read_hello)
        through a pipe whose descriptor HELLO_FD_ENV names: the hello may
        hold a password, which an environment variable would show to
        anyone who may read /proc/PID/environ."""
        data = (json.dumps(self.hello) + "\n").encode()
        r, w = os.pipe()
        # A hello is a few KiB; a pipe holds 64 KiB unread.
        os.write(w, data)
        os.close(w)
        os.set_inheritable(r, True)
        os.environ[HELLO_FD_ENV] = str(r)
        sys.stdout.flush()
        os.execv(python, [python, script])

    def send(self, msg):
        with self._out:
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()

    def unsupported(self, reason):
        self.send({"type": "unsupported", "reason": reason})
        sys.exit(0)

    def hello_ok(self, library, version, fence, lease, renewals, auth=False,
                 promises=None):
        """auth=True: this adapter connects with the hello's `auth`
        (lockjaw refuses --auth with an adapter that does not say so).
        promises: what the library documents it does (docs/adapters.md
        "What a library promises"), e.g. {"validity_check": True}."""
        if self.hello.get("protocol") != 1:
            self.unsupported("this adapter speaks protocol 1 only")
        ok = {"type": "hello_ok", "library": library, "version": version,
              "fence": fence, "lease": lease, "renewals": renewals}
        if auth:
            ok["auth"] = True
        if promises:
            ok["promises"] = promises
        self.send(ok)

    def event(self, kind, **fields):
        self.send(dict(type=kind, **fields))

    def grant(self, owner):
        """What an earlier acquire stored for `owner`."""
        if owner not in self.grants:
            raise Fail("unknown owner")
        return self.grants[owner]

    def run(self, handlers, definite=()):
        """Answer requests until stdin closes. `handlers` maps a request
        type to a function of the request returning the `ok` fields;
        `definite` lists the library's exceptions that mean fail."""
        for line in sys.stdin:
            if not line.strip():
                continue
            q = json.loads(line)
            reply = {"id": q.get("id")}
            handler = handlers.get(q.get("type"))
            try:
                if handler is None:
                    raise Fail("unknown request type %r" % q.get("type"))
                reply.update(type="ok", **(handler(q) or {}))
            except Fail as e:
                reply.update(type="fail", error=str(e))
            except definite as e:
                reply.update(type="fail", error="%s: %s" % (type(e).__name__, e))
            except Exception as e:  # timeouts, lost connections, surprises
                if type(e).__module__ == "builtins":  # a bug, not the network
                    traceback.print_exc(file=sys.stderr)
                reply.update(type="info", error="%s: %s" % (type(e).__name__, e))
                log("request %s: info: %s" % (q.get("id"), reply["error"]))
            self.send(reply)


# Names the descriptor Adapter.reexec leaves the hello on for the program it
# runs.
HELLO_FD_ENV = "LOCKJAW_ADAPTER_HELLO_FD"


def read_hello():
    """The hello line: from the pipe HELLO_FD_ENV names after a reexec,
    else from stdin one byte at a time, so that nothing after it sits in a
    buffer that an exec would lose (lockjaw sends no request before the
    answer, but an adapter should not depend on it)."""
    fd = os.environ.pop(HELLO_FD_ENV, None)
    if fd is not None:
        with os.fdopen(int(fd), "rb") as f:
            return f.read().decode()
    buf = bytearray()
    while not buf.endswith(b"\n"):
        b = os.read(0, 1)
        if not b:
            break
        buf += b
    return buf.decode()


def now_ns():
    """CLOCK_MONOTONIC, lockjaw's clock (host-wide)."""
    return time.monotonic_ns()
