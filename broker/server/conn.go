package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/security"
)

const (
	// frameQueue bounds the frames read ahead of the one being handled.
	frameQueue = 8
	// readAheadBytes bounds the bytes of frames read ahead: the reader does
	// not start another frame while this much is queued, so a connection
	// holds at most this plus one socket.request.max.bytes frame.
	readAheadBytes = 16 << 20
	// writeTimeout bounds one answer's write to a client that stopped reading.
	writeTimeout = 2 * time.Minute
)

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn // the socket: deadlines and Close
	io     net.Conn // what requests are read from and answers written to: nc, or TLS over it
	l      *listener
	ip     string // client address, for max.connections.per.ip
	br     *bufio.Reader
	logger *slog.Logger

	auth          authState   // security.go; the processing goroutine's
	authenticated atomic.Bool // also read by the reader and the handshake timer
	authTimer     *time.Timer // closes a connection not authenticated in time; nil = none

	ctx    context.Context // cancelled when the client goes away or at Shutdown
	cancel context.CancelFunc

	frames     chan frame    // reader -> processor
	done       chan struct{} // closed when the processor stops
	readerDone chan struct{}

	queueMu   sync.Mutex // guards queued; queueCond waits on it
	queued    int        // bytes of frames read but not yet handled
	queueCond *sync.Cond
}

// frame is one request as read off the wire, without its size prefix.
type frame struct {
	buf      []byte
	arrived  time.Time
	reserved int64   // bytes reserved in the server's requestMemory
	id       frameID // its name there
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{s: s, nc: nc, io: nc, l: s.listenerSpecs[0],
		logger: s.logger.With("remote", nc.RemoteAddr().String()),
		ctx:    ctx, cancel: cancel,
		frames: make(chan frame, frameQueue), done: make(chan struct{}), readerDone: make(chan struct{})}
	c.queueCond = sync.NewCond(&c.queueMu)
	return c
}

// waitForRoom blocks the reader while readAheadBytes are queued; false
// means the processor has stopped.
func (c *conn) waitForRoom() bool {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	for c.queued >= readAheadBytes {
		select {
		case <-c.done:
			return false
		default:
		}
		c.queueCond.Wait()
	}
	return true
}

// account adds n (negative: handled) to the queued bytes.
func (c *conn) account(n int) {
	c.queueMu.Lock()
	c.queued += n
	c.queueMu.Unlock()
	c.queueCond.Broadcast()
}

// serve handles the connection's requests in order until the client leaves,
// a bad frame arrives or the server shuts down.
func (c *conn) serve() {
	defer c.s.connDone(c)
	if !c.secure() {
		c.stopAuthTimer()
		c.cancel()
		_ = c.nc.Close()
		return
	}
	c.br = bufio.NewReaderSize(c.io, c.readBufferSize())
	go c.readLoop()
	for f := range c.frames {
		err := c.handle(f)
		c.account(-len(f.buf))
		putFrame(f.buf) // answered: nothing refers into it any more
		c.s.reqMem.done(f.id, f.reserved)
		if err != nil {
			if errors.Is(err, errUnauthenticated) || errors.Is(err, security.ErrAuthentication) {
				c.logger.Info("closing connection", "listener", c.l.name, "err", err)
			} else if errors.Is(err, ErrBadFrame) {
				c.s.metrics.badFrames.Inc()
				c.logger.Warn("closing connection", "err", err)
			} else if !isClosedConnErr(err) {
				c.logger.Info("closing connection", "err", err)
			}
			break
		}
	}
	c.stopAuthTimer()
	close(c.done)
	c.account(0) // wake a reader waiting for room
	c.cancel()
	_ = c.nc.Close()
	<-c.readerDone
	for f := range c.frames { // read but never handled
		putFrame(f.buf)
		c.s.reqMem.done(f.id, f.reserved)
	}
}

func (c *conn) stopAuthTimer() {
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
}

// stopReading makes the reader stop after the frame it is reading; queued
// frames are still answered (Shutdown's drain).
func (c *conn) stopReading() { _ = c.nc.SetReadDeadline(time.Now()) }

func (c *conn) readLoop() {
	defer close(c.readerDone)
	defer close(c.frames)
	max := c.s.cfg.SocketRequestMaxBytes
	var sizeBuf [4]byte
	var seq uint64 // frames read, naming each in the request memory
	idle := time.Duration(c.s.cfg.ConnectionsMaxIdleMs) * time.Millisecond
	for {
		if !c.waitForRoom() {
			return
		}
		if c.br.Size() < readBuffer && c.br.Buffered() == 0 && !c.needsAuth() {
			c.br = bufio.NewReaderSize(c.io, readBuffer) // authenticated: the full buffer
		}
		// connections.max.idle.ms bounds the wait for the next request. Set
		// before checking for Shutdown, which cancels first and then sets a
		// past deadline (stopReading), so this cannot undo it.
		if idle > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(idle))
		}
		if c.s.ctx.Err() != nil {
			c.cancel()
			return
		}
		if _, err := io.ReadFull(c.br, sizeBuf[:]); err != nil {
			if !errors.Is(err, io.EOF) && !isClosedConnErr(err) && c.ctx.Err() == nil {
				c.logger.Debug("read", "err", err)
			}
			c.cancel()
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		lo, hi := int32(8), max
		if c.l.sasl && c.needsAuth() {
			// Before authentication: bare SASL tokens (SaslHandshake v0)
			// may be short, and no frame exceeds sasl.server.max.receive.size.
			lo, hi = 1, int32(min(int64(max), c.s.cfg.Security.SaslMaxReceiveSize))
		}
		if size < lo || size > hi {
			if size > hi && hi < max {
				c.s.metrics.badFrames.Inc()
				c.logger.Warn("closing connection: frame before authentication above sasl.server.max.receive.size", "size", size, "sasl.server.max.receive.size", hi)
				c.cancel()
				_ = c.nc.Close()
				return
			}
			c.s.metrics.badFrames.Inc()
			c.logger.Warn("closing connection: request size out of range", "size", size, "socket.request.max.bytes", max)
			c.cancel()
			_ = c.nc.Close()
			return
		}
		seq++
		id := frameID{c, seq}
		buf, reserved, err := c.readBody(id, int(size))
		if err != nil {
			if c.ctx.Err() == nil {
				c.logger.Debug("truncated request frame", "size", size, "err", err)
			}
			c.cancel()
			return
		}
		c.account(len(buf))
		select {
		case c.frames <- frame{buf: buf, arrived: time.Now(), reserved: reserved, id: id}:
		case <-c.done:
			c.s.reqMem.done(id, reserved)
			return
		}
	}
}

// readBuffer is a connection's read buffer; one that has not authenticated
// yet reads through a preAuthBuffer, so that many connections that never
// authenticate cost little.
const (
	readBuffer    = 64 << 10
	preAuthBuffer = 4 << 10
)

func (c *conn) readBufferSize() int {
	if c.needsAuth() {
		return preAuthBuffer
	}
	return readBuffer
}

// firstChunk is what must arrive of a frame before any buffer is allocated
// for it: up to the connection's bufio buffer, which exists anyway.
const firstChunk = 64 << 10

// readBody reads a frame body of size bytes. Nothing is allocated until the
// first firstChunk bytes (or the whole frame, if smaller) have arrived in the
// connection's read buffer; then the frame buffer grows with the bytes that
// arrive (doubling from 1 MiB), each step reserved against
// queued.max.request.bytes. So a lying size prefix costs nothing, and ten
// connections announcing 100 MiB hold what they actually sent. A frame of up
// to maxPooledFrame bytes goes into a recycled buffer (putFrame returns it
// once the request is answered). reserved is what the caller must give back
// (requestMemory.done) once the frame is answered.
func (c *conn) readBody(id frameID, size int) (buf []byte, reserved int64, err error) {
	mem := c.s.reqMem
	defer func() {
		if err != nil {
			mem.done(id, reserved)
			reserved = 0
		}
	}()
	if _, err := c.br.Peek(min(size, firstChunk, c.br.Size())); err != nil {
		return nil, 0, err
	}
	grow := func(n int) error {
		// The first reservation starts the frame: it waits while the bound
		// is used up. Later ones may take the overflow pass.
		if !mem.reserve(c.ctx, id, int64(n), reserved > 0) {
			return context.Canceled
		}
		reserved += int64(n)
		return nil
	}
	if size <= maxPooledFrame {
		if err := grow(frameCap(size)); err != nil {
			return nil, reserved, err
		}
		buf = getFrame(size)
		if _, err := io.ReadFull(c.br, buf); err != nil {
			putFrame(buf)
			return nil, reserved, err
		}
		return buf, reserved, nil
	}
	if err := grow(maxPooledFrame); err != nil {
		return nil, reserved, err
	}
	buf = make([]byte, 0, maxPooledFrame)
	for len(buf) < size {
		if len(buf) == cap(buf) {
			next := min(2*cap(buf), size)
			if err := grow(next); err != nil {
				return nil, reserved, err
			}
			bigger := make([]byte, len(buf), next)
			copy(bigger, buf)
			mem.release(int64(cap(buf)))
			reserved -= int64(cap(buf))
			buf = bigger
		}
		n, err := io.ReadFull(c.br, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			return nil, reserved, err
		}
	}
	return buf, reserved, nil
}

// Request frames of up to maxPooledFrame bytes are read into buffers
// recycled through framePools, one pool per power-of-two size class from
// minPooledFrame: under a produce load the frame buffers were nearly all of
// the bytes the broker allocated, and so most of its GC work. A buffer is
// returned only after its request has been answered; nothing a handler keeps
// refers into it (kmsg copies strings, and record bytes are copied into the
// segment file by the append).
const (
	minPooledFrame = 4 << 10
	maxPooledFrame = 1 << 20
)

var framePools [9]sync.Pool // 4 KiB, 8 KiB, ... 1 MiB; entries are *[]byte

// frameClass is the pool index for a buffer of n bytes, -1 if too large.
func frameClass(n int) int {
	if n > maxPooledFrame {
		return -1
	}
	c := 0
	for minPooledFrame<<c < n {
		c++
	}
	return c
}

// frameCap is the capacity getFrame gives a buffer of size bytes.
func frameCap(size int) int { return minPooledFrame << frameClass(size) }

func getFrame(size int) []byte {
	c := frameClass(size)
	if p, ok := framePools[c].Get().(*[]byte); ok {
		return (*p)[:size]
	}
	return make([]byte, size, minPooledFrame<<c)
}

// putFrame recycles a buffer from getFrame; others are left to the GC.
func putFrame(b []byte) {
	c := frameClass(cap(b))
	if c < 0 || cap(b) != minPooledFrame<<c {
		return
	}
	b = b[:0]
	framePools[c].Put(&b)
}

// header is a parsed request header.
type header struct {
	key, version int16
	corrID       int32
	clientID     *string
}

func parseHeader(b []byte) (header, []byte, error) {
	r := kbin.Reader{Src: b}
	h := header{key: r.Int16(), version: r.Int16(), corrID: r.Int32()}
	h.clientID = r.NullableString()
	if !r.Ok() {
		return h, nil, fmt.Errorf("%w: truncated header", ErrBadFrame)
	}
	return h, r.Src, nil
}

// skipTags skips a tagged-field section; ok is false when it is truncated.
func skipTags(b []byte) ([]byte, bool) {
	r := kbin.Reader{Src: b}
	return skipTagsReader(&r)
}

// skipTagsReader skips a tagged-field section at r.
func skipTagsReader(r *kbin.Reader) ([]byte, bool) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint()
		size := r.Uvarint()
		r.Span(int(size))
	}
	return r.Src, r.Ok()
}

// requestContext is what a handler knows about the request it serves.
type requestContext struct {
	ctx    context.Context
	conn   *conn
	hdr    header
	logger *slog.Logger
}

// handle decodes and answers one frame. An error closes the connection.
func (c *conn) handle(f frame) (err error) {
	if c.auth.rawTokens && c.needsAuth() {
		return c.rawToken(f.buf)
	}
	hdr, body, err := parseHeader(f.buf)
	if err != nil {
		return err
	}
	if err := c.gate(hdr.key); err != nil {
		return err
	}
	a := lookupAPI(hdr.key)
	if a == nil {
		if rep, ok := unsupportedKeyReply(hdr, body); ok {
			return c.writeReply(hdr, rep, f.arrived, unservedAPI)
		}
		return fmt.Errorf("%w: unknown api key %d", ErrBadFrame, hdr.key)
	}
	defer func() {
		if r := recover(); r != nil {
			if c.s.onPanic != nil {
				c.s.onPanic(r)
			}
			c.logger.Error("handler panic (bug): closing connection", "api", a.name, "version", hdr.version, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: internal error handling %s", ErrBadFrame, a.name)
		}
	}()
	if a.maxFrame > 0 && len(f.buf) > a.maxFrame {
		return fmt.Errorf("%w: %s request of %d bytes, above the %d this broker decodes for it", ErrBadFrame, a.name, len(f.buf), a.maxFrame)
	}
	if hdr.version > a.max && a.key == apiVersionsKey {
		return c.writeReply(hdr, unsupportedAPIVersions(), f.arrived, a)
	}
	if hdr.version < a.advertisedMin || hdr.version > a.max {
		return fmt.Errorf("%w: %s version %d not served (%d-%d)", ErrBadFrame, a.name, hdr.version, a.advertisedMin, a.max)
	}
	req := kmsg.RequestForKey(hdr.key)
	req.SetVersion(hdr.version)
	if req.IsFlexible() {
		var ok bool
		if body, ok = skipTags(body); !ok {
			return fmt.Errorf("%w: truncated header tags", ErrBadFrame)
		}
	}
	if a.decode != nil {
		req, err = a.decode(hdr.version, body)
	} else {
		err = req.ReadFrom(body)
	}
	if err != nil {
		return fmt.Errorf("%w: %s v%d: cannot decode body: %v", ErrBadFrame, a.name, hdr.version, err)
	}
	rc := &requestContext{ctx: c.ctx, conn: c, hdr: hdr, logger: c.logger}
	denied, after := authorizeRequest(c.s, rc, req)
	if denied != nil {
		return c.writeReply(hdr, denied, f.arrived, a)
	}
	rep, err := a.handle(c.s, rc, req)
	if err != nil {
		return err
	}
	if after != nil {
		rep = after(rep)
	}
	return c.writeReply(hdr, rep, f.arrived, a)
}

func (c *conn) writeReply(hdr header, rep reply, arrived time.Time, a *api) error {
	err := rep.write(c, hdr)
	c.s.metrics.requests.WithLabelValues(a.name).Inc()
	c.s.metrics.latency.WithLabelValues(a.name).Observe(time.Since(arrived).Seconds())
	return err
}

// reply is a handler's answer, written by the processing goroutine.
type reply interface {
	write(c *conn, hdr header) error
}

// noReply is the absent answer of an acks=0 Produce.
type noReply struct{}

func (noReply) write(*conn, header) error { return nil }

// closeReply closes the connection instead of answering (acks=0 Produce that
// failed: Kafka closes so that the client notices).
type closeReply struct{ reason string }

func (r closeReply) write(*conn, header) error {
	return fmt.Errorf("server: %s", r.reason)
}

// kmsgReply is an answer encoded by kmsg.
type kmsgReply struct{ resp kmsg.Response }

func (r kmsgReply) write(c *conn, hdr header) error {
	r.resp.SetVersion(hdr.version)
	buf := make([]byte, 4, 256)
	buf = appendResponseHeader(buf, hdr, r.resp.IsFlexible())
	buf = r.resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return c.write(buf)
}

// appendResponseHeader appends the correlation id and, for flexible
// versions except ApiVersions, an empty tag section.
func appendResponseHeader(buf []byte, hdr header, flexible bool) []byte {
	buf = kbin.AppendInt32(buf, hdr.corrID)
	if flexible && hdr.key != apiVersionsKey {
		buf = append(buf, 0)
	}
	return buf
}

func (c *conn) write(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := c.io.Write(b)
	return err
}

func isClosedConnErr(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || (errors.As(err, &ne) && ne.Timeout())
}
