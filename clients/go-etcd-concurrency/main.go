// lockjaw adapter (protocol 1, docs/adapters.md) for etcd's Go lock,
// go.etcd.io/etcd/clientv3/concurrency.Mutex, as Debian packages it
// (golang-etcd-server-dev 3.4.23), built offline in GOPATH mode by `build`.
//
// This file holds the protocol: the handshake, the request loop and the
// one writer of stdout. lock.go maps the requests onto the library,
// renewals.go times the session's keep-alives.
//
// Stdout carries protocol lines only; the library's logs go to stderr.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/version"
)

// Hello is lockjaw's first line.
type Hello struct {
	Type        string            `json:"type"`
	Protocol    int               `json:"protocol"`
	System      string            `json:"system"`
	Endpoints   []string          `json:"endpoints"`
	Dial        map[string]string `json:"dial"`
	Key         string            `json:"key"`
	TTLMs       int64             `json:"ttl_ms"`
	OpTimeoutMs int64             `json:"op_timeout_ms"`
	Auth        *Auth             `json:"auth"`
}

// Auth is the hello's `auth` (docs/auth.md): each part present only when
// the auth file gives it; the password is absent in the handshake before
// a run.
type Auth struct {
	TLS *struct {
		CA         string `json:"ca"`
		Cert       string `json:"cert"`
		Key        string `json:"key"`
		ServerName string `json:"server_name"`
	} `json:"tls"`
	User *struct {
		Name     string `json:"name"`
		Password string `json:"password"`
	} `json:"user"`
	ZooKeeperDigest *string `json:"zookeeper_digest"`
}

// Request is one line after the hello.
type Request struct {
	ID     int64  `json:"id"`
	Type   string `json:"type"`
	Key    string `json:"key"`
	Owner  string `json:"owner"`
	TTLMs  int64  `json:"ttl_ms"`
	WaitMs int64  `json:"wait_ms"`
}

// Msg is a reply or an event: a JSON object.
type Msg map[string]interface{}

var outMu sync.Mutex

// send writes one protocol line; every write to stdout goes through here.
func send(m Msg) {
	b, err := json.Marshal(m)
	if err != nil {
		logf("cannot encode %v: %v", m, err)
		return
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func logf(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "go-etcd-concurrency: "+format+"\n", a...)
}

func reply(typ string) Msg { return Msg{"type": typ} }

func failed(err string) Msg { return Msg{"type": "fail", "error": err} }

func info(err string) Msg { return Msg{"type": "info", "error": err} }

// refusal is why this adapter cannot serve the hello, or "".
func refusal(h *Hello) string {
	switch {
	case h.Protocol != 1:
		return fmt.Sprintf("go-etcd-concurrency speaks protocol 1, got %d", h.Protocol)
	case h.System != "etcd":
		return "etcd's clientv3/concurrency.Mutex speaks only etcd"
	case os.Getenv("LOCKJAW_CLIENT_SOURCE") != "":
		// NAME@PATH would need a build of that tree; this adapter is built
		// once, by `build`, against Debian's sources only.
		return "go-etcd-concurrency runs the etcd client it was built with (Debian's " + version.Version +
			"); it does not build a source tree given with @PATH"
	case len(h.Endpoints) == 0:
		return "the hello names no endpoint"
	case h.Auth != nil && h.Auth.ZooKeeperDigest != nil:
		return "a ZooKeeper digest is no etcd credential: give etcd a [user] or [tls] (docs/auth.md)"
	case h.Auth != nil && h.Auth.TLS != nil && (h.Auth.TLS.Cert == "") != (h.Auth.TLS.Key == ""):
		return "the TLS client certificate needs both cert and key"
	}
	return ""
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 1<<20)
	if !in.Scan() {
		return
	}
	var h Hello
	if err := json.Unmarshal(in.Bytes(), &h); err != nil {
		send(Msg{"type": "unsupported", "reason": "the hello is not JSON: " + err.Error()})
		return
	}
	if why := refusal(&h); why != "" {
		send(Msg{"type": "unsupported", "reason": why})
		return
	}
	a := newAdapter(&h)
	if h.Auth != nil && h.Auth.TLS != nil {
		// Read the certificates now: a path that cannot be read refuses the
		// run before it starts, rather than fail its every request.
		if _, err := a.tlsConfig(); err != nil {
			send(Msg{"type": "unsupported", "reason": err.Error()})
			return
		}
	}
	send(Msg{"type": "hello_ok", "library": "etcd/clientv3/concurrency", "version": version.Version,
		"fence": true, "lease": "session", "renewals": "all", "auth": true,
		"promises": Msg{"own_token_release": true, "validity_check": false, "renews_itself": true}})
	a.serve(in)
	// lockjaw closed stdin: leave at once, releasing nothing.
	os.Exit(0)
}

// serve answers the requests one at a time. Each runs in a goroutine of
// its own under the adapter's budget (0.9 op timeouts): a request the
// library has not finished by then is answered `info`, and its late result
// is dropped (lockjaw replaces the adapter after an `info`).
func (a *adapter) serve(in *bufio.Scanner) {
	budget := time.Duration(a.opTimeoutMs) * time.Millisecond * 9 / 10
	for in.Scan() {
		var q Request
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			logf("a request that is not JSON: %v", err)
			continue
		}
		done := make(chan result, 1)
		go func() { done <- a.handle(&q) }()
		var r result
		select {
		case r = <-done:
		case <-time.After(budget):
			r = result{msg: info(fmt.Sprintf("the library gave no answer within %v", budget))}
		}
		r.msg["id"] = q.ID
		send(r.msg)
		if r.sent != nil {
			r.sent()
		}
	}
}

// result is a reply, and what to do once it is written (a grant becomes
// held only then, so no event names an owner before its grant's reply).
type result struct {
	msg  Msg
	sent func()
}
