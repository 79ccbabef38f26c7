package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// Every command runs in this one test process: none may switch its
// collector off (oneShotGC), or the rest of the suite would run without.
func TestMain(m *testing.M) {
	tuneOneShotGC = false
	os.Exit(m.Run())
}

// oneShotGC switches the collector off below a 1 GiB heap, unless GOGC or
// GOMEMLIMIT is set.
func TestOneShotGC(t *testing.T) {
	tuneOneShotGC = true
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() {
		tuneOneShotGC = false
		debug.SetGCPercent(prev)
		debug.SetMemoryLimit(math.MaxInt64)
	})
	for _, tc := range []struct {
		gogc, memlimit string
		wantPercent    int
		wantLimit      int64
	}{
		{"", "", -1, 1 << 30},
		{"200", "", 100, math.MaxInt64},
		{"", "2GiB", 100, math.MaxInt64},
	} {
		for name, v := range map[string]string{"GOGC": tc.gogc, "GOMEMLIMIT": tc.memlimit} {
			t.Setenv(name, v) // restored after the test
			if v == "" {
				os.Unsetenv(name)
			}
		}
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		oneShotGC()
		if got := debug.SetGCPercent(100); got != tc.wantPercent {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: GC percent %d, want %d", tc.gogc, tc.memlimit, got, tc.wantPercent)
		}
		if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: memory limit %d, want %d", tc.gogc, tc.memlimit, got, tc.wantLimit)
		}
	}
}
