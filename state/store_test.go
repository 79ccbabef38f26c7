package state

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "toolgate.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenCreatesParentAndUsesWAL(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "toolgate.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("parent mode = %v, want 0700", fi.Mode().Perm())
	}
	var mode string
	if err := s.DB().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk int
	if err := s.DB().QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}
	var version int
	if err := s.DB().QueryRowContext(ctx, "SELECT version FROM schema_migrations WHERE component = 'state'").Scan(&version); err != nil || version != len(migrations) {
		t.Errorf("state version = %d, %v; want %d", version, err, len(migrations))
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
}

func TestOpenRefusesBadFiles(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"garbage bytes", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database\x00\xff", 400)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a SQLite database"},
		{"read-only file", func(t *testing.T, path string) {
			s, err := Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if err := os.Chmod(path, 0o400); err != nil {
				t.Fatal(err)
			}
		}, "read-only"},
		{"a directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"empty path", nil, "empty database path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.setup != nil {
				path = filepath.Join(t.TempDir(), "toolgate.db")
				tt.setup(t, path)
			}
			s, err := Open(context.Background(), path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("error %v does not match ErrUnavailable", err)
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Errorf("error %T is not a *state.Error", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q: want it to say %q and name %q", err, tt.want, path)
			}
		})
	}
}

func TestMigratePerComponent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	v1 := []string{"CREATE TABLE audit_entries (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"}
	v2 := append(v1, "ALTER TABLE audit_entries ADD COLUMN sig TEXT; CREATE INDEX audit_sig ON audit_entries (sig)")
	steps := []struct {
		name    string
		ms      []string
		wantErr string
		version int
	}{
		{"first", v1, "", 1},
		{"again: nothing to do", v1, "", 1},
		{"one more", v2, "", 2},
		{"older binary", v1, "newer toolgate", 2},
		{"bad sql rolls back", append(v2, "CREATE TABLE audit_entries (x)"), "version 3", 2},
	}
	for _, st := range steps {
		err := Migrate(ctx, s.DB(), "audit", st.ms)
		if st.wantErr == "" && err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr)) {
			t.Fatalf("%s: error %v, want %q", st.name, err, st.wantErr)
		}
		var v int
		if err := s.DB().QueryRowContext(ctx, "SELECT version FROM schema_migrations WHERE component = 'audit'").Scan(&v); err != nil || v != st.version {
			t.Fatalf("%s: version %d, %v; want %d", st.name, v, err, st.version)
		}
	}
	// state's own version is untouched.
	var v int
	if err := s.DB().QueryRowContext(ctx, "SELECT version FROM schema_migrations WHERE component = 'state'").Scan(&v); err != nil || v != len(migrations) {
		t.Errorf("state version %d, %v", v, err)
	}
	if err := Migrate(ctx, s.DB(), " ", v1); err == nil {
		t.Error("empty component accepted")
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	s.Close()
	_, _, err := s.Reserve(ctx, request("a", "c", 1, "calculate", nil, ""), ReserveOptions{})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Reserve on a closed store: %v, want ErrUnavailable", err)
	}
	if _, err := s.Agents(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Agents on a closed store: %v, want ErrUnavailable", err)
	}
}

func TestCanceledContextIsUnavailable(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := s.Reserve(ctx, request("a", "c", 1, "calculate", nil, ""), ReserveOptions{})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve with a canceled context: %v, want ErrUnavailable and context.Canceled", err)
	}
}

// Another process holding the write lock past the busy timeout makes the
// store unavailable (the pipeline denies STATE-001), and it recovers once the
// lock is gone.
func TestLockedPastTimeoutIsUnavailable(t *testing.T) {
	old := busyTimeout
	busyTimeout = 100 * time.Millisecond
	defer func() { busyTimeout = old }()
	ctx := context.Background()
	s := openTest(t)
	other, err := sql.Open("sqlite", dsn(s.Path()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Reserve(ctx, request("a", "c", 1, "calculate", nil, ""), ReserveOptions{})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "locked") {
		t.Errorf("Reserve while locked: %v, want ErrUnavailable saying locked", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if res, _, err := s.Reserve(ctx, request("a", "c", 1, "calculate", nil, ""), ReserveOptions{}); err != nil || res == nil {
		t.Errorf("Reserve after the lock is gone: %v", err)
	}
}

// Two stores on one file (as two processes would be) racing for one step:
// exactly one wins, the rest wait on SQLite's lock and see Reserved.
func TestTwoStoresRaceForOneStep(t *testing.T) {
	ctx := context.Background()
	s1 := openTest(t)
	s2, err := Open(ctx, s1.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(s *Store) {
			defer wg.Done()
			res, f, err := s.Reserve(ctx, request("a", "c", 1, "calculate", nil, ""), ReserveOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("Reserve: %v", err)
			} else if res != nil && !f.Conversation.Reserved {
				wins++
			}
		}([]*Store{s1, s2}[i%2])
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d winners, want 1", wins)
	}
}

// TestMigrateRequestLogToMinutes: a file of state version 1 keeps its
// agents' hourly counts when version 2 replaces the log of requests with
// counts per minute.
func TestMigrateRequestLogToMinutes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db, "state", migrations[:1]); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		agent string
		at    time.Time
	}{
		{"a", t0}, {"a", t0.Add(10 * time.Second)}, {"a", t0.Add(20 * time.Minute)}, {"b", t0.Add(59 * time.Second)},
	} {
		if _, err := db.ExecContext(ctx, "INSERT INTO request_log (agent_id, at) VALUES (?, ?)", r.agent, r.at.UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tt := range []struct {
		agent string
		at    time.Time
		want  int
	}{
		{"a", t0.Add(30 * time.Minute), 3},
		{"a", t0.Add(61 * time.Minute), 1},
		{"b", t0.Add(time.Hour), 1},
		{"c", t0, 0},
	} {
		b, err := s.Budget(ctx, tt.agent, tt.at)
		if err != nil {
			t.Fatal(err)
		}
		if b.RequestsLastHour != tt.want {
			t.Errorf("%s at %s: requests_last_hour %d, want %d", tt.agent, tt.at.Format(time.TimeOnly), b.RequestsLastHour, tt.want)
		}
	}
	var tables int
	if err := s.DB().QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name IN ('request_log', 'request_window')").Scan(&tables); err != nil || tables != 0 {
		t.Errorf("old tables left: %d %v", tables, err)
	}
}
