package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerConn is a fetcher's connection to a leader: one request at a time,
// framed with kmsg.
type brokerConn struct {
	nc     net.Conn
	corr   int32
	format *kmsg.RequestFormatter
	buf    []byte
	// body holds the last answer; the next do overwrites it. A decoded
	// answer aliases it (a Fetch's record batches), so the caller is done
	// with one answer before it sends the next request. Reusing it saves
	// allocating and zeroing a replica.fetch.max.bytes buffer per Fetch.
	body    []byte
	maxResp int // largest answer accepted
}

func dialBroker(ctx context.Context, addr string, clientID string, maxResp int, timeout time.Duration) (*brokerConn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("replica: dial %s: %w", addr, err)
	}
	return &brokerConn{nc: nc, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)), maxResp: maxResp}, nil
}

// do sends req and decodes its answer into resp (which must be req's
// ResponseKind), within timeout.
func (c *brokerConn) do(ctx context.Context, req kmsg.Request, resp kmsg.Response, timeout time.Duration) error {
	c.corr++
	corr := c.corr
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.buf = c.format.AppendRequest(c.buf[:0], req, corr)
	if _, err := c.nc.Write(c.buf); err != nil {
		return fmt.Errorf("replica: send %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		return fmt.Errorf("replica: read %s answer: %w", kmsg.NameForKey(req.Key()), err)
	}
	size := int(int32(binary.BigEndian.Uint32(hdr[:4])))
	if size < 4 || size > c.maxResp {
		return fmt.Errorf("replica: %s answer of %d bytes (limit %d)", kmsg.NameForKey(req.Key()), size, c.maxResp)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return fmt.Errorf("replica: %s answer has correlation id %d, want %d", kmsg.NameForKey(req.Key()), got, corr)
	}
	if cap(c.body) < size-4 {
		c.body = make([]byte, size-4)
	}
	body := c.body[:size-4]
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return fmt.Errorf("replica: read %s answer: %w", kmsg.NameForKey(req.Key()), err)
	}
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions answers keep header v0
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return fmt.Errorf("replica: %s answer: bad header tags", kmsg.NameForKey(req.Key()))
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("replica: decode %s answer: %w", kmsg.NameForKey(req.Key()), err)
	}
	return nil
}

func (c *brokerConn) close() { _ = c.nc.Close() }
