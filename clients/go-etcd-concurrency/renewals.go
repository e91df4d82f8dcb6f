// The session's keep-alives, timed on the wire: a gRPC stream interceptor
// on the library's LeaseKeepAlive stream stamps each request before it is
// sent and each answer when it arrives. The server answers the requests
// of one stream in order, one answer each, so the n-th answer belongs to
// the n-th request. Each answer with a TTL renews the lease from some
// moment after its request was sent: it is a `renewed` event of every
// lock that lease holds, with lease_ms = the TTL the server answered.
//
// Not reported: keep-alives sent before the hold they would extend began
// (the grant's reply), and any whose answer never came (which the server
// may still have applied); both only make lockjaw count a lease shorter
// than the server does.
package main

import (
	"context"
	"strconv"
	"sync"

	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// monoNs reads CLOCK_MONOTONIC, the clock of the hello's clock_origin_ns.
func monoNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // CLOCK_MONOTONIC always exists on Linux
	}
	return ts.Nano()
}

const keepAliveMethod = "/etcdserverpb.Lease/LeaseKeepAlive"

// timeKeepAlives wraps the library's keep-alive streams; other streams
// (watches) pass as they are.
func (a *adapter) timeKeepAlives(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
	method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != keepAliveMethod {
		return s, err
	}
	return &timedStream{ClientStream: s, a: a}, nil
}

type sentAt struct {
	id int64
	ns int64
}

// timedStream: the library sends on one goroutine and receives on another.
type timedStream struct {
	grpc.ClientStream
	a    *adapter
	mu   sync.Mutex
	sent []sentAt // requests not answered yet, oldest first
}

func (t *timedStream) SendMsg(m interface{}) error {
	if r, ok := m.(*pb.LeaseKeepAliveRequest); ok {
		t.mu.Lock()
		t.sent = append(t.sent, sentAt{r.ID, monoNs()})
		t.mu.Unlock()
	}
	return t.ClientStream.SendMsg(m)
}

func (t *timedStream) RecvMsg(m interface{}) error {
	err := t.ClientStream.RecvMsg(m)
	r, ok := m.(*pb.LeaseKeepAliveResponse)
	if err != nil || !ok {
		return err
	}
	done := monoNs()
	t.mu.Lock()
	var s sentAt
	found := len(t.sent) > 0
	if found {
		s, t.sent = t.sent[0], t.sent[1:]
	}
	t.mu.Unlock()
	if !found || s.id != r.ID {
		logf("a keep-alive answer for lease %d matches no request sent (%v): not reported", r.ID, s)
		return nil
	}
	if r.TTL > 0 {
		t.a.renewed(strconv.FormatInt(r.ID, 10), r.TTL*1000, s.ns, done)
	}
	return nil
}

// renewed sends the event for every lock the lease holds whose hold began
// before the keep-alive was sent.
func (a *adapter) renewed(owner string, leaseMs, sentNs, doneNs int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range a.held {
		if h.owner == owner && h.since <= sentNs && !h.lost {
			send(Msg{"type": "renewed", "key": h.key, "owner": owner, "lease_ms": leaseMs,
				"sent_ns": sentNs, "done_ns": doneNs})
		}
	}
}
