package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/schema"
	"github.com/toolgate/toolgate/supervisor"
)

// seedApprovals makes a state file holding one pending approval and one that
// is already past its deadline.
func seedApprovals(t *testing.T) (path, pending, stale string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "toolgate.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	q, err := supervisor.OpenQueue(context.Background(), db, supervisor.QueueOptions{Now: clock, Timeout: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	req := schema.Request{
		Agent:   schema.Agent{ID: "agent_abc"},
		Action:  schema.Action{Type: "bash", Arguments: map[string]any{"command": "rm -rf build/"}},
		Context: schema.Context{ConversationID: "conv_1", StepNumber: 3},
	}
	a, err := q.Request(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(-2 * time.Hour)
	req.Context.StepNumber = 1
	b, err := q.Request(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	return path, a.ID, b.ID
}

func TestApprovalsCommands(t *testing.T) {
	t.Setenv("USER", "carol")
	path, pending, stale := seedApprovals(t)
	absent := "apr_AAAAAAAAAAAAAAAAAAAAAA"
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   []string // substrings expected
		stderr   string
		noStdout []string
	}{
		{"list pending", []string{"list"}, exitOK, []string{pending, "agent_abc", "bash", `{"command":"rm -rf build/"}`}, "", []string{stale}},
		{"bad id", []string{"approve", "apr_x"}, exitUsage, nil, "not an approval id", nil},
		{"unknown id", []string{"approve", absent}, exitError, nil, "no approval", nil},
		{"bad status", []string{"list", "--status", "maybe"}, exitUsage, nil, "--status", nil},
		{"expired", []string{"approve", stale}, exitError, nil, "expired", nil},
		{"approve", []string{"approve", pending, "--reason", "build dir only"}, exitOK, []string{pending + " approved by carol"}, "", nil},
		{"second answer", []string{"deny", pending, "--by", "dave"}, exitError, nil, "already approved by carol", nil},
		{"list all", []string{"list", "--status", "all"}, exitOK, []string{pending, stale, "approved", "expired", "carol: build dir only"}, "", nil},
		{"no database", []string{"list", "--db", filepath.Join(t.TempDir(), "none.db")}, exitError, nil, "no state database", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"approvals"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--db") {
				args = append(args, "--db", path)
			}
			var stdout, stderr bytes.Buffer
			code := run(args, strings.NewReader(""), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tc.noStdout {
				if strings.Contains(stdout.String(), s) {
					t.Errorf("stdout has %q:\n%s", s, stdout.String())
				}
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.stderr)
			}
		})
	}
}

func TestApprovalsListJSON(t *testing.T) {
	path, pending, _ := seedApprovals(t)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"approvals", "list", "--db", path, "-o", "json"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var list []supervisor.Approval
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != pending || list[0].Status != supervisor.StatusPending {
		t.Errorf("list: %+v", list)
	}
}
