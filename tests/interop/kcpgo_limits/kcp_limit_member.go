// kcp_limit_member: one kcp-go member of a tern-relay room for run_relay_kcp_limits.py;
// Debian's kcp-go, built offline like kcpgo/kcp_go_peer.go.
//
//	kcp_limit_member -relay ADDR -room R [-send-window W] [-write-timeout-ms MS]
//
// Its session's first message is "join:R". It prints "joined", then reads lines on stdin:
// "send N" writes N messages (seq u32 LE, then filler), each Write allowed write-timeout-ms,
// and prints "wrote K" (K < N when a write timed out: kcp-go blocks a write while what waits
// to be acknowledged fills its send window or the relay's advertised window); "count" prints
// "received K"; "quit" prints
// "received K in order" (or "received K ERRORS" with the errors on stderr) and exits.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	kcp "github.com/xtaci/kcp-go"
)

func main() {
	relay := flag.String("relay", "", "tern-relay's KCP address")
	room := flag.Int("room", 1, "room to join")
	sendWindow := flag.Int("send-window", 128, "kcp-go's send window (segments)")
	writeTimeout := flag.Int("write-timeout-ms", 30000, "how long one Write may block")
	flag.Parse()

	s, err := kcp.DialWithOptions(*relay, nil, 0, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dial: %v\n", err)
		os.Exit(2)
	}
	s.SetNoDelay(1, 10, 2, 1)
	s.SetWindowSize(*sendWindow, 128)
	if _, err := s.Write([]byte(fmt.Sprintf("join:%d", *room))); err != nil {
		fmt.Fprintf(os.Stderr, "join: %v\n", err)
		os.Exit(2)
	}
	fmt.Println("joined")

	var mu sync.Mutex
	received := uint32(0)
	var errs []string
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, err := s.Read(buf)
			if err != nil {
				return
			}
			mu.Lock()
			if n < 8 {
				errs = append(errs, fmt.Sprintf("a %d-byte message", n))
			} else if seq := binary.LittleEndian.Uint32(buf); seq != received {
				errs = append(errs, fmt.Sprintf("got seq %d, expected %d", seq, received))
			}
			received++
			mu.Unlock()
		}
	}()

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 1 && f[0] == "quit" {
			break
		}
		if len(f) == 1 && f[0] == "count" {
			mu.Lock()
			fmt.Printf("received %d\n", received)
			mu.Unlock()
			continue
		}
		if len(f) == 2 && f[0] == "send" {
			n, _ := strconv.Atoi(f[1])
			wrote := 0
			for ; wrote < n; wrote++ {
				b := make([]byte, 8+(wrote*37)%200)
				binary.LittleEndian.PutUint32(b, uint32(wrote))
				binary.LittleEndian.PutUint32(b[4:], 0x6b637021)
				s.SetWriteDeadline(time.Now().Add(time.Duration(*writeTimeout) * time.Millisecond))
				if _, err := s.Write(b); err != nil {
					break
				}
			}
			fmt.Printf("wrote %d\n", wrote)
		}
	}
	mu.Lock()
	state := "in order"
	if len(errs) != 0 {
		state = "ERRORS"
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, e)
		}
	}
	fmt.Printf("received %d %s\n", received, state)
	mu.Unlock()
	s.Close()
}
