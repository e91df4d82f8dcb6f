// The requests on the library: a concurrency.Session (its lease, kept
// alive by the library) per ttl, a concurrency.Mutex per acquire.
//
// owner = the session's lease id (decimal, as lockjaw's own etcd client
// names it); fence = the create revision of the mutex's key; lease_ms =
// the TTL the server granted, in whole seconds (the requested ttl_ms
// rounded up; etcd may raise it to its minimum). probe (and renew, which
// lockjaw does not send: the session renews) is one TimeToLive of the
// lease with its attached keys: ok while the lease lives and carries our
// key, with lease_ms = the whole seconds left. A session whose keep-alive
// ends (its lease expired or went unrenewed a whole TTL) sends `lost` for
// every lock it holds.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/ioutil"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type held struct {
	mutex *concurrency.Mutex
	key   string
	owner string
	since int64 // CLOCK_MONOTONIC ns when the grant's reply was written
	lost  bool  // its session's keep-alive ended (`lost` sent)
}

type adapter struct {
	hello       *Hello
	opTimeoutMs int64
	client      *clientv3.Client
	sessions    map[int64]*concurrency.Session // by TTL in seconds
	granted     map[int64]int64                // lease id -> granted TTL (s)

	reqMu sync.Mutex       // one request at a time, even one the serve loop gave up on
	mu    sync.Mutex       // guards held (events read it from other goroutines)
	held  map[string]*held // by key + "\x00" + owner
}

func newAdapter(h *Hello) *adapter {
	t := h.OpTimeoutMs
	if t <= 0 {
		t = 2000
	}
	return &adapter{hello: h, opTimeoutMs: t, sessions: map[int64]*concurrency.Session{},
		granted: map[int64]int64{}, held: map[string]*held{}}
}

func heldKey(key, owner string) string { return key + "\x00" + owner }

func (a *adapter) ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// tlsConfig is the hello's [tls]: the CA, the client certificate if given,
// and the name the server's certificate must carry (not the address
// dialled, a proxy on 127.0.0.1).
func (a *adapter) tlsConfig() (*tls.Config, error) {
	t := a.hello.Auth.TLS
	pem, err := ioutil.ReadFile(t.CA)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA %s: %v", t.CA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in the CA file %s", t.CA)
	}
	c := &tls.Config{RootCAs: pool, ServerName: t.ServerName}
	if t.Cert != "" {
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("cannot load the client certificate %s and key %s: %v", t.Cert, t.Key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// connect builds the client on the first request, never at hello (a
// replaced adapter may start during a partition). Without a user the dial
// does not block; with one, New fetches a token within `within`.
func (a *adapter) connect(within time.Duration) error {
	if a.client != nil {
		return nil
	}
	cfg := clientv3.Config{
		Endpoints:   a.hello.Endpoints,
		DialTimeout: within,
		// Stamps the library's own keep-alives (renewals.go).
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(a.timeKeepAlives)},
	}
	if au := a.hello.Auth; au != nil {
		if au.User != nil {
			cfg.Username, cfg.Password = au.User.Name, au.User.Password
		}
		if au.TLS != nil {
			t, err := a.tlsConfig()
			if err != nil {
				return err
			}
			cfg.TLS = t
		}
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	a.client = c
	return nil
}

// session is the live session of this TTL, or a new one: the adapter
// grants the lease itself (concurrency.NewSession does the same, but does
// not say what TTL the server granted) and hands it to the session.
func (a *adapter) session(ctx context.Context, ttlS int64) (*concurrency.Session, error) {
	if s := a.sessions[ttlS]; s != nil {
		select {
		case <-s.Done():
		default:
			return s, nil
		}
	}
	g, err := a.client.Grant(ctx, ttlS)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(a.client, concurrency.WithLease(g.ID), concurrency.WithTTL(int(ttlS)))
	if err != nil {
		return nil, err
	}
	a.sessions[ttlS] = s
	a.granted[int64(g.ID)] = g.TTL
	go a.watchSession(s)
	return s, nil
}

// watchSession sends `lost` once for each lock the session holds when its
// keep-alive ends. The lock stays known: a probe then fails (the lease is
// gone) and a release is the library's Unlock, as for its user.
func (a *adapter) watchSession(s *concurrency.Session) {
	<-s.Done()
	owner := strconv.FormatInt(int64(s.Lease()), 10)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range a.held {
		if h.owner == owner && !h.lost {
			h.lost = true
			send(Msg{"type": "lost", "key": h.key, "owner": owner,
				"reason": "the session's keep-alive ended (lease expired, revoked or unanswered for its TTL)"})
		}
	}
}

func (a *adapter) handle(q *Request) result {
	a.reqMu.Lock()
	defer a.reqMu.Unlock()
	if q.Type == "acquire" {
		return a.acquire(q)
	}
	a.mu.Lock()
	h := a.held[heldKey(q.Key, q.Owner)]
	a.mu.Unlock()
	if h == nil {
		return result{msg: failed("unknown owner")}
	}
	switch q.Type {
	case "probe", "renew":
		return result{msg: a.probe(h)}
	case "release":
		return a.release(h)
	}
	return result{msg: failed("unknown request type " + q.Type)}
}

func (a *adapter) acquire(q *Request) result {
	// Everything within 0.85 op timeouts, under the serve loop's 0.9.
	deadline := time.Now().Add(a.ms(a.opTimeoutMs * 85 / 100))
	if err := a.connect(a.ms(a.opTimeoutMs / 2)); err != nil {
		return result{msg: failOr("connect", err)}
	}
	ttl := q.TTLMs
	if ttl <= 0 {
		ttl = a.hello.TTLMs
	}
	ttlS := (ttl + 999) / 1000 // etcd leases are whole seconds: round up
	if ttlS < 1 {
		ttlS = 1
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	s, err := a.session(ctx, ttlS)
	if err != nil {
		// No key was written: a lease alone locks nothing.
		return result{msg: failOr("lease grant", err)}
	}
	// Mutex.Lock has no try-once form in 3.4 (TryLock came in 3.5): it
	// waits up to wait_ms, and at least a round trip's allowance.
	allow := a.ms(a.opTimeoutMs / 2)
	if allow > 500*time.Millisecond {
		allow = 500 * time.Millisecond
	}
	wait := a.ms(q.WaitMs)
	if wait < allow {
		wait = allow
	}
	lctx, lcancel := context.WithTimeout(ctx, wait)
	defer lcancel()
	m := concurrency.NewMutex(s, q.Key)
	if err := m.Lock(lctx); err != nil {
		if m.Key() == "\x00" {
			// Lock gave up waiting and its Unlock deleted our key: not
			// held. Out of time, the holder kept it; else say why.
			if errors.Is(err, context.DeadlineExceeded) {
				return result{msg: failed("held")}
			}
			return result{msg: failed("lock (our key deleted again): " + err.Error())}
		}
		return result{msg: classify("lock", err)}
	}
	owner := strconv.FormatInt(int64(s.Lease()), 10)
	rev := m.IsOwner().TargetUnion
	fence, ok := rev.(*pb.Compare_CreateRevision)
	if !ok {
		return result{msg: info(fmt.Sprintf("no create revision in the mutex's owner compare: %T", rev))}
	}
	h := &held{mutex: m, key: q.Key, owner: owner}
	msg := Msg{"type": "ok", "owner": owner, "fence": fence.CreateRevision,
		"lease_ms": a.granted[int64(s.Lease())] * 1000}
	return result{msg: msg, sent: func() {
		a.mu.Lock()
		h.since = monoNs()
		a.held[heldKey(q.Key, owner)] = h
		a.mu.Unlock()
		// A session that ended before the grant was registered sent no
		// `lost` for it: check again.
		select {
		case <-s.Done():
			go a.watchSession(s)
		default:
		}
	}}
}

// probe is one TimeToLive of the lease with its attached keys.
func (a *adapter) probe(h *held) Msg {
	ctx, cancel := context.WithTimeout(context.Background(), a.ms(a.opTimeoutMs*85/100))
	defer cancel()
	id, _ := strconv.ParseInt(h.owner, 10, 64)
	r, err := a.client.TimeToLive(ctx, clientv3.LeaseID(id), clientv3.WithAttachedKeys())
	if err != nil {
		return classify("lease time-to-live", err)
	}
	if r.TTL < 0 {
		return failed("lease " + h.owner + " is gone")
	}
	for _, k := range r.Keys {
		if string(k) == h.mutex.Key() {
			return Msg{"type": "ok", "lease_ms": r.TTL * 1000}
		}
	}
	return failed("the lease no longer carries the lock key " + h.mutex.Key())
}

func (a *adapter) release(h *held) result {
	ctx, cancel := context.WithTimeout(context.Background(), a.ms(a.opTimeoutMs*85/100))
	defer cancel()
	if err := h.mutex.Unlock(ctx); err != nil {
		return result{msg: classify("unlock", err)}
	}
	a.mu.Lock()
	delete(a.held, heldKey(h.key, h.owner))
	a.mu.Unlock()
	return result{msg: reply("ok")}
}

// classify: refusals by the server are `fail` (certainly not applied);
// timeouts, unavailability and transport errors `info` (may have been).
func classify(what string, err error) Msg {
	msg := what + ": " + err.Error()
	if definite(err) {
		return failed(msg)
	}
	return info(msg)
}

// failOr is `fail` for any error: for steps before the lock key is written.
func failOr(what string, err error) Msg { return failed(what + ": " + err.Error()) }

func definite(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var code codes.Code
	if c, ok := err.(interface{ Code() codes.Code }); ok {
		code = c.Code()
	} else if s, ok := status.FromError(err); ok {
		code = s.Code()
	} else {
		return false
	}
	switch code {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated,
		codes.ResourceExhausted:
		return true
	}
	return false
}
