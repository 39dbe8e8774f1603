package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"
)

// debugHandler serves what a soak or an operator needs to see inside a
// running serve: /debug/vars (goroutines, heap, GC as JSON) and Go's
// /debug/pprof profiles. It is served only on --debug-addr, a loopback
// address of its own, never on the API's listener: profiles show code
// paths and memory, and need no credential to read.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/vars", func(w http.ResponseWriter, r *http.Request) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"goroutines": runtime.NumGoroutine(),
			"heapAlloc":  m.HeapAlloc, "heapInuse": m.HeapInuse, "heapObjects": m.HeapObjects,
			"sys": m.Sys, "numGC": m.NumGC, "pauseTotalNs": m.PauseTotalNs,
		})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// checkDebugAddr refuses a --debug-addr that is not host:port on
// loopback.
func checkDebugAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{msg: fmt.Sprintf("serve: --debug-addr %q: want host:port on loopback, e.g. 127.0.0.1:6060", addr)}
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageError{msg: fmt.Sprintf("serve: --debug-addr %q is not a loopback address: profiles need no credential, so they are served on 127.0.0.1 or ::1 only", addr)}
	}
	return nil
}

// listenDebug opens --debug-addr (checked by checkDebugAddr).
func listenDebug(addr string) (net.Listener, *http.Server, error) {
	if err := checkDebugAddr(addr); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen %s (--debug-addr): %w", addr, err)
	}
	// No write timeout: a CPU profile or a trace runs for its seconds.
	return ln, &http.Server{Handler: debugHandler(), ReadHeaderTimeout: 5 * time.Second}, nil
}
