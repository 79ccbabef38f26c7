package server

import (
	"os"
	"runtime/debug"
	"testing"
)

// TuneGC sets GCPercent unless GOGC is set, which wins.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	current := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }

	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC") // t.Setenv restores the original value afterwards
	debug.SetGCPercent(100)
	TuneGC()
	if got := current(); got != GCPercent {
		t.Errorf("without GOGC: GC percent %d, want %d", got, GCPercent)
	}

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // what the runtime did with GOGC=150 at start
	TuneGC()
	if got := current(); got != 150 {
		t.Errorf("with GOGC=150: GC percent %d, want it left at 150", got)
	}
}
