package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// Every command runs in this one test process: none may switch its
// collector off (startupGC), or the rest of the suite would run without.
func TestMain(m *testing.M) {
	tuneStartupGC = false
	os.Exit(m.Run())
}

// startupGC switches the collector off below a 1 GiB heap, unless GOGC or
// GOMEMLIMIT is set, and its restore function puts the settings back.
func TestStartupGC(t *testing.T) {
	tuneStartupGC = true
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() {
		tuneStartupGC = false
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
		restore := startupGC()
		if got := debug.SetGCPercent(-1); got != tc.wantPercent {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: GC percent %d, want %d", tc.gogc, tc.memlimit, got, tc.wantPercent)
		}
		debug.SetGCPercent(tc.wantPercent)
		if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: memory limit %d, want %d", tc.gogc, tc.memlimit, got, tc.wantLimit)
		}
		restore()
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: GC percent %d after restore, want 100", tc.gogc, tc.memlimit, got)
		}
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: memory limit %d after restore, want none", tc.gogc, tc.memlimit, got)
		}
	}
}
