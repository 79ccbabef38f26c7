package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine/scan"
	"github.com/toolgate/toolgate/engine/shell"
	"github.com/toolgate/toolgate/policies"
	"github.com/toolgate/toolgate/schema"
)

// contextText returns n bytes of ordinary untrusted text: e-mails, JSON
// rows and prose, with no injection in it.
func contextText(n int) string {
	const para = "Hi team, the quarterly report is attached. Revenue grew 4% and the new " +
		"dashboard is live at https://dash.example.com/q3?tab=summary. {\"id\": 4821, \"status\": " +
		"\"shipped\", \"owner\": \"maria@example.com\"}. Please review the numbers before Friday; " +
		"commit 9f3c2a1 fixed the rounding bug in the export script.\n"
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(para)
	}
	return sb.String()[:n]
}

func benchRequest(size int) *schema.Request {
	trusted := schema.LevelTrusted
	return &schema.Request{
		Agent:  schema.Agent{ID: "agent_bench", TrustLevel: &trusted},
		Action: schema.Action{Type: "send_email", Arguments: map[string]any{"to": "maria@example.com", "subject": "Q3 numbers", "body": "Revenue grew 4%; see the dashboard."}},
		Context: schema.Context{
			ConversationID: "conv_bench", StepNumber: 2, UserIntent: "send maria@example.com the Q3 numbers",
			Blocks: []schema.Block{
				{Trust: schema.Trusted, Source: "user", Content: "send maria@example.com the Q3 numbers"},
				{Trust: schema.Untrusted, Source: "tool:read_inbox", Content: contextText(size)},
			},
		},
	}
}

var benchSizes = []int{1 << 10, 4 << 10, 16 << 10, 256 << 10}

func sizeName(n int) string { return fmt.Sprintf("context=%dKB", n>>10) }

// BenchmarkEvaluate: one Tier 1 decision through OPA.
func BenchmarkEvaluate(b *testing.B) {
	e := newTestEngine(b)
	ctx := context.Background()
	for _, n := range benchSizes {
		req := benchRequest(n)
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				d, err := e.Evaluate(ctx, req, nil)
				if err != nil || d.Outcome != schema.Allow {
					b.Fatalf("%v %v", d, err)
				}
			}
		})
	}
}

// BenchmarkBaseline: the same checks in plain Go, for the ratio.
func BenchmarkBaseline(b *testing.B) {
	base := newBaseline(b)
	for _, n := range benchSizes {
		req := benchRequest(n)
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if out := base.decide(req); out != schema.Allow {
					b.Fatalf("baseline: %s", out)
				}
			}
		})
	}
}

// BenchmarkEvaluateParallel: decisions per second on every core.
func BenchmarkEvaluateParallel(b *testing.B) {
	e := newTestEngine(b)
	req := benchRequest(4 << 10)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.Evaluate(context.Background(), req, nil); err != nil {
				b.Error(err)
			}
		}
	})
}

// baseline is a plain-Go implementation of the default policy's checks:
// registry, matrix, untrusted flow (patterns, encodings, provenance) and
// dangerous commands, over the same data and scanners.
type baseline struct {
	tools    map[string]struct{ Risk, Category, Approval string }
	matrix   map[string]map[string]string
	patterns *scan.RuleSet
	danger   *scan.RuleSet
}

func newBaseline(tb testing.TB) *baseline {
	read := func(path string, v any) {
		raw, err := fs.ReadFile(policies.FS, path)
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			tb.Fatal(err)
		}
	}
	var reg struct {
		Tools map[string]struct{ Risk, Category, Approval string }
	}
	var cfg struct{ Matrix map[string]map[string]string }
	var pats, dang struct{ Rules []scan.Rule }
	read("toolgate/registry/data.json", &reg)
	read("toolgate/config/data.json", &cfg)
	read("toolgate/patterns/data.json", &pats)
	read("toolgate/danger/data.json", &dang)
	p, err := scan.Compile(pats.Rules)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := scan.Compile(dang.Rules)
	if err != nil {
		tb.Fatal(err)
	}
	return &baseline{tools: reg.Tools, matrix: cfg.Matrix, patterns: p, danger: d}
}

func (b *baseline) decide(req *schema.Request) schema.Outcome {
	tool, ok := b.tools[req.Action.Type]
	if !ok {
		return schema.Deny
	}
	out := schema.Outcome(b.matrix[req.Agent.TrustLevel.String()][tool.Risk])
	var args []scan.Text
	for k, v := range req.Action.Arguments {
		if s, ok := v.(string); ok {
			args = append(args, scan.Text{Where: "action.arguments." + k, Text: s})
		}
	}
	var untrusted []scan.Text
	trusted := []string{req.Context.UserIntent}
	for i, blk := range req.Context.Blocks {
		if blk.Trust == schema.Untrusted {
			untrusted = append(untrusted, scan.Text{Where: fmt.Sprintf("context.blocks[%d].content", i), Text: blk.Content})
		} else {
			trusted = append(trusted, blk.Content)
		}
	}
	if tool.Category == "shell" {
		for _, a := range args {
			for _, c := range shell.Normalize(a.Text) {
				if len(b.danger.Match([]scan.Text{{Where: a.Where, Text: c}})) > 0 {
					return schema.Deny
				}
			}
		}
	}
	if len(untrusted) > 0 && (tool.Risk == "high" || tool.Risk == "critical") {
		all := append(append([]scan.Text{}, args...), untrusted...)
		var disguised []scan.Text
		for _, u := range untrusted {
			for _, form := range scan.Deobfuscate(u.Text) {
				disguised = append(disguised, scan.Text{Where: u.Where, Text: form})
			}
		}
		if len(b.patterns.Match(all)) > 0 || len(scan.Decode(all)) > 0 || len(b.patterns.Match(disguised)) > 0 ||
			len(scan.Provenance(args, trusted, untrusted)) > 0 {
			if out == schema.Allow {
				out = schema.Escalate
			}
		}
	}
	return out
}
