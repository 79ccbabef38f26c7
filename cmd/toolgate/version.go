package main

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/version"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print toolgate's version and the embedded OPA version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "toolgate %s\nopa %s\n", toolgate.Version, version.Version)
			return nil
		},
	}
}
