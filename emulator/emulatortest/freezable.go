package emulatortest

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdash/dlqdash/emulator"
)

// Freezable puts TCP proxies in front of an emulator's AMQP and admin
// listeners that can be frozen: Freeze stops forwarding bytes in both
// directions without closing a socket, as a broker process stopped with
// SIGSTOP would (its kernel keeps every connection open and even accepts
// new ones, but nothing answers); Thaw resumes forwarding where it
// stopped, so connections opened before the freeze carry on. Clients
// connect through ConnectionString and AdminURL.
type Freezable struct {
	emu   *emulator.Emulator
	amqp  *Proxy
	admin *Proxy
}

// StartFreezable starts the emulator's proxies for the rest of the test (closed by
// tb.Cleanup).
func StartFreezable(tb testing.TB, emu *emulator.Emulator) *Freezable {
	tb.Helper()
	return &Freezable{
		emu:   emu,
		amqp:  StartProxy(tb, emu.AMQPAddr().String()),
		admin: StartProxy(tb, emu.AdminAddr().String()),
	}
}

// ConnectionString is the emulator's, with its endpoint on the AMQP proxy.
func (f *Freezable) ConnectionString() string {
	return strings.Replace(f.emu.ConnectionString(), "sb://"+f.emu.AMQPAddr().String(), "sb://"+f.amqp.Addr(), 1)
}

// AdminURL is the admin endpoint's base URL on the admin proxy.
func (f *Freezable) AdminURL() string { return "http://" + f.admin.Addr() }

// Freeze stops both proxies forwarding; Thaw resumes them.
func (f *Freezable) Freeze() { f.amqp.Freeze(); f.admin.Freeze() }

// Thaw resumes forwarding on both proxies.
func (f *Freezable) Thaw() { f.amqp.Thaw(); f.admin.Thaw() }

// AMQP and Admin are the two proxies, to freeze one side alone.
func (f *Freezable) AMQP() *Proxy  { return f.amqp }
func (f *Freezable) Admin() *Proxy { return f.admin }

// Proxy forwards every TCP connection it accepts to a target address,
// byte for byte, until frozen (see Freezable).
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	gate   chan struct{} // closed while forwarding; open (blocking) while frozen
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// StartProxy listens on 127.0.0.1 (a free port) and forwards to target for
// the rest of the test.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proxy listen: %v", err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{ln: ln, target: target, gate: gate, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops forwarding: bytes read from either side before the freeze
// are held, nothing more is read, and new connections are accepted but not
// forwarded, until Thaw. Freezing a frozen proxy does nothing.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// Thaw resumes forwarding.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// wait blocks while the proxy is frozen; false when it was closed.
func (p *Proxy) wait() bool {
	for {
		p.mu.Lock()
		gate, closed := p.gate, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		<-gate
		p.mu.Lock()
		open := p.gate == gate
		closed = p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if open {
			return true
		}
	}
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		p.wg.Go(func() { p.serve(client) })
	}
}

// serve connects client to the target once the proxy is not frozen and
// forwards in both directions until either side closes.
func (p *Proxy) serve(client net.Conn) {
	defer p.untrack(client)
	if !p.wait() {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(server, client) })
	wg.Go(func() { p.pipe(client, server) })
	wg.Wait()
}

// pipe copies from src to dst, waiting out freezes before every read and
// every write. When src ends, dst is closed, which ends the other
// direction too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		if !p.wait() {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			return
		}
	}
}
