package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"time"
)

// client is one keep-alive HTTP/1.1 connection that posts a request and reads
// its answer on the calling goroutine.
//
// The load generator shares the machine's cores with the server it measures,
// so whatever it spends per request is taken from the figure it reports.
// net/http's client runs two goroutines per connection and hands every request
// and answer between them over channels: driving OPA's server (another
// process, so the figure is the client's alone) it cost 54–73 µs of CPU per
// request, a sixth of what toolgate's server spends on a decision. client
// writes each request with one write and reads the answer through a
// bufio.Reader, and speaks just the HTTP/1.1 that Go's servers answer a POST
// with: a status line, headers, and a body of Content-Length bytes or chunked.
type client struct {
	addr    string
	head    []byte // request line and headers, up to the Content-Length value
	timeout time.Duration

	conn net.Conn
	r    *bufio.Reader
	out  []byte // the request being written
	body []byte // the last answer's body, valid until the next post
}

// maxBody bounds an answer's body: the load test's answers are a few hundred
// bytes.
const maxBody = 1 << 20

func newClient(addr, path string, header []string, timeout time.Duration) *client {
	head := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\n", path, addr)
	for _, h := range header {
		head = append(head, h...)
		head = append(head, "\r\n"...)
	}
	head = append(head, "Content-Length: "...)
	return &client{addr: addr, head: head, timeout: timeout}
}

// post sends body and returns the answer's status and body. The connection is
// dialled on first use, kept while the server keeps it, and closed after any
// error, so the next post starts on a new one.
func (c *client) post(body []byte) (int, []byte, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
		if err != nil {
			return 0, nil, err
		}
		c.conn = conn
		if c.r == nil {
			c.r = bufio.NewReaderSize(conn, 4096)
		} else {
			c.r.Reset(conn)
		}
	}
	c.out = append(c.out[:0], c.head...)
	c.out = strconv.AppendInt(c.out, int64(len(body)), 10)
	c.out = append(c.out, "\r\n\r\n"...)
	c.out = append(c.out, body...)
	status, keep, err := c.exchange()
	if err != nil || !keep {
		c.close()
	}
	return status, c.body, err
}

func (c *client) exchange() (status int, keep bool, err error) {
	if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, false, err
	}
	if _, err := c.conn.Write(c.out); err != nil {
		return 0, false, err
	}
	status, keep, err = c.readResponse()
	if err != nil {
		return status, false, fmt.Errorf("answer from %s: %w", c.addr, err)
	}
	return status, keep, nil
}

func (c *client) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// readResponse reads one answer into c.body.
func (c *client) readResponse() (status int, keep bool, err error) {
	line, err := c.line()
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, fmt.Errorf("malformed status line %.80q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil || status < 100 {
		return 0, false, fmt.Errorf("malformed status line %.80q", line)
	}
	keep = line[7] == '1'
	length, chunked := -1, false
	for {
		line, err := c.line()
		if err != nil {
			return status, false, err
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return status, false, fmt.Errorf("malformed header %.80q", line)
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 0 || n > maxBody {
				return status, false, fmt.Errorf("Content-Length %.40q: not a length up to %d", v, maxBody)
			}
			length = n
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(v, []byte("chunked")) {
				return status, false, fmt.Errorf("Transfer-Encoding %.40q is not chunked", v)
			}
			chunked = true
		case bytes.EqualFold(k, []byte("Connection")):
			if bytes.EqualFold(v, []byte("close")) {
				keep = false
			}
		}
	}
	c.body = c.body[:0]
	switch {
	case status < 200 || status == 204 || status == 304:
		if status < 200 {
			return status, false, fmt.Errorf("informational status %d", status)
		}
		return status, keep, nil
	case chunked:
		return status, keep, c.chunks()
	case length >= 0:
		c.body = slices.Grow(c.body, length)[:length]
		_, err := io.ReadFull(c.r, c.body)
		return status, keep, err
	default:
		return status, false, errors.New("an answer with neither Content-Length nor chunked encoding")
	}
}

// chunks reads a chunked body and its trailer into c.body.
func (c *client) chunks() error {
	for {
		line, err := c.line()
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 32)
		if err != nil || n < 0 || len(c.body)+int(n) > maxBody {
			return fmt.Errorf("chunk size %.40q: not a size that keeps the body within %d bytes", line, maxBody)
		}
		if n == 0 {
			for { // the trailer, up to an empty line
				line, err := c.line()
				if err != nil {
					return err
				}
				if len(line) == 0 {
					return nil
				}
			}
		}
		start := len(c.body)
		c.body = slices.Grow(c.body, int(n))[:start+int(n)]
		if _, err := io.ReadFull(c.r, c.body[start:]); err != nil {
			return err
		}
		if end, err := c.line(); err != nil || len(end) != 0 {
			return fmt.Errorf("chunk of %d bytes not followed by CRLF (%v)", n, err)
		}
	}
}

// line reads one line without its CRLF; it is valid until the next read.
func (c *client) line() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("a line longer than 4096 bytes")
		}
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return bytes.TrimSuffix(line[:len(line)-1], []byte("\r")), nil
}
