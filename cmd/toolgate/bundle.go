package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bundles"
)

func newBundleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Build, sign, verify and inspect OPA policy bundles",
		Long: "Policy bundles in OPA's format: a .tar.gz with a .manifest and, once signed, a .signatures.json\n" +
			"that OPA itself accepts. Ship signed .tar.gz bundles: signatures over a directory depend on its path.",
	}
	cmd.AddCommand(newBundleBuildCmd(), newBundleSignCmd(), newBundleVerifyCmd(), newBundleInspectCmd())
	return cmd
}

// signFlags are the signing flags shared by build and sign, named as OPA's.
type signFlags struct {
	key, alg, keyID, scope string
}

func (f *signFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.key, "signing-key", "", "PEM file of the private key (RSA or ECDSA) to sign with")
	cmd.Flags().StringVar(&f.alg, "signing-alg", "", "RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or ES512 (default: the one that fits the key)")
	cmd.Flags().StringVar(&f.keyID, "key-id", bundles.DefaultKeyID, "key id written into the signature (kid)")
	cmd.Flags().StringVar(&f.scope, "scope", "", "scope claim written into the signature")
}

func (f *signFlags) signingKey() (bundles.SigningKey, error) {
	pem, err := os.ReadFile(f.key)
	if err != nil {
		return bundles.SigningKey{}, usageError("--signing-key: %v", err)
	}
	return bundles.SigningKey{PEM: pem, Alg: f.alg, KeyID: f.keyID, Scope: f.scope}, nil
}

func newBundleBuildCmd() *cobra.Command {
	var (
		out  string
		opts bundles.BuildOptions
		sf   signFlags
	)
	cmd := &cobra.Command{
		Use:   "build DIR",
		Short: "Build a .tar.gz bundle from a policy directory (signed with --signing-key)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
				return usageError("%s: not a directory", args[0])
			}
			var key *bundles.SigningKey
			if sf.key != "" {
				k, err := sf.signingKey()
				if err != nil {
					return err
				}
				key = &k
			}
			var buf bytes.Buffer
			if err := bundles.Build(cmd.Context(), args[0], &buf, opts); err != nil {
				return withCode(exitError, err)
			}
			data := buf.Bytes()
			if key != nil {
				var signed bytes.Buffer
				if err := bundles.Sign(cmd.Context(), bytes.NewReader(data), &signed, *key); err != nil {
					return withCode(exitError, err)
				}
				data = signed.Bytes()
			}
			return writeOutput(cmd.OutOrStdout(), out, data)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "bundle.tar.gz", "bundle file to write (- for stdout)")
	cmd.Flags().StringVarP(&opts.Revision, "revision", "r", "", "revision recorded in the manifest")
	cmd.Flags().StringSliceVar(&opts.Roots, "root", nil, "data path the bundle owns (repeatable; default: the directory's .manifest, else all)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "bundle name recorded in the manifest's metadata")
	sf.add(cmd)
	return cmd
}

func newBundleSignCmd() *cobra.Command {
	var (
		out string
		sf  signFlags
	)
	cmd := &cobra.Command{
		Use:   "sign FILE",
		Short: "Sign a .tar.gz bundle, writing a new .tar.gz with .signatures.json",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sf.key == "" {
				return usageError("--signing-key is required")
			}
			if out == "" {
				return usageError("-o FILE is required")
			}
			key, err := sf.signingKey()
			if err != nil {
				return err
			}
			in, err := os.Open(args[0])
			if err != nil {
				return usageError("%v", err)
			}
			defer in.Close()
			var signed bytes.Buffer
			if err := bundles.Sign(cmd.Context(), in, &signed, key); err != nil {
				return withCode(exitError, err)
			}
			return writeOutput(cmd.OutOrStdout(), out, signed.Bytes())
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "signed bundle file to write (- for stdout)")
	sf.add(cmd)
	return cmd
}

func newBundleVerifyCmd() *cobra.Command {
	var keyFile, keyID, alg, scope string
	cmd := &cobra.Command{
		Use:   "verify FILE|DIR",
		Short: "Verify a bundle's signature: exit 0 when it holds, 1 with the reason when refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return usageError("--verification-key is required")
			}
			pem, err := os.ReadFile(keyFile)
			if err != nil {
				return usageError("--verification-key: %v", err)
			}
			key := bundles.VerificationKey{PEM: pem, KeyID: keyID, Alg: alg, Scope: scope}
			if _, err := key.VerificationConfig(); err != nil {
				return usageError("%v", err)
			}
			b, err := bundles.Verify(cmd.Context(), args[0], key)
			if err != nil {
				return withCode(exitError, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: bundle %s revision %q: signature valid, every file matches it\n",
				bundles.Name(args[0], b), bundles.Revision(b))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "verification-key", "", "PEM file of the public key (or certificate)")
	cmd.Flags().StringVar(&keyID, "key-id", bundles.DefaultKeyID, "key id to verify with")
	cmd.Flags().StringVar(&alg, "signing-alg", "", "signature algorithm (default: the one that fits the key)")
	cmd.Flags().StringVar(&scope, "scope", "", "scope the signature must carry")
	return cmd
}

func newBundleInspectCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "inspect FILE|DIR",
		Short: "Print a bundle's revision, roots, files and signatures (not verified)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return usageError("--output: %q is not text or json", output)
			}
			info, err := bundles.Inspect(args[0])
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return usageError("%v", err)
				}
				return withCode(exitError, err)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			printInfo(w, info)
			return nil
		},
	}
	cmd.Flags().StringVar(&output, "output", "text", "output format: text or json")
	return cmd
}

func printInfo(w io.Writer, info bundles.Info) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "name:\t%s\n", info.Name)
	fmt.Fprintf(tw, "revision:\t%s\n", info.Revision)
	fmt.Fprintf(tw, "roots:\t%s\n", strings.Join(quoteAll(info.Roots), ", "))
	if info.RegoVersion != nil {
		fmt.Fprintf(tw, "rego_version:\t%d\n", *info.RegoVersion)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nfiles (%d):\n", len(info.Files))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range info.Files {
		fmt.Fprintf(tw, "  %s\t%d bytes\tsha256:%s\n", f.Name, f.Size, f.SHA256)
	}
	tw.Flush()
	if !info.Signed {
		fmt.Fprintln(w, "\nsignatures: none (unsigned)")
		return
	}
	fmt.Fprintf(w, "\nsignatures (%d, not verified; use toolgate bundle verify):\n", len(info.Signatures))
	for _, s := range info.Signatures {
		fmt.Fprintf(w, "  alg %s, key id %q", s.Algorithm, s.KeyID)
		if s.Scope != "" {
			fmt.Fprintf(w, ", scope %q", s.Scope)
		}
		if s.IssuedAt != 0 {
			fmt.Fprintf(w, ", issued %s", time.Unix(s.IssuedAt, 0).UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(w, ", covers %d files: %s\n", len(s.Files), strings.Join(s.Files, ", "))
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// writeOutput writes data to path atomically (temp file and rename), or to
// stdout for "-".
func writeOutput(stdout io.Writer, path string, data []byte) error {
	if path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".toolgate-bundle-*")
	if err != nil {
		return withCode(exitError, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return withCode(exitError, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return withCode(exitError, err)
	}
	if err := tmp.Close(); err != nil {
		return withCode(exitError, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return withCode(exitError, err)
	}
	return nil
}
