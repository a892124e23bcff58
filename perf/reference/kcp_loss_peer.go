// kcp-loss-peer: the KCP side of perf/loss_compare, on Debian's kcp-go
// (golang-github-xtaci-kcp-dev), built offline from /usr/share/gocode.
//
//	kcp-loss-peer recv --listen HOST:PORT [--mode normal|nodelay] [--timeout S]
//	kcp-loss-peer send --connect HOST:PORT --workload game|bulk [--hz N] [--duration S]
//	                   [--warmup S] [--size B] [--bytes N] [--channels N] [--mode normal|nodelay]
//
// The message format, the receiver's report and the ending handshake are the ones
// perf/loss_peer.cpp and perf/reference/enet_loss_peer.c use (perf/README.md, "Latency under
// loss"). KCP has no channels: the channel number rides in the message and every channel
// shares the one session, as a KCP application would. No FEC and no encryption, so the bytes
// on the wire are KCP's own.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	kcp "github.com/xtaci/kcp-go"
	"golang.org/x/sys/unix"
)

const (
	headerBytes = 16
	kindData    = 0
	kindEnd     = 1
	kindWarmup  = 2 // delivered and checked, not timed
)

// CLOCK_MONOTONIC, the clock the C and C++ peers stamp with: sender and receiver run on one
// machine, so a receiver's now minus the stamp is the one-way delivery latency.
func nowNs() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "kcp-loss-peer: "+format+"\n", a...)
	os.Exit(1)
}

func configure(s *kcp.UDPSession, mode string, window int) {
	switch mode {
	case "normal":
		s.SetNoDelay(0, 40, 0, 0) // KCP's documented normal mode
	case "nodelay":
		s.SetNoDelay(1, 10, 2, 1) // KCP's fast mode: nodelay, 10 ms tick, resend after 2, no cwnd
	default:
		fail("--mode must be normal or nodelay, not %q", mode)
	}
	s.SetWindowSize(window, window)
	s.SetMtu(1400)
	s.SetStreamMode(false)
	_ = s.SetReadBuffer(4 << 20)
	_ = s.SetWriteBuffer(4 << 20)
}

type report struct {
	Stack        string   `json:"stack"`
	Received     uint64   `json:"received"`
	Expected     uint64   `json:"expected"`
	InOrder      bool     `json:"in_order"`
	Bytes        uint64   `json:"bytes"`
	FirstSendNs  uint64   `json:"first_send_ns"`
	LastRecvNs   uint64   `json:"last_recv_ns"`
	LatenciesUs  []uint32 `json:"latencies_us"`
	OrderErrors  uint64   `json:"order_errors"`
	TimedOut     bool     `json:"timed_out"`
	ChannelsDone int      `json:"channels_done"`
}

func recv(listen, mode string, window int, timeout float64) {
	ln, err := kcp.ListenWithOptions(listen, nil, 0, 0)
	if err != nil {
		fail("listen %s: %v", listen, err)
	}
	_ = ln.SetReadBuffer(4 << 20)
	fmt.Printf("listening %s\n", ln.Addr().String())
	deadline := time.Now().Add(time.Duration(timeout * float64(time.Second)))
	_ = ln.SetDeadline(deadline)
	s, err := ln.AcceptKCP()
	if err != nil {
		fail("accept: %v", err)
	}
	configure(s, mode, window)
	_ = s.SetReadDeadline(deadline)
	rep := report{Stack: "kcp-" + mode, InOrder: true, LatenciesUs: []uint32{}}
	next := map[uint8]uint32{}
	ends := map[uint8]bool{}
	var expected uint64
	var channels int = -1
	buf := make([]byte, 1<<16)
	for channels < 0 || len(ends) < channels {
		if _, err := io.ReadFull(s, buf[:headerBytes]); err != nil {
			rep.TimedOut = true
			break
		}
		size := int(binary.LittleEndian.Uint16(buf[6:8]))
		if size < headerBytes || size > len(buf) {
			fail("bad message size %d", size)
		}
		if _, err := io.ReadFull(s, buf[headerBytes:size]); err != nil {
			rep.TimedOut = true
			break
		}
		now := nowNs()
		seq := binary.LittleEndian.Uint32(buf[0:4])
		ch, kind := buf[4], buf[5]
		stamp := binary.LittleEndian.Uint64(buf[8:16])
		if kind == kindEnd {
			// An end message carries, in its sequence field, how many data messages its
			// channel sent, and in its channel count field the number of channels.
			ends[ch] = true
			channels = int(buf[16])
			expected += uint64(seq)
			if next[ch] != seq {
				rep.InOrder = false
			}
			continue
		}
		if seq != next[ch] {
			rep.InOrder = false
			rep.OrderErrors++
		}
		next[ch] = seq + 1
		if rep.Received == 0 || stamp < rep.FirstSendNs {
			rep.FirstSendNs = stamp
		}
		rep.Received++
		rep.Bytes += uint64(size)
		rep.LastRecvNs = now
		if kind != kindWarmup {
			rep.LatenciesUs = append(rep.LatenciesUs, uint32((now-stamp)/1000))
		}
	}
	rep.Expected = expected
	rep.ChannelsDone = len(ends)
	if rep.Received != rep.Expected {
		rep.InOrder = false
	}
	// Tell the sender it may stop; it leaves after this byte or its own timeout.
	_, _ = s.Write([]byte{0xd0})
	time.Sleep(time.Second)
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	s.Close()
	ln.Close()
}

func send(connect, mode string, window int, workload string, hz, duration, warmup float64,
	size, total, channels int, timeout float64) {
	s, err := kcp.DialWithOptions(connect, nil, 0, 0)
	if err != nil {
		fail("dial %s: %v", connect, err)
	}
	configure(s, mode, window)
	if size < headerBytes+1 || size > 65535 {
		fail("--size must be %d..65535", headerBytes+1)
	}
	msg := make([]byte, size)
	seqs := make([]uint32, channels)
	put := func(ch int, kind byte) {
		binary.LittleEndian.PutUint32(msg[0:4], seqs[ch])
		msg[4], msg[5] = byte(ch), kind
		binary.LittleEndian.PutUint16(msg[6:8], uint16(size))
		msg[16] = byte(channels)
		binary.LittleEndian.PutUint64(msg[8:16], nowNs())
		if _, err := s.Write(msg); err != nil {
			fail("write: %v", err)
		}
	}
	switch workload {
	case "game":
		period := time.Duration(float64(time.Second) / hz)
		warm := int(warmup * hz)
		ticks := warm + int(duration*hz)
		start := time.Now()
		for t := 0; t < ticks; t++ {
			time.Sleep(time.Until(start.Add(time.Duration(t) * period)))
			kind := byte(kindData)
			if t < warm {
				kind = kindWarmup
			}
			for ch := 0; ch < channels; ch++ {
				put(ch, kind)
				seqs[ch]++
			}
		}
	case "bulk":
		for sent := 0; sent < total; sent += size {
			ch := (sent / size) % channels
			put(ch, kindData)
			seqs[ch]++
		}
	default:
		fail("--workload must be game or bulk")
	}
	for ch := 0; ch < channels; ch++ {
		put(ch, kindEnd)
	}
	_ = s.SetReadDeadline(time.Now().Add(time.Duration(timeout * float64(time.Second))))
	one := make([]byte, 1)
	if _, err := io.ReadFull(s, one); err != nil {
		fail("no word from the receiver: %v", err)
	}
	fmt.Printf("sent %d\n", seqs[0])
	s.Close()
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "send" && os.Args[1] != "recv") {
		fmt.Fprintln(os.Stderr, "usage: kcp-loss-peer send|recv [flags] (see the source's header)")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "receiver address")
	connect := fs.String("connect", "", "receiver (or proxy) address")
	mode := fs.String("mode", "normal", "normal or nodelay")
	window := fs.Int("window", 128, "send and receive window, segments")
	workload := fs.String("workload", "game", "game or bulk")
	hz := fs.Float64("hz", 60, "game ticks per second")
	duration := fs.Float64("duration", 10, "game seconds measured")
	warmup := fs.Float64("warmup", 1, "game seconds sent first and not timed")
	size := fs.Int("size", 64, "message bytes, header included")
	total := fs.Int("bytes", 4<<20, "bulk bytes")
	channels := fs.Int("channels", 2, "channels")
	timeout := fs.Float64("timeout", 120, "give up after this many seconds")
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	if *channels < 1 || *channels > 255 {
		fmt.Fprintln(os.Stderr, "kcp-loss-peer: --channels must be 1..255")
		os.Exit(2)
	}
	if os.Args[1] == "recv" {
		recv(*listen, *mode, *window, *timeout)
	} else {
		if *connect == "" {
			fmt.Fprintln(os.Stderr, "kcp-loss-peer: send needs --connect")
			os.Exit(2)
		}
		send(*connect, *mode, *window, *workload, *hz, *duration, *warmup, *size, *total, *channels,
			*timeout)
	}
}
