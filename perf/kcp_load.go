// Load for perf/kcp_compare.py: N kcp-go client sessions (Debian's kcp-go, one UDP socket
// each, as kcp-go dials) against a KCP echo server. Built offline by the script.
//
// Prints one line per phase boundary, which the script timestamps against the server's CPU:
//
//	connected N          every session got one echo back
//	idle_start / idle_end   sessions open, no traffic, for -idle seconds
//	load_start / load_end echoes=E   each session sends 64 bytes and waits for the echo, again
//	                              and again, for -load seconds (closed loop)
package main

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	kcp "github.com/xtaci/kcp-go"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "server")
	sessions := flag.Int("sessions", 1000, "client sessions")
	idle := flag.Float64("idle", 3, "idle seconds")
	load := flag.Float64("load", 5, "load seconds")
	flag.Parse()

	conns := make([]*kcp.UDPSession, *sessions)
	var wg sync.WaitGroup
	var failed int64
	sem := make(chan struct{}, 256) // dial in waves: the server's accept queue is bounded
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := kcp.DialWithOptions(*addr, nil, 0, 0)
			if err != nil {
				atomic.AddInt64(&failed, 1)
				return
			}
			// A slower tick than the servers' (10 ms) keeps the load side's own cost down.
			s.SetNoDelay(1, 20, 2, 1)
			s.SetWindowSize(128, 128)
			s.SetDeadline(time.Now().Add(60 * time.Second))
			buf := make([]byte, 256)
			if _, err := s.Write(make([]byte, 64)); err != nil {
				atomic.AddInt64(&failed, 1)
				return
			}
			if _, err := s.Read(buf); err != nil {
				atomic.AddInt64(&failed, 1)
				return
			}
			conns[i] = s
		}(i)
	}
	wg.Wait()
	if failed != 0 {
		fmt.Fprintf(os.Stderr, "kcp_load: %d sessions failed to connect\n", failed)
		os.Exit(1)
	}
	fmt.Printf("connected %d\n", *sessions)
	fmt.Println("idle_start")
	time.Sleep(time.Duration(*idle * float64(time.Second)))
	fmt.Println("idle_end")

	var echoes int64
	stop := time.Now().Add(time.Duration(*load * float64(time.Second)))
	fmt.Println("load_start")
	for _, s := range conns {
		wg.Add(1)
		go func(s *kcp.UDPSession) {
			defer wg.Done()
			msg := make([]byte, 64)
			buf := make([]byte, 256)
			s.SetDeadline(stop.Add(10 * time.Second))
			for time.Now().Before(stop) {
				if _, err := s.Write(msg); err != nil {
					return
				}
				if _, err := s.Read(buf); err != nil {
					return
				}
				atomic.AddInt64(&echoes, 1)
			}
		}(s)
	}
	wg.Wait()
	fmt.Printf("load_end echoes=%d\n", echoes)
	for _, s := range conns {
		s.Close()
	}
}
