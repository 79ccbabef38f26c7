package engine

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/toolgate/toolgate/policies"
)

// TestOptions select and instrument a policy test run.
type TestOptions struct {
	Run      string        // only tests whose name matches this regex
	Coverage bool          // compute line coverage per file
	Timeout  time.Duration // per test (default 5s)
}

// TestResult is one Rego test's outcome.
type TestResult struct {
	Package, Name, File string
	Row                 int
	Pass, Skip          bool
	Error               string
	Duration            time.Duration
}

// TestReport is a whole run.
type TestReport struct {
	Results  []TestResult
	Passed   int
	Failed   int
	Skipped  int
	Coverage *cover.Report // nil unless requested
}

// RunTests runs the Rego unit tests (rules named test_*) found under paths,
// or the embedded default bundle's when paths is empty, with toolgate's
// custom builtins, as `opa test` does.
func RunTests(ctx context.Context, paths []string, opts TestOptions) (*TestReport, error) {
	if opts.Run != "" {
		if _, err := regexp.Compile(opts.Run); err != nil {
			return nil, fmt.Errorf("--run: %w", err)
		}
	}
	var modules map[string]*ast.Module
	var docs map[string]any
	if len(paths) == 0 {
		b, err := ReadBundleFS(policies.FS, true)
		if err != nil {
			return nil, err
		}
		modules = map[string]*ast.Module{}
		for _, m := range b.Modules {
			modules[m.Path] = m.Parsed
		}
		docs = b.Data
	} else {
		res, err := loader.NewFileLoader().WithRegoVersion(ast.RegoV1).WithProcessAnnotation(true).
			Filtered(paths, func(_ string, info fs.FileInfo, _ int) bool {
				return !info.IsDir() && !isPolicyFile(info.Name())
			})
		if err != nil {
			return nil, fmt.Errorf("load policies: %w", err)
		}
		modules = map[string]*ast.Module{}
		for name, f := range res.Modules {
			modules[name] = f.Parsed
		}
		docs = res.Documents
	}
	if len(modules) == 0 {
		return nil, fmt.Errorf("no Rego files under %v", paths)
	}
	store := inmem.NewFromObject(docs)
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	runner := tester.NewRunner().
		SetStore(store).
		SetModules(modules).
		SetDefaultRegoVersion(ast.RegoV1).
		RaiseBuiltinErrors(true).
		SetTimeout(timeout)
	if opts.Run != "" {
		runner = runner.Filter(opts.Run)
	}
	var cov *cover.Cover
	if opts.Coverage {
		cov = cover.New()
		runner = runner.SetCoverageQueryTracer(cov)
	}
	report := &TestReport{}
	err := storage.Txn(ctx, store, storage.TransactionParams{}, func(txn storage.Transaction) error {
		ch, err := runner.RunTests(ctx, txn)
		if err != nil {
			return err
		}
		for r := range ch {
			tr := TestResult{Package: r.Package, Name: r.Name, Pass: r.Pass(), Skip: r.Skip, Duration: r.Duration}
			if r.Location != nil {
				tr.File, tr.Row = r.Location.File, r.Location.Row
			}
			if r.Error != nil {
				tr.Error = r.Error.Error()
			} else if r.Fail && r.FailedAt != nil {
				tr.Error = "failed at " + r.FailedAt.Location.String()
			}
			switch {
			case r.Skip:
				report.Skipped++
			case tr.Pass:
				report.Passed++
			default:
				report.Failed++
			}
			report.Results = append(report.Results, tr)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("run tests: %w", err)
	}
	sort.SliceStable(report.Results, func(i, j int) bool { return report.Results[i].File < report.Results[j].File })
	if cov != nil {
		// Coverage counts policy lines only, not the tests'.
		nonTest := map[string]*ast.Module{}
		for name, m := range modules {
			if !isTestFile(name) {
				nonTest[name] = m
			}
		}
		r := cov.Report(nonTest)
		covered, total := 0, 0
		for f, fr := range r.Files {
			if isTestFile(f) {
				delete(r.Files, f)
				continue
			}
			covered += fr.CoveredLines
			total += fr.CoveredLines + fr.NotCoveredLines
		}
		r.CoveredLines, r.NotCoveredLines = covered, total-covered
		if total > 0 {
			r.Coverage = 100 * float64(covered) / float64(total)
		}
		report.Coverage = &r
	}
	return report, nil
}

func isPolicyFile(name string) bool {
	return hasSuffix(name, ".rego") || name == "data.json" || name == "data.yaml" || name == "data.yml"
}

func isTestFile(name string) bool { return hasSuffix(name, "_test.rego") }

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }
