package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/engine"
)

func newTestCmd() *cobra.Command {
	var opts engine.TestOptions
	var verbose bool
	var threshold float64
	cmd := &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run Rego unit tests (*_test.rego) with toolgate's builtins, as opa test does",
		Long: `Run the Rego unit tests (rules named test_*) under PATH..., or the embedded
default policy's when no path is given, with toolgate's custom builtins.
Exit 0 when every test passes (and coverage meets --threshold), 1 otherwise.`,
		RunE: func(cmd *cobra.Command, paths []string) error {
			rep, err := engine.RunTests(cmd.Context(), paths, opts)
			if err != nil {
				return withCode(exitUsage, err)
			}
			out := cmd.OutOrStdout()
			for _, r := range rep.Results {
				switch {
				case r.Skip:
					if verbose {
						fmt.Fprintf(out, "SKIP %s.%s\n", r.Package, r.Name)
					}
				case r.Pass:
					if verbose {
						fmt.Fprintf(out, "PASS %s.%s (%s)\n", r.Package, r.Name, r.Duration)
					}
				default:
					fmt.Fprintf(out, "FAIL %s.%s (%s:%d) %s\n", r.Package, r.Name, r.File, r.Row, r.Error)
				}
			}
			fmt.Fprintln(out, "--------------------------------------------------------------------------------")
			fmt.Fprintf(out, "PASS: %d/%d\n", rep.Passed, rep.Passed+rep.Failed)
			if rep.Failed > 0 {
				fmt.Fprintf(out, "FAIL: %d/%d\n", rep.Failed, rep.Passed+rep.Failed)
			}
			if c := rep.Coverage; c != nil {
				files := make([]string, 0, len(c.Files))
				for f := range c.Files {
					files = append(files, f)
				}
				sort.Strings(files)
				fmt.Fprintln(out, "coverage:")
				for _, f := range files {
					fmt.Fprintf(out, "  %6.2f%%  %s\n", c.Files[f].Coverage, f)
				}
				fmt.Fprintf(out, "  %6.2f%%  total\n", c.Coverage)
			}
			if rep.Failed > 0 {
				return withCode(exitError, nil)
			}
			if rep.Coverage != nil && rep.Coverage.Coverage < threshold {
				return withCode(exitError, fmt.Errorf("coverage %.2f%% is below --threshold %.2f%%", rep.Coverage.Coverage, threshold))
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every test, not only failures")
	cmd.Flags().StringVar(&opts.Run, "run", "", "run only tests whose name matches this regex")
	cmd.Flags().BoolVar(&opts.Coverage, "coverage", false, "report line coverage per policy file")
	cmd.Flags().Float64Var(&threshold, "threshold", 0, "with --coverage: fail below this total percentage")
	return cmd
}
