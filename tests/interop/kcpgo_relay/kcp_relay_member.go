// kcp_relay_member: kcp-go members of one tern-relay room for the mixed-room test
// (run_relay_mixed.py); Debian's kcp-go, built offline like kcpgo/kcp_go_peer.go.
//
//	kcp_relay_member -relay ADDR -room R -messages N -ids 4,5 -room-ids 0,1,2,3,4,5 [-conv-room]
//
// Each id is one KCP session (kcp-go picks its conv) whose first message is "join:R" (the
// relay's room_rule "join"); with -conv-room the session's conv is R (room_rule "conv") and its
// first message is "hello", which the relay relays to whoever is in the room by then and every
// member ignores. It prints "joined" once every session has sent that first message, and reads
// lines on stdin: "go" makes
// every session send N messages (id u32 LE, seq u32 LE, filler), "quit" reports one line per
// session and exits 0, or 1 if any copy came twice, out of order, from outside the room, or
// is missing. It prints "done" once every session has N messages from every other member.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	kcp "github.com/xtaci/kcp-go"
)

func parseIDs(s string) []uint32 {
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bad id %q\n", f)
			os.Exit(2)
		}
		out = append(out, uint32(v))
	}
	return out
}

type member struct {
	id     uint32
	s      *kcp.UDPSession
	mu     sync.Mutex
	next   map[uint32]uint32
	copies int
	errors []string
}

func main() {
	relay := flag.String("relay", "", "tern-relay's KCP address")
	room := flag.Int("room", 1, "room to join")
	messages := flag.Int("messages", 200, "messages each member sends")
	ids := flag.String("ids", "", "this process's member ids")
	roomIDs := flag.String("room-ids", "", "every member id of the room")
	convRoom := flag.Bool("conv-room", false, "the conv names the room (room_rule conv)")
	flag.Parse()
	mine := parseIDs(*ids)
	all := parseIDs(*roomIDs)

	var members []*member
	for _, id := range mine {
		var s *kcp.UDPSession
		var err error
		if *convRoom {
			raddr, rerr := net.ResolveUDPAddr("udp", *relay)
			conn, lerr := net.ListenUDP("udp4", nil)
			if rerr != nil || lerr != nil {
				fmt.Fprintf(os.Stderr, "socket: %v %v\n", rerr, lerr)
				os.Exit(2)
			}
			s, err = kcp.NewConn3(uint32(*room), raddr, nil, 0, 0, conn)
		} else {
			s, err = kcp.DialWithOptions(*relay, nil, 0, 0)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dial: %v\n", err)
			os.Exit(2)
		}
		s.SetNoDelay(1, 10, 2, 1)
		s.SetWindowSize(128, 256)
		m := &member{id: id, s: s, next: map[uint32]uint32{}}
		for _, a := range all {
			if a != id {
				m.next[a] = 0
			}
		}
		first := []byte(fmt.Sprintf("join:%d", *room))
		if *convRoom {
			first = []byte("hello")
		}
		if _, err := s.Write(first); err != nil {
			fmt.Fprintf(os.Stderr, "join: %v\n", err)
			os.Exit(2)
		}
		members = append(members, m)
	}
	fmt.Println("joined")

	complete := func(m *member) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, n := range m.next {
			if n < uint32(*messages) {
				return false
			}
		}
		return true
	}
	for _, m := range members {
		go func(m *member) {
			buf := make([]byte, 1<<16)
			for {
				n, err := m.s.Read(buf)
				if err != nil {
					return
				}
				if n == 5 && string(buf[:5]) == "hello" {
					continue // a -conv-room member's first message
				}
				m.mu.Lock()
				m.copies++
				if n < 8 {
					m.errors = append(m.errors, fmt.Sprintf("a %d-byte copy", n))
				} else {
					from := binary.LittleEndian.Uint32(buf)
					seq := binary.LittleEndian.Uint32(buf[4:])
					want, ok := m.next[from]
					if !ok {
						m.errors = append(m.errors, fmt.Sprintf("copy from %d, not another member", from))
					} else if seq != want {
						m.errors = append(m.errors, fmt.Sprintf("from %d got seq %d, expected %d", from, seq, want))
						m.next[from] = seq + 1
					} else {
						m.next[from] = want + 1
					}
				}
				m.mu.Unlock()
			}
		}(m)
	}
	go func() {
		for {
			time.Sleep(5 * time.Millisecond)
			all := true
			for _, m := range members {
				all = all && complete(m)
			}
			if all {
				fmt.Println("done")
				return
			}
		}
	}()

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := in.Text()
		if line == "quit" {
			break
		}
		if line == "go" {
			for _, m := range members {
				go func(m *member) {
					for i := 0; i < *messages; i++ {
						size := 8 + (i*37)%200
						b := make([]byte, size)
						for j := range b {
							b[j] = byte(i)
						}
						binary.LittleEndian.PutUint32(b, m.id)
						binary.LittleEndian.PutUint32(b[4:], uint32(i))
						if _, err := m.s.Write(b); err != nil {
							m.mu.Lock()
							m.errors = append(m.errors, fmt.Sprintf("write: %v", err))
							m.mu.Unlock()
							return
						}
					}
				}(m)
			}
		}
	}
	failed := false
	for _, m := range members {
		m.mu.Lock()
		for from, n := range m.next {
			if n != uint32(*messages) {
				m.errors = append(m.errors, fmt.Sprintf("%d of %d from %d", n, *messages, from))
			}
		}
		state := "each in order, once"
		if len(m.errors) != 0 {
			state = "ERRORS"
			failed = true
			for _, e := range m.errors {
				fmt.Fprintf(os.Stderr, "kcp-go client %d: %s\n", m.id, e)
			}
		}
		fmt.Printf("kcp-go client %d: %d copies from %d senders, %s\n", m.id, m.copies, len(m.next), state)
		m.mu.Unlock()
		m.s.Close()
	}
	if failed {
		os.Exit(1)
	}
}
