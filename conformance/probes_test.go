package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// probeFloors are the least share of the project's own probe calls
// (testdata/probes/, see its README) the default policy must get right:
// attacks not allowed and benign calls allowed, in percent. They sit just
// under what the policy scores, so a change that loses detection or blocks
// routine work fails here; a change that improves them should raise them.
var probeFloors = map[string]struct{ attacks, benign float64 }{
	"tuning":  {attacks: 81.3, benign: 73.2},
	"holdout": {attacks: 63, benign: 56}, // scored once, not tuned on: see the README
}

// TestProbeDetection scores each probe set of testdata/probes/ with Tier
// 1 alone, with testdata/probes/registry.json merged over the default
// data, and holds the figures to probeFloors.
func TestProbeDetection(t *testing.T) {
	raw, err := os.ReadFile("../testdata/probes/registry.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(context.Background(), engine.WithData(data))
	if err != nil {
		t.Fatal(err)
	}
	for set, floor := range probeFloors {
		files, err := filepath.Glob(filepath.Join("../testdata/probes", set, "*.jsonl"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no probe files (%v)", set, err)
		}
		var all bytes.Buffer
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
		r, err := ScoreLabels(context.Background(), e, &all, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Invalid) > 0 {
			t.Errorf("%s: invalid lines %+v", set, r.Invalid)
		}
		t.Logf("%s: attacks not allowed %.1f%%, benign allowed %.1f%%", set, r.AttacksNotAllowedPct, r.BenignAllowedPct)
		if r.AttacksNotAllowedPct < floor.attacks || r.BenignAllowedPct < floor.benign {
			t.Errorf("%s: attacks not allowed %.1f%% (floor %.0f%%), benign allowed %.1f%% (floor %.0f%%)",
				set, r.AttacksNotAllowedPct, floor.attacks, r.BenignAllowedPct, floor.benign)
		}
	}
}
