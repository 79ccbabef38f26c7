package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/schema"
)

// openExistingAuditDB refuses to create a database that is not there: the
// audit commands only read.
func openExistingAuditDB(path string) (*sql.DB, error) {
	return openExistingDB(context.Background(), path)
}

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Verify, query and export the signed audit log",
	}
	cmd.PersistentFlags().String("db", "", "state database (default: state.path from --config, else "+config.DefaultStatePath()+")")
	cmd.PersistentFlags().String("config", "", "toolgate.yaml to read state.path from")
	cmd.AddCommand(newAuditVerifyCmd(), newAuditQueryCmd(), newAuditExportCmd(), newAuditCheckpointCmd())
	return cmd
}

// auditDBPath resolves --db, then the config's state.path, then the default.
func auditDBPath(cmd *cobra.Command) (string, error) {
	if p, _ := cmd.Flags().GetString("db"); p != "" {
		return p, nil
	}
	cfgPath, _ := cmd.Flags().GetString("config")
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return "", usageError("%v", err)
	}
	return cfg.StatePath(), nil
}

func openAuditFromFlags(cmd *cobra.Command) (*sql.DB, error) {
	path, err := auditDBPath(cmd)
	if err != nil {
		return nil, err
	}
	db, err := openExistingAuditDB(path)
	if err != nil {
		return nil, withCode(exitError, err)
	}
	return db, nil
}

func newAuditVerifyCmd() *cobra.Command {
	var pubkey, checkpointFile, output, sigMode string
	var unsigned bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every link, hash and signature of the log; exit 0 only if all verify",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pubkey == "" && !unsigned {
				return usageError("--pubkey is required (or --unsigned to check hashes and links only)")
			}
			if output != "text" && output != "json" {
				return usageError("--output: %q is not text or json", output)
			}
			if sigMode != "all" && sigMode != "anchored" {
				return usageError("--signatures: %q is not all or anchored", sigMode)
			}
			var ext []audit.Checkpoint
			if checkpointFile != "" {
				f, err := os.Open(checkpointFile)
				if err != nil {
					return usageError("--checkpoint: %v", err)
				}
				cp, err := audit.ReadCheckpoint(f)
				f.Close()
				if err != nil {
					return usageError("--checkpoint %s: %v", checkpointFile, err)
				}
				ext = append(ext, cp)
			}
			var v signature.Verifier
			if pubkey != "" {
				pv, err := audit.LoadVerifier(pubkey)
				if err != nil {
					return usageError("--pubkey: %v", err)
				}
				v = pv
			}
			db, err := openAuditFromFlags(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			rep, err := audit.VerifyWith(cmd.Context(), db, v, audit.VerifyOptions{Checkpoints: ext, Anchored: sigMode == "anchored"})
			if err != nil {
				return withCode(exitError, err)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				_ = enc.Encode(rep)
			} else if rep.OK {
				sigs := "signatures checked"
				if rep.Anchored {
					sigs = "signatures checked where no checkpoint vouches (anchored)"
				}
				if !rep.SignaturesChecked {
					sigs = "signatures NOT checked"
				}
				fmt.Fprintf(out, "ok: %d entries, %d checkpoints, %s\n", rep.Entries, rep.Checkpoints, sigs)
			} else {
				fmt.Fprintf(out, "FAILED at entry %d: %s: %s\n", rep.FirstBad, rep.Kind, rep.Detail)
				fmt.Fprintf(out, "entries 1 to %d verify; %d entries in the log\n", rep.FirstBad-1, rep.Entries)
			}
			if !rep.OK {
				return withCode(exitError, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pubkey, "pubkey", "", "PEM public key of the audit signing key")
	cmd.Flags().StringVar(&checkpointFile, "checkpoint", "", "a checkpoint kept elsewhere (from `toolgate audit checkpoint`) the log must still contain")
	cmd.Flags().BoolVar(&unsigned, "unsigned", false, "without --pubkey: check hashes, links and checkpoint positions only")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().StringVar(&sigMode, "signatures", "all", "all: every entry's signature; anchored: only where no signed checkpoint vouches (faster; contents still fully proven)")
	return cmd
}

func addFilterFlags(cmd *cobra.Command, f *filterFlags) {
	cmd.Flags().StringVar(&f.agent, "agent", "", "agent id")
	cmd.Flags().StringVar(&f.conversation, "conversation", "", "conversation id")
	cmd.Flags().StringVar(&f.decision, "decision", "", "allow, deny, escalate or pending")
	cmd.Flags().StringVar(&f.tool, "tool", "", "action type")
	cmd.Flags().StringVar(&f.code, "code", "", "a reason code, e.g. DANGER-001")
	cmd.Flags().StringVar(&f.since, "since", "", "entries at or after this time (RFC3339)")
	cmd.Flags().StringVar(&f.until, "until", "", "entries before this time (RFC3339)")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "at most this many entries (0: all)")
}

type filterFlags struct {
	agent, conversation, decision, tool, code, since, until string
	limit                                                   int
}

func (f filterFlags) filter() (audit.Filter, error) {
	out := audit.Filter{AgentID: f.agent, ConversationID: f.conversation, Tool: f.tool, Code: f.code, Limit: f.limit}
	if f.decision != "" {
		out.Decision = schema.Outcome(strings.ToLower(f.decision))
		if !out.Decision.Valid() {
			return out, usageError("--decision: %q is not allow, deny, escalate or pending", f.decision)
		}
	}
	for _, p := range []struct {
		name, val string
		dst       *time.Time
	}{{"--since", f.since, &out.Since}, {"--until", f.until, &out.Until}} {
		if p.val == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, p.val)
		if err != nil {
			return out, usageError("%s: %q is not an RFC3339 time", p.name, p.val)
		}
		*p.dst = t
	}
	if f.limit < 0 {
		return out, usageError("--limit: must not be negative")
	}
	return out, nil
}

func newAuditQueryCmd() *cobra.Command {
	var ff filterFlags
	var output string
	cmd := &cobra.Command{
		Use:   "query",
		Short: "List audit entries as a table or JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			if output != "table" && output != "json" {
				return usageError("--output: %q is not table or json", output)
			}
			db, err := openAuditFromFlags(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			entries, err := audit.Query(cmd.Context(), db, f)
			if err != nil {
				return withCode(exitError, err)
			}
			if output == "json" {
				if entries == nil {
					entries = []audit.Entry{}
				}
				return writeIndentedJSON(cmd.OutOrStdout(), entries)
			}
			return printEntries(cmd.OutOrStdout(), entries)
		},
	}
	addFilterFlags(cmd, &ff)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func printEntries(w io.Writer, entries []audit.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tAGENT\tCONVERSATION\tSTEP\tTOOL\tDECISION\tTIER\tCODES\tPROBES")
	for _, e := range entries {
		codes := make([]string, len(e.Reasons))
		for i, r := range e.Reasons {
			codes[i] = r.Code
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%d\n", e.Seq, e.Time.Format(time.RFC3339), e.AgentID,
			e.ConversationID, e.Step, e.ActionType, e.Decision, e.Tier, strings.Join(codes, ","), len(e.Probes))
	}
	return tw.Flush()
}

func newAuditExportCmd() *cobra.Command {
	var ff filterFlags
	var format string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export entries as OPA-style decision-log lines (JSONL)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "jsonl" {
				return usageError("--format: %q is not supported (jsonl)", format)
			}
			f, err := ff.filter()
			if err != nil {
				return err
			}
			db, err := openAuditFromFlags(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := audit.Export(cmd.Context(), db, cmd.OutOrStdout(), f); err != nil {
				return withCode(exitError, err)
			}
			return nil
		},
	}
	addFilterFlags(cmd, &ff)
	cmd.Flags().StringVar(&format, "format", "jsonl", "jsonl")
	return cmd
}

func newAuditCheckpointCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoint",
		Short: "Print the latest signed checkpoint as JSON, to keep outside the database",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openAuditFromFlags(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			cp, err := audit.LatestCheckpoint(cmd.Context(), db)
			if err != nil {
				return withCode(exitError, err)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(cp)
		},
	}
}
