package conformance

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

func TestFamily(t *testing.T) {
	tests := []struct{ id, category, want string }{
		{"agentdojo-banking-user_task_0-injection_task_1-x-s3", "", "agentdojo/banking"},
		{"agentdojo-slack-user_task_2-s1", "", "agentdojo/slack"},
		{"injecagent-dh-base-GmailReadEmail-AugustSmartLockUnlockDoor", "", "injecagent/dh"},
		{"injecagent-ds2-enhanced-U-A", "", "injecagent/ds2"},
		{"injecagent-benign-ds1-U-A", "", "injecagent/benign-ds1"},
		{"injecagent-benign-user-EvernoteManagerSearchNotes", "", "injecagent/benign-user"},
		{"openparallax-C1-BASIC-001", "direct_injection", "direct_injection"},
		{"mine-1", "", "mine"},
		{"solo", "", "solo"},
		{"", "", "other"},
	}
	for _, tt := range tests {
		if got := Family(tt.id, tt.category); got != tt.want {
			t.Errorf("Family(%q, %q) = %q, want %q", tt.id, tt.category, got, tt.want)
		}
	}
}

func newTestEngine(t *testing.T) *engine.Engine {
	t.Helper()
	e, err := engine.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestScoreLabels(t *testing.T) {
	f, err := os.Open("testdata/labels.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ScoreLabels(context.Background(), newTestEngine(t), f, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []Counts{
		{Label: "attack", Total: 3, Allowed: 1, Escalated: 1, Pending: 1},
		{Label: "benign", Total: 2, Allowed: 1, Denied: 1},
	}
	if !reflect.DeepEqual(r.Labels, want) {
		t.Fatalf("labels %+v, want %+v", r.Labels, want)
	}
	if r.AttacksNotAllowedPct != 66.7 || r.BenignAllowedPct != 50 || len(r.Invalid) != 0 {
		t.Fatalf("headline %.1f%% / %.1f%%, invalid %v", r.AttacksNotAllowedPct, r.BenignAllowedPct, r.Invalid)
	}
	var fams []string
	for _, c := range r.Families {
		fams = append(fams, c.Family+" "+c.Label)
	}
	if w := []string{"agentdojo/banking attack", "agentdojo/banking benign", "direct_injection attack", "injecagent/benign-dh benign", "injecagent/dh attack"}; !reflect.DeepEqual(fams, w) {
		t.Fatalf("families %q, want %q", fams, w)
	}
	for _, write := range []func(*bytes.Buffer, *LabelReport) error{
		func(b *bytes.Buffer, r *LabelReport) error { return WriteLabelsText(b, r) },
		func(b *bytes.Buffer, r *LabelReport) error { return WriteLabelsJSON(b, r) },
	} {
		var b bytes.Buffer
		if err := write(&b, r); err != nil || b.Len() == 0 {
			t.Fatalf("write: %v", err)
		}
	}
}

func TestScoreLabelsInvalidLines(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "labels-invalid.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ScoreLabels(context.Background(), newTestEngine(t), f, 1)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, e := range r.Invalid {
		lines = append(lines, e.Line)
	}
	if !reflect.DeepEqual(lines, []int{3, 4, 5}) || r.Labels[0].Total != 1 {
		t.Fatalf("invalid lines %v (%+v), attacks %d; want [3 4 5], 1", lines, r.Invalid, r.Labels[0].Total)
	}
}
