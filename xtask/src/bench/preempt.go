// Workload for `cargo xtask bench` (built with `go build` when a Go toolchain
// is installed): busy goroutines that the runtime's sysmon preempts with
// SIGURG every ~10 ms, plus the garbage collector's own preemptions.
//
//	gopreempt GOROUTINES MILLIONS
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

var sink [64]uint64

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gopreempt GOROUTINES MILLIONS")
		os.Exit(2)
	}
	n, err1 := strconv.Atoi(os.Args[1])
	m, err2 := strconv.Atoi(os.Args[2])
	if err1 != nil || err2 != nil || n < 1 || n > 64 {
		fmt.Fprintln(os.Stderr, "GOROUTINES in 1..64, MILLIONS a number")
		os.Exit(2)
	}
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			// A loop without calls: only an asynchronous (signal)
			// preemption can take the thread from it.
			x := uint64(g)
			for i := 0; i < m*1000000; i++ {
				x = x*6364136223846793005 + 1442695040888963407
			}
			sink[g] = x
		}(g)
	}
	wg.Wait()
}
