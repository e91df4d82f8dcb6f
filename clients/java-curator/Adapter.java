// lockjaw adapter (protocol 1, docs/adapters.md) for Apache Curator's
// InterProcessMutex on ZooKeeper.
//
// The lease is the ZooKeeper session: lease_ms is the session timeout the
// server negotiated, owner is the session id (hex) that owns our lock node,
// fence is that node's czxid. probe (and renew, which Curator does not
// have: the session is kept alive by the client's pings) is `sync` then
// `checkExists` on our lock node. Curator's LOST connection state is sent
// as a `lost` event for every lock this process holds.
//
// Stdout carries protocol lines only: System.out is pointed at stderr
// before any library class loads, and the protocol writes go to the saved
// stdout.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryUntilElapsed;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public final class Adapter {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static PrintStream out;

    /** InterProcessMutex keeps the path of our lock node protected. */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String lockPath() {
            return getLockPath();
        }
    }

    /** One grant: the mutex that holds it, its node and the owning session. */
    static final class Held {
        final Mutex mutex;
        final String path;
        final String key;
        final long session;
        boolean lostSent;

        Held(Mutex mutex, String path, String key, long session) {
            this.mutex = mutex;
            this.path = path;
            this.key = key;
            this.session = session;
        }
    }

    private final JsonNode hello;
    private final int opTimeoutMs;
    private final int connectMs;
    private CuratorFramework client;
    private final Map<String, Held> held = new ConcurrentHashMap<>();

    private Adapter(JsonNode hello) {
        this.hello = hello;
        this.opTimeoutMs = hello.path("op_timeout_ms").asInt(2000);
        this.connectMs = Math.max(10, opTimeoutMs / 4);
    }

    static synchronized void send(ObjectNode m) {
        try {
            out.println(JSON.writeValueAsString(m));
        } catch (Exception e) {
            log("cannot encode a reply: " + e);
        }
    }

    static void log(String s) {
        System.err.println("java-curator: " + s);
    }

    static String version(String group, String artifact) {
        String res = "/META-INF/maven/" + group + "/" + artifact + "/pom.properties";
        try (InputStream in = Adapter.class.getResourceAsStream(res)) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version");
        } catch (Exception e) {
            return "unknown";
        }
    }

    static String hex(long session) {
        return "0x" + Long.toHexString(session);
    }

    /** The lock's directory: the key with `/` escaped, so keys never nest. */
    static String lockDir(String key) {
        return "/curator-locks/" + key.replace("%", "%25").replace("/", "%2F");
    }

    /** Load and initialise the classes the first request needs (no
     *  server is contacted: the client is built, not started), so that a
     *  cold JVM's class loading is paid before hello_ok rather than inside
     *  the first request's op timeout. */
    private void warmUp() throws Exception {
        build();
        new Mutex(client, lockDir("warm-up")).isAcquiredInThisProcess();
        for (String c : new String[] {"org.apache.zookeeper.ZooKeeper", "org.apache.zookeeper.ClientCnxn",
                "org.apache.zookeeper.ClientCnxnSocketNIO", "org.apache.zookeeper.data.Stat",
                "org.apache.curator.framework.recipes.locks.LockInternals",
                "org.apache.curator.framework.recipes.locks.StandardLockInternalsDriver"}) {
            Class.forName(c, true, Adapter.class.getClassLoader());
        }
        JSON.writeValueAsString(reply("ok").put("owner", "0x0").put("fence", 0L).put("lease_ms", 0));
    }

    /** Connect on the first request, never at hello. */
    private CuratorFramework client() {
        build();
        if (client.getState() == org.apache.curator.framework.imps.CuratorFrameworkState.LATENT) {
            client.start();
        }
        return client;
    }

    private void build() {
        if (client == null) {
            List<String> eps = new ArrayList<>();
            // An address the worker maps (to its proxy) is dialled as mapped.
            hello.path("endpoints").forEach(e -> eps.add(hello.path("dial").path(e.asText()).asText(e.asText())));
            CuratorFrameworkFactory.Builder b = CuratorFrameworkFactory.builder()
                    .connectString(String.join(",", eps))
                    .sessionTimeoutMs(hello.path("ttl_ms").asInt())
                    .connectionTimeoutMs(connectMs)
                    // Retries stop well inside lockjaw's op timeout.
                    .retryPolicy(new RetryUntilElapsed(opTimeoutMs / 2, 50));
            // --auth: the [zookeeper] digest, added to every session.
            JsonNode digest = hello.path("auth").path("zookeeper_digest");
            if (digest.isTextual()) {
                b = b.authorization("digest", digest.asText().getBytes(StandardCharsets.UTF_8));
            }
            client = b.build();
            client.getConnectionStateListenable().addListener((c, state) -> {
                log("connection state " + state);
                if (state == ConnectionState.LOST) {
                    lost("Curator connection state LOST");
                }
            });
        }
    }

    private void lost(String reason) {
        for (Held h : held.values()) {
            if (!h.lostSent) {
                h.lostSent = true;
                ObjectNode ev = JSON.createObjectNode();
                ev.put("type", "lost").put("key", h.key).put("owner", hex(h.session)).put("reason", reason);
                send(ev);
            }
        }
    }

    private int negotiated() throws Exception {
        return client.getZookeeperClient().getZooKeeper().getSessionTimeout();
    }

    private ObjectNode reply(String type) {
        return JSON.createObjectNode().put("type", type);
    }

    private ObjectNode acquire(JsonNode q) throws Exception {
        // Everything within 0.9 op timeouts: connecting (the first request
        // opens the session), waiting for the holder, and a fifth of the op
        // timeout left for creating our node and reading its czxid.
        long deadline = System.nanoTime() / 1_000_000 + opTimeoutMs * 9L / 10;
        CuratorFramework c = client();
        if (!c.blockUntilConnected(opTimeoutMs * 4 / 10, TimeUnit.MILLISECONDS)) {
            return reply("info").put("error", "not connected to ZooKeeper within " + opTimeoutMs * 4 / 10 + " ms");
        }
        long left = deadline - System.nanoTime() / 1_000_000 - opTimeoutMs / 5;
        long wait = Math.max(0, Math.min(q.path("wait_ms").asLong(), left));
        String key = q.path("key").asText();
        Mutex m = new Mutex(c, lockDir(key));
        if (!m.acquire(wait, TimeUnit.MILLISECONDS)) {
            return reply("fail").put("error", "held");
        }
        String path = m.lockPath();
        Stat st = c.checkExists().forPath(path);
        if (st == null) {
            return reply("info").put("error", "our lock node " + path + " vanished right after the grant");
        }
        String owner = hex(st.getEphemeralOwner());
        held.put(owner, new Held(m, path, key, st.getEphemeralOwner()));
        return reply("ok").put("owner", owner).put("fence", st.getCzxid()).put("lease_ms", negotiated());
    }

    /** One server round trip on our node: sync, then exists, on the
     *  session's own ZooKeeper handle (no Curator retries: one try). */
    private ObjectNode probe(Held h) throws Exception {
        ZooKeeper zk = client.getZookeeperClient().getZooKeeper();
        if (zk.getSessionId() != h.session || !zk.getState().isAlive()) {
            return gone(h);
        }
        long t = 2L * connectMs;
        CountDownLatch synced = new CountDownLatch(1);
        int[] rc = {0};
        zk.sync(h.path, (code, path, ctx) -> {
            rc[0] = code;
            synced.countDown();
        }, null);
        CountDownLatch found = new CountDownLatch(1);
        Stat[] stat = {null};
        int[] rc2 = {0};
        // Sent right behind the sync on the same connection, so answered after it.
        zk.exists(h.path, false, (code, path, ctx, st) -> {
            rc2[0] = code;
            stat[0] = st;
            found.countDown();
        }, null);
        if (!synced.await(t, TimeUnit.MILLISECONDS) || !found.await(t, TimeUnit.MILLISECONDS)) {
            return reply("info").put("error", "sync/exists: no answer within " + t + " ms");
        }
        KeeperException.Code code = KeeperException.Code.get(rc[0] != 0 ? rc[0] : rc2[0]);
        if (code == KeeperException.Code.SESSIONEXPIRED) {
            return gone(h);
        }
        if (code != KeeperException.Code.OK && code != KeeperException.Code.NONODE) {
            return reply("info").put("error", "sync/exists: " + code);
        }
        Stat st = stat[0];
        if (st == null) {
            return reply("fail").put("error", "lock node " + h.path + " is gone");
        }
        if (st.getEphemeralOwner() != h.session) {
            return reply("fail").put("error", "lock node owned by session " + hex(st.getEphemeralOwner()));
        }
        return reply("ok").put("lease_ms", zk.getSessionTimeout());
    }

    /** The session that owned the lock is over: its ephemeral node went with it. */
    private ObjectNode gone(Held h) {
        return reply("fail").put("error", "session " + hex(h.session) + " expired");
    }

    private ObjectNode release(String owner, Held h) throws Exception {
        try {
            h.mutex.release();
        } catch (IllegalMonitorStateException e) {
            held.remove(owner);
            return reply("fail").put("error", e.getMessage());
        }
        held.remove(owner);
        return reply("ok");
    }

    private ObjectNode handle(JsonNode q) throws Exception {
        String type = q.path("type").asText();
        if (type.equals("acquire")) {
            return acquire(q);
        }
        String owner = q.path("owner").asText();
        Held h = held.get(owner);
        if (h == null) {
            return reply("fail").put("error", "unknown owner");
        }
        switch (type) {
            case "probe":
            case "renew":
                return probe(h);
            case "release":
                return release(owner, h);
            default:
                return reply("fail").put("error", "unknown request type " + type);
        }
    }

    /** Serve requests one at a time on one thread: Curator's mutex must be
     *  released by the thread that acquired it. */
    private void serve(BufferedReader in) throws Exception {
        ExecutorService lockThread = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "lock");
            t.setDaemon(true);
            return t;
        });
        long budget = opTimeoutMs * 9L / 10;
        String line;
        while ((line = in.readLine()) != null) {
            JsonNode q = JSON.readTree(line);
            Future<ObjectNode> f = lockThread.submit(() -> handle(q));
            ObjectNode r;
            try {
                r = f.get(budget, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                r = reply("info").put("error", "Curator gave no answer within " + budget + " ms");
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                // A lost connection or a timeout may have been applied.
                r = reply("info").put("error", String.valueOf(cause));
            }
            ObjectNode msg = JSON.createObjectNode().put("id", q.path("id").asLong());
            msg.setAll(r);
            send(msg);
        }
    }

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String first = in.readLine();
        if (first == null) {
            return;
        }
        JsonNode hello = JSON.readTree(first);
        if (hello.path("protocol").asInt() != 1) {
            send(JSON.createObjectNode().put("type", "unsupported")
                    .put("reason", "java-curator speaks protocol 1, got " + hello.path("protocol")));
            return;
        }
        if (!hello.path("system").asText().equals("zookeeper")) {
            send(JSON.createObjectNode().put("type", "unsupported")
                    .put("reason", "Curator's InterProcessMutex speaks only ZooKeeper"));
            return;
        }
        if (hello.path("auth").has("tls")) {
            send(JSON.createObjectNode().put("type", "unsupported")
                    .put("reason", "no TLS here: this adapter takes the ZooKeeper digest ([zookeeper]) only (docs/adapters.md)"));
            return;
        }
        String curator = version("org.apache.curator", "curator-recipes");
        String zk = version("org.apache.zookeeper", "zookeeper");
        Adapter adapter = new Adapter(hello);
        adapter.warmUp();
        send(JSON.createObjectNode().put("type", "hello_ok")
                .put("library", "curator")
                .put("version", curator + "+zookeeper." + zk)
                .put("fence", true).put("lease", "session").put("renewals", "some")
                .put("auth", true));
        adapter.serve(in);
        // lockjaw closed stdin: leave at once, releasing nothing.
        Runtime.getRuntime().halt(0);
    }
}
