package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/audit"
)

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Manage the audit log's signing keys",
	}
	cmd.AddCommand(newKeysGenerateCmd())
	return cmd
}

func newKeysGenerateCmd() *cobra.Command {
	var out, keyType, passEnv string
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write a new signing key pair: DIR/toolgate.key (0600) and DIR/toolgate.pub",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError("--out DIR is required")
			}
			if err := audit.CheckKeyType(keyType); err != nil {
				return usageError("--type: %v", err)
			}
			var pass string
			if passEnv != "" {
				v, ok := os.LookupEnv(passEnv)
				if !ok || v == "" {
					return usageError("--passphrase-env: $%s is not set or empty", passEnv)
				}
				pass = v
			}
			keyPath, pubPath, err := audit.GenerateKey(out, keyType, pass)
			if err != nil {
				return withCode(exitError, err)
			}
			enc := "unencrypted"
			if pass != "" {
				enc = "encrypted with $" + passEnv
			}
			fmt.Fprintf(cmd.OutOrStdout(), "private key: %s (%s, %s)\npublic key:  %s\n", keyPath, keyType, enc, pubPath)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write toolgate.key and toolgate.pub to")
	cmd.Flags().StringVar(&keyType, "type", audit.DefaultKeyType, "ed25519 or ecdsa-p256")
	cmd.Flags().StringVar(&passEnv, "passphrase-env", "", "environment variable holding the passphrase that encrypts the key")
	return cmd
}
