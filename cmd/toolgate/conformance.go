package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/conformance"
)

type conformanceFlags struct {
	bundle, config, format, output, run, labels string
	data                                        []string
	parallel                                    int
	verbose, freshDB                            bool
}

func newConformanceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run conformance suites: tool calls with expected decisions",
	}
	cmd.AddCommand(newConformanceRunCmd())
	return cmd
}

func newConformanceRunCmd() *cobra.Command {
	var f conformanceFlags
	cmd := &cobra.Command{
		Use:   "run [PATH...]",
		Short: "Run suites (files, or directories of *.yaml) and report each case",
		Long: `Run conformance suites: each case is decided by the real Verifier, on a
fresh SQLite database of its own when it needs state, with approvals never
waited for (pending stays pending).

A suite's own bundle and config override --bundle and --config; --data files
are merged before the suite's own data. Without a path, conformance/suites/.

With --labels FILE.jsonl, score a labelled set instead: each line's request
is decided by Tier 1 alone (no state) and the outcomes are counted per label
and per family.

Exit codes: 0 every case passed, 1 a case failed, 2 an invalid suite or
labelled set (the message names the file, the line and the field).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.labels != "" {
				if len(args) > 0 {
					return usageError("--labels takes no suite paths")
				}
				return runLabels(cmd, &f)
			}
			return runConformance(cmd, &f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.bundle, "bundle", "", "policy bundle for suites that name none (default: the embedded default bundle)")
	fl.StringVar(&f.config, "config", "", "toolgate.yaml for suites that name none")
	fl.StringArrayVar(&f.data, "data", nil, "JSON data file merged over the bundle's data (repeatable)")
	fl.StringVar(&f.format, "format", "text", "report format: text, json or junit (--labels: text or json)")
	fl.StringVarP(&f.output, "output", "o", "", "write the report to FILE instead of stdout")
	fl.StringVar(&f.run, "run", "", "run only the cases whose suite/case name matches REGEX")
	fl.IntVar(&f.parallel, "parallel", 0, "cases decided at once (default: the number of CPUs)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "text format: list passing cases too")
	fl.BoolVar(&f.freshDB, "fresh-db", false, "give every case its own database, even those that need no state")
	fl.StringVar(&f.labels, "labels", "", "score a labelled set (JSONL: id, label, request) instead of running suites")
	return cmd
}

// output opens the report's destination.
func (f *conformanceFlags) writer(cmd *cobra.Command) (io.Writer, func() error, error) {
	if f.output == "" || f.output == "-" {
		return cmd.OutOrStdout(), func() error { return nil }, nil
	}
	file, err := os.Create(f.output)
	if err != nil {
		return nil, nil, usageError("--output: %v", err)
	}
	return file, file.Close, nil
}

func runConformance(cmd *cobra.Command, f *conformanceFlags, paths []string) error {
	rep, err := conformance.NewReporter(f.format, f.verbose)
	if err != nil {
		return usageError("--format: %v", err)
	}
	opts := conformance.Options{Bundle: f.bundle, Config: f.config, Data: f.data, Parallel: f.parallel, FreshDB: f.freshDB}
	if f.run != "" {
		re, err := regexp.Compile(f.run)
		if err != nil {
			return usageError("--run: %v", err)
		}
		opts.Run = re
	}
	if len(paths) == 0 {
		paths = []string{"conformance/suites"}
	}
	suites, err := conformance.LoadPaths(paths)
	if err != nil {
		return withCode(exitUsage, err)
	}
	report, err := conformance.Run(cmd.Context(), suites, opts)
	var se *conformance.SuiteError
	switch {
	case errors.As(err, &se):
		return withCode(exitUsage, err)
	case err != nil:
		return withCode(exitError, err)
	}
	w, closeOut, err := f.writer(cmd)
	if err != nil {
		return err
	}
	if err := rep.Report(w, report); err != nil {
		closeOut()
		return withCode(exitError, fmt.Errorf("write report: %w", err))
	}
	if err := closeOut(); err != nil {
		return withCode(exitError, fmt.Errorf("write report: %w", err))
	}
	if f.output != "" && f.output != "-" {
		// The file is for CI; a person still sees the summary.
		fmt.Fprintf(cmd.ErrOrStderr(), "%d passed, %d failed, %d errors; report in %s\n", report.Passed, report.Failed, report.Errors, f.output)
	}
	if !report.OK() {
		return withCode(exitError, nil)
	}
	return nil
}

func runLabels(cmd *cobra.Command, f *conformanceFlags) error {
	if f.format != "text" && f.format != "json" {
		return usageError("--format: --labels writes text or json, not %q", f.format)
	}
	pf := policyFlags{bundle: f.bundle, configPath: f.config, data: f.data}
	cfg, err := pf.loadConfig()
	if err != nil {
		return err
	}
	eng, err := pf.newEngine(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	in, err := os.Open(f.labels)
	if err != nil {
		return usageError("--labels: %v", err)
	}
	defer in.Close()
	rep, err := conformance.ScoreLabels(cmd.Context(), eng, in, f.parallel)
	if err != nil {
		return withCode(exitError, fmt.Errorf("%s: %w", f.labels, err))
	}
	w, closeOut, err := f.writer(cmd)
	if err != nil {
		return err
	}
	write := conformance.WriteLabelsText
	if f.format == "json" {
		write = conformance.WriteLabelsJSON
	}
	if err := write(w, rep); err != nil {
		closeOut()
		return withCode(exitError, err)
	}
	if err := closeOut(); err != nil {
		return withCode(exitError, err)
	}
	if len(rep.Invalid) > 0 {
		for _, e := range rep.Invalid {
			fmt.Fprintf(cmd.ErrOrStderr(), "toolgate: %s:%d: %s\n", f.labels, e.Line, e.Error)
		}
		return withCode(exitUsage, fmt.Errorf("%s: %d invalid line(s)", f.labels, len(rep.Invalid)))
	}
	return nil
}
