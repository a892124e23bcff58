// The real KCP peer for tests/interop: Debian's kcp-go (golang-github-xtaci-kcp-dev), built
// offline with GO111MODULE=off GOPATH=/usr/share/gocode by run_kcp_interop.py.
//
//	kcp_go_peer -connect ADDR -mode msg|stream [-count N] [-fec]   client: checks the echoes
//	kcp_go_peer -listen ADDR [-fec]                                  echo server
//
// Exit status 0 only when every echo matched exactly, in order.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	kcp "github.com/xtaci/kcp-go"
)

func payload(i uint32, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(int(i)*131 + j*7)
	}
	if n >= 4 {
		binary.LittleEndian.PutUint32(b, i)
	}
	return b
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "kcp_go_peer: "+format+"\n", a...)
	os.Exit(1)
}

func shards(fec bool) (int, int) {
	if fec {
		return 10, 3
	}
	return 0, 0
}

func tune(s *kcp.UDPSession, stream bool) {
	// The fast profile kcp-go's own tools use; the test bounds wall time by deadlines below.
	s.SetNoDelay(1, 10, 2, 1)
	s.SetWindowSize(128, 128)
	s.SetStreamMode(stream)
}

func client(addr, mode string, count int, fec, big bool) {
	ds, ps := shards(fec)
	s, err := kcp.DialWithOptions(addr, nil, ds, ps)
	if err != nil {
		fail("dial: %v", err)
	}
	defer s.Close()
	tune(s, mode == "stream")
	s.SetDeadline(time.Now().Add(90 * time.Second))
	size := func(i int) int { return 8 + (i*37)%300 }
	werr := make(chan error, 1)
	// At most 1,000 messages ahead of the reader: kcp-go acknowledges what it has not read
	// yet, so an unbounded writer makes the echo server hold the whole run.
	ahead := make(chan struct{}, 1000)
	go func() {
		for i := 0; i < count; i++ {
			ahead <- struct{}{}
			if _, err := s.Write(payload(uint32(i), size(i))); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	buf := make([]byte, 1<<17)
	if mode == "stream" {
		// Stream mode reads the whole echo at the end; the bound does not apply.
		go func() {
			for range ahead {
			}
		}()
		var want []byte
		for i := 0; i < count; i++ {
			want = append(want, payload(uint32(i), size(i))...)
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(s, got); err != nil {
			fail("stream read: %v", err)
		}
		if !bytes.Equal(got, want) {
			fail("stream: echoed bytes differ")
		}
	} else {
		for i := 0; i < count; i++ {
			n, err := s.Read(buf)
			if err != nil {
				fail("message %d: %v", i, err)
			}
			if !bytes.Equal(buf[:n], payload(uint32(i), size(i))) {
				fail("message %d: got %d bytes, want %d (out of order or damaged)", i, n, size(i))
			}
			<-ahead
		}
		// One message the server fragments (frg 14..0): kcp-go hands it over in one Read.
		if big {
			if _, err := s.Write([]byte("BIG 20000")); err != nil {
				fail("write: %v", err)
			}
			n, err := s.Read(buf)
			if err != nil || n != 20000 || !bytes.Equal(buf[:n], payload(20000, 20000)) {
				fail("fragmented reply: %d bytes, err %v", n, err)
			}
		}
		// A write above the MSS, which kcp-go splits into segments of its own (frg 0 each).
		big := payload(7777, 6000)
		if _, err := s.Write(big); err != nil {
			fail("write: %v", err)
		}
		got := make([]byte, len(big))
		if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, big) {
			fail("large write echo differs (err %v)", err)
		}
	}
	if err := <-werr; err != nil {
		fail("writer: %v", err)
	}
	fmt.Printf("ok mode=%s count=%d fec=%v\n", mode, count, fec)
}

func server(addr string, fec bool) {
	ds, ps := shards(fec)
	l, err := kcp.ListenWithOptions(addr, nil, ds, ps)
	if err != nil {
		fail("listen: %v", err)
	}
	fmt.Printf("listening %s\n", l.Addr().String())
	os.Stdout.Sync()
	for {
		s, err := l.AcceptKCP()
		if err != nil {
			fail("accept: %v", err)
		}
		tune(s, false)
		go func(s *kcp.UDPSession) {
			defer s.Close()
			buf := make([]byte, 1<<17)
			for {
				n, err := s.Read(buf)
				if err != nil {
					return
				}
				if _, err := s.Write(buf[:n]); err != nil {
					return
				}
			}
		}(s)
	}
}

func main() {
	connect := flag.String("connect", "", "client: server address")
	listen := flag.String("listen", "", "server: address to listen on")
	mode := flag.String("mode", "msg", "client: msg or stream")
	count := flag.Int("count", 10000, "client: messages to send")
	fec := flag.Bool("fec", false, "kcp-go FEC framing, 10 data + 3 parity shards")
	big := flag.Bool("big", true, "client: ask for one 20000-byte reply (\"BIG 20000\"), which a plain echo server does not answer")
	flag.Parse()
	switch {
	case *connect != "":
		client(*connect, *mode, *count, *fec, *big)
	case *listen != "":
		server(*listen, *fec)
	default:
		fail("need -connect or -listen")
	}
}
