# redis-py's RedisCluster through lockjaw's proxies, for the python-redis-py
# adapter on --system redis-cluster. Runs only with the redis-py of the
# adapter's venv (requirements.txt): Debian's 4.3.4 has no address_remap.
#
# The hello's `dial` maps each node's announced "host:port" to this
# worker's proxy in front of it. redis-py passes the addresses CLUSTER SLOTS
# names through address_remap, but takes those of MOVED and ASK replies as
# they come (redis/redis-py#3382): after a failover it would dial the new
# primary's announced address, around the proxy. DialedNodes maps those
# too, and makes no client for an address that is not one of the proxies:
# an address outside the map is a ConnectionError (the request is `info`),
# never a connection around the proxies.
import sys

import redis.cluster
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, NodesManager, RedisCluster
from redis.exceptions import ConnectionError
from redis.retry import Retry


def split(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class Dial:
    """The address_remap: an announced (host, port) -> its proxy's."""

    def __init__(self, dial):
        self.map = {a: split(p) for a, p in dial.items()}
        self.proxies = set(self.map.values())

    def __call__(self, addr):
        name = "%s:%s" % addr
        if name not in self.map:
            raise ConnectionError("%s is not in lockjaw's dial map" % name)
        return self.map[name]

    def named(self, name):
        """A node name ("host:port"): the proxy's if `name` is announced."""
        return "%s:%d" % self.map[name] if name in self.map else name


class DialedNodes(NodesManager):
    """redis-py's view of the cluster, every address through the Dial."""

    def create_redis_node(self, host, port, **kwargs):
        # Every node client redis-py makes is made here.
        if (host, int(port)) not in self.address_remap.proxies:
            raise ConnectionError("%s:%s is not one of lockjaw's proxies" % (host, port))
        return super().create_redis_node(host, port, **kwargs)

    def move_slot(self, e):
        # A MOVED reply names the slot's new primary by its announced address.
        announced = "%s:%s" % (e.host, e.port)
        e.host, e.port = e.node_addr = self.address_remap((e.host, e.port))
        print("redis-py: MOVED %d %s: through %s:%d" % (e.slot_id, announced, e.host, e.port),
              file=sys.stderr, flush=True)
        super().move_slot(e)

    def initialize(self, additional_startup_nodes_info=None, **kwargs):
        # After some MOVED replies redis-py reloads CLUSTER SLOTS, with the
        # MOVED address as one more node to ask.
        extra = [self.address_remap(a) for a in additional_startup_nodes_info or ()]
        super().initialize(additional_startup_nodes_info=extra, **kwargs)

    def get_node(self, host=None, port=None, node_name=None):
        # An ASK reply's node is looked up by its announced name.
        if node_name is not None:
            node_name = self.address_remap.named(node_name)
        return super().get_node(host, port, node_name)


def dialed_cluster(endpoints, dial, **opts):
    """A RedisCluster that starts from `endpoints` (proxies) and reaches
    every node through `dial`. It connects when made: make it on the first
    request. One try per command (redis-py's default retries a command
    that timed out, which may have been applied): MOVED, ASK and TRYAGAIN,
    which prove it was not, are still followed."""
    # RedisCluster.__init__ makes its NodesManager by this module name.
    redis.cluster.NodesManager = DialedNodes
    return RedisCluster(
        startup_nodes=[ClusterNode(*split(e)) for e in endpoints],
        address_remap=Dial(dial),
        retry=Retry(NoBackoff(), 0),
        **opts,
    )
