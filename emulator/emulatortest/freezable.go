package emulatortest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/amqp"
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
		amqp:  startProxy(tb, emu.AMQPAddr().String(), true),
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
// byte for byte, until frozen (see Freezable). The AMQP proxy of a
// Freezable forwards what the broker sends frame by frame, so that
// CloseConnections can slip a close frame in between two.
type Proxy struct {
	ln     net.Listener
	target string
	amqp   bool // forward server-to-client whole AMQP frames

	mu     sync.Mutex
	gate   chan struct{} // closed while forwarding; open (blocking) while frozen
	closed bool
	conns  map[net.Conn]struct{}
	pairs  map[*pair]struct{}
	wg     sync.WaitGroup
}

// pair is one proxied connection.
type pair struct {
	client, server net.Conn
	wmu            sync.Mutex // held while writing a whole frame to client
	open           bool       // the broker's AMQP open was forwarded (under wmu)
}

// StartProxy listens on 127.0.0.1 (a free port) and forwards to target for
// the rest of the test.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	return startProxy(tb, target, false)
}

func startProxy(tb testing.TB, target string, amqpFrames bool) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proxy listen: %v", err)
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{ln: ln, target: target, amqp: amqpFrames, gate: gate, conns: map[net.Conn]struct{}{}, pairs: map[*pair]struct{}{}}
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
	pr := &pair{client: client, server: server}
	p.mu.Lock()
	p.pairs[pr] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pairs, pr)
		p.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(server, client) })
	if p.amqp {
		wg.Go(func() { p.pipeFrames(pr) })
	} else {
		wg.Go(func() { p.pipe(client, server) })
	}
	wg.Wait()
}

// CloseConnections ends every AMQP connection through the proxy as a broker
// that closes it with an error would: a close frame carrying condition and
// description goes to the client (between two frames of the broker's),
// then both sockets close. Connections whose AMQP open has not been
// forwarded yet are closed without a frame. Only for the AMQP proxy of a
// Freezable.
func (p *Proxy) CloseConnections(condition, description string) error {
	if !p.amqp {
		return errors.New("proxy: CloseConnections needs the AMQP proxy of a Freezable")
	}
	frame, err := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Close{
		Error: &amqp.Error{Condition: amqp.Symbol(condition), Description: description}}})
	if err != nil {
		return err
	}
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.pairs))
	for pr := range p.pairs {
		pairs = append(pairs, pr)
	}
	p.mu.Unlock()
	for _, pr := range pairs {
		pr.wmu.Lock()
		if pr.open {
			_, _ = pr.client.Write(frame)
		}
		_ = pr.server.Close()
		_ = pr.client.Close()
		pr.wmu.Unlock()
	}
	return nil
}

// pipeFrames copies the broker's side of an AMQP connection to the client
// whole protocol headers and frames at a time (waiting out freezes like
// pipe), so that CloseConnections can write a frame in between.
func (p *Proxy) pipeFrames(pr *pair) {
	defer pr.client.Close()
	r := bufio.NewReaderSize(pr.server, 64<<10)
	amqpHeader := false // the AMQP (not SASL) protocol header was forwarded
	for {
		if !p.wait() {
			return
		}
		head, err := r.Peek(8)
		if err != nil {
			return
		}
		n := 8 // a protocol header: "AMQP" and 4 bytes
		if string(head[:4]) != "AMQP" {
			n = int(binary.BigEndian.Uint32(head[:4]))
			if n < 8 {
				return // not AMQP: give up on this connection
			}
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		if !p.wait() {
			return
		}
		pr.wmu.Lock()
		_, err = pr.client.Write(buf)
		if n == 8 && string(buf[:4]) == "AMQP" {
			amqpHeader = buf[4] == 0
		} else if amqpHeader {
			pr.open = true // the first frame after the AMQP header is the open
		}
		pr.wmu.Unlock()
		if err != nil {
			return
		}
	}
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
