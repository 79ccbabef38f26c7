package audit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

const crashEnv = "TOOLGATE_AUDIT_CRASH_WRITER" // "dbpath keypath" when this binary is the child

// TestCrashWriter is the child of TestKilledWriter: it appends forever,
// printing each committed seq, until it is killed.
func TestCrashWriter(t *testing.T) {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		t.Skip("only runs as TestKilledWriter's child")
	}
	var dbPath, keyPath string
	if _, err := fmt.Sscan(spec, &dbPath, &keyPath); err != nil {
		t.Fatal(err)
	}
	signer, err := LoadSigner(keyPath, "")
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dbPath)
	l, err := Open(context.Background(), db, signer, Options{CheckpointEvery: 7})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		e, err := l.Append(context.Background(), record(i))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(e.Seq)
	}
}

// TestKilledWriter kills a real writer process with SIGKILL mid-stream: the
// log must verify, holding at least every entry the writer saw committed.
func TestKilledWriter(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("child")
	}
	dir := t.TempDir()
	keyPath, pubPath, err := GenerateKey(dir, KeyEd25519, "")
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "toolgate.db")
	for round, kill := range []int64{40, 95} { // the second writer continues the first one's chain
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dbPath+" "+keyPath)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var last int64
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			n, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil {
				continue // test framework output
			}
			last = n
			if last >= kill {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if last < kill {
			t.Fatalf("round %d: the writer stopped at %d before it was killed", round, last)
		}
		v, err := LoadVerifier(pubPath)
		if err != nil {
			t.Fatal(err)
		}
		db := openDB(t, dbPath)
		rep := mustVerify(t, db, v)
		if !rep.OK || rep.Entries < last {
			t.Fatalf("round %d: after SIGKILL at seq %d: %+v", round, last, rep)
		}
		t.Logf("round %d: killed after seq %d; the log verifies with %d entries", round, last, rep.Entries)
		db.Close()
	}
}
