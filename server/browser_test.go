package server_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser starts headless Chromium (Debian's package). Without it the test
// is skipped, unless TOOLGATE_REQUIRE_BROWSER is set (CI, after
// scripts/install-chromium.sh), when it fails.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_BROWSER") == "" {
			t.Skip("chromium is not installed (scripts/install-chromium.sh installs it; TOOLGATE_REQUIRE_BROWSER=1 makes this a failure)")
		}
		t.Fatalf("TOOLGATE_REQUIRE_BROWSER is set but chromium is not installed: %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// TestApprovalsPageInBrowser: two people have the page open; a real click
// in the first approves the agent's waiting request, whose POST /v1/verify
// then returns allow; the second person's later click is told who
// answered first.
func TestApprovalsPageInBrowser(t *testing.T) {
	bctx := browser(t)
	e := newEnv(t, envOptions{})

	// Two separate browser profiles: separate storage, like two people.
	alice, cancelA := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	defer cancelA()
	bob, cancelB := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	defer cancelB()
	for _, p := range []struct {
		ctx  context.Context
		name string
	}{{alice, "alice"}, {bob, "bob"}} {
		if err := chromedp.Do(p.ctx,
			chromedp.Navigate(e.base+"/"),
			chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
			chromedp.SendKeys(css(`#by`), p.name),
		); err != nil {
			t.Fatalf("%s opens the page: %v", p.name, err)
		}
	}

	// The agent asks and waits.
	verdict := make(chan response, 1)
	go func() {
		req := e.request("conv_page", 1, "file_write", map[string]any{"path": "deploy/notes.txt", "content": "ship it"})
		verdict <- e.verify(req, "")
	}()

	card := css(`li.card .tool`)
	if err := chromedp.Do(alice, chromedp.WaitVisible(card)); err != nil {
		t.Fatalf("alice sees the approval: %v", err)
	}
	tool, args, reasons := text(t, alice, card), text(t, alice, css(`li.card .args`)), text(t, alice, css(`li.card .reasons`))
	if err := chromedp.Do(alice, chromedp.Sleep(1100*time.Millisecond)); err != nil { // one countdown tick
		t.Fatal(err)
	}
	countdown := text(t, alice, css(`li.card .countdown`))
	if tool != "file_write" || !strings.Contains(args, "deploy/notes.txt") || !strings.Contains(reasons, "MATRIX-006") {
		t.Errorf("card shows tool %q, args %q, reasons %q", tool, args, reasons)
	}
	if !regexp.MustCompile(`^\d+:\d\d left$`).MatchString(countdown) {
		t.Errorf("countdown %q", countdown)
	}
	if dir := os.Getenv("TOOLGATE_SCREENSHOT_DIR"); dir != "" {
		png, err := chromedp.Run(alice, chromedp.FullScreenshot(100)) // quality 100 is PNG
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "approvals-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Bob's page stops getting live updates (a stalled connection), so he
	// still sees the approval as pending when he clicks.
	if err := chromedp.Do(bob,
		chromedp.WaitVisible(card),
		chromedp.Evaluate[chromedp.Void](`window.toolgate.disconnect()`),
	); err != nil {
		t.Fatalf("bob sees the approval: %v", err)
	}

	if err := chromedp.Do(alice,
		chromedp.SendKeys(css(`li.card .reason`), "checked the path"),
		chromedp.Click(css(`li.card button.approve`)),
		chromedp.WaitVisible(css(`li.card.done`)),
	); err != nil {
		t.Fatalf("alice approves: %v", err)
	}
	status := text(t, alice, css(`li.card .status`))
	if !strings.Contains(status, "approved by alice") {
		t.Errorf("alice's card says %q", status)
	}
	select {
	case r := <-verdict:
		if r.status != http.StatusOK || r.json(t)["decision"] != "allow" || !strings.Contains(string(r.body), "APPROVAL-004") {
			t.Fatalf("the agent's verify: %d %s", r.status, r.body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the agent's verify did not return after the click")
	}

	if err := chromedp.Do(bob,
		chromedp.Click(css(`li.card button.deny`)),
		chromedp.WaitVisible(css(`li.card.done`)),
	); err != nil {
		t.Fatalf("bob denies: %v", err)
	}
	status = text(t, bob, css(`li.card .status`))
	if !strings.Contains(status, "already answered by alice") {
		t.Errorf("bob's card says %q", status)
	}

	// Alice's recent decisions list shows the allow.
	if err := chromedp.Do(alice, chromedp.WaitVisible(css(`#recent tbody td.decision.allow`))); err != nil {
		t.Fatalf("recent decisions: %v", err)
	}
	recent := text(t, alice, css(`#recent tbody`))
	if !strings.Contains(recent, "file_write") || !strings.Contains(recent, "APPROVAL-004") {
		t.Errorf("recent decisions: %q", recent)
	}
}

type css = chromedp.CSS

// text reads an element's visible text.
func text(t *testing.T, ctx context.Context, sel css) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}
