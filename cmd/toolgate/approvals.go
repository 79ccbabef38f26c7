package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/supervisor"
)

func newApprovalsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, approve and deny calls waiting for a person",
		Long: "Tier 3 human approval: calls the policy or the supervisor sent to a person wait here until\n" +
			"someone approves or denies them, or their deadline passes (deny, APPROVAL-001). The first answer wins.",
	}
	cmd.PersistentFlags().String("db", "", "SQLite state file (default: state.path from --config, else "+config.DefaultStatePath()+")")
	cmd.PersistentFlags().String("config", "", "toolgate.yaml to read state.path from")
	cmd.AddCommand(newApprovalsListCmd(), newApprovalsAnswerCmd(true), newApprovalsAnswerCmd(false))
	return cmd
}

func newApprovalsListCmd() *cobra.Command {
	var status, output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List approvals, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch status {
			case "all", supervisor.StatusPending, supervisor.StatusApproved, supervisor.StatusDenied, supervisor.StatusExpired:
			default:
				return usageError("--status: %q is not pending, approved, denied, expired or all", status)
			}
			if output != "text" && output != "json" {
				return usageError("--output: %q is not text or json", output)
			}
			q, closeDB, err := openApprovals(cmd)
			if err != nil {
				return err
			}
			defer closeDB()
			list, err := q.List(cmd.Context(), status)
			if err != nil {
				return withCode(exitError, err)
			}
			if output == "json" {
				if list == nil {
					list = []supervisor.Approval{}
				}
				return writeIndentedJSON(cmd.OutOrStdout(), list)
			}
			printApprovals(cmd.OutOrStdout(), list)
			return nil
		},
	}
	cmd.Flags().StringVar(&status, "status", supervisor.StatusPending, "pending, approved, denied, expired or all")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func printApprovals(w io.Writer, list []supervisor.Approval) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no approvals")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tAGENT\tCONVERSATION\tSTEP\tACTION\tARGUMENTS\tREASONS\tDEADLINE\tANSWER")
	for _, a := range list {
		answer := ""
		if a.ResolvedBy != "" {
			answer = a.ResolvedBy
			if a.Reason != "" {
				answer += ": " + a.Reason
			}
		}
		codes := make([]string, len(a.Reasons))
		for i, r := range a.Reasons {
			codes[i] = r.Code
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, oneLine(a.AgentID), oneLine(a.ConversationID),
			a.Step, oneLine(a.ActionType), oneLine(arguments(a.Request)), oneLine(strings.Join(codes, ",")),
			a.Deadline.Local().Format(time.DateTime), oneLine(answer))
	}
	tw.Flush()
}

// arguments is the call's arguments as compact JSON, what a person must see
// before answering (the full request: --output json).
func arguments(req json.RawMessage) string {
	var r struct {
		Action struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"action"`
	}
	if json.Unmarshal(req, &r) != nil || len(r.Action.Arguments) == 0 {
		return "?"
	}
	return string(r.Action.Arguments)
}

// oneLine keeps agent-supplied text from breaking (or forging) table rows.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > 60 {
		s = string(r[:57]) + "..."
	}
	return s
}

func newApprovalsAnswerCmd(approve bool) *cobra.Command {
	verb, past := "deny", "denied"
	if approve {
		verb, past = "approve", "approved"
	}
	var by, reason, output string
	cmd := &cobra.Command{
		Use:   verb + " ID",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a pending call (the first answer wins)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if !supervisor.ValidID(id) {
				return usageError("%q is not an approval id (apr_ and 22 letters, digits, - or _)", id)
			}
			if by = strings.TrimSpace(by); by == "" {
				return usageError("--by: who answers is required ($USER is not set)")
			}
			if output != "text" && output != "json" {
				return usageError("--output: %q is not text or json", output)
			}
			q, closeDB, err := openApprovals(cmd)
			if err != nil {
				return err
			}
			defer closeDB()
			a, err := q.Resolve(cmd.Context(), id, approve, by, reason)
			switch {
			case errors.Is(err, supervisor.ErrExpired):
				return withCode(exitError, fmt.Errorf("%s expired at %s without an answer; it was denied (APPROVAL-001)",
					id, a.Deadline.Local().Format(time.DateTime)))
			case errors.Is(err, supervisor.ErrAlreadyResolved):
				when := "an earlier time"
				if a.ResolvedAt != nil {
					when = a.ResolvedAt.Local().Format(time.DateTime)
				}
				return withCode(exitError, fmt.Errorf("%s was already %s by %s at %s; the first answer stands",
					id, a.Status, a.ResolvedBy, when))
			case errors.Is(err, supervisor.ErrNotFound):
				return withCode(exitError, fmt.Errorf("no approval %s in this database", id))
			case err != nil:
				return withCode(exitError, err)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(a)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s by %s: %s %s at step %d of %s\n", id, past, a.ResolvedBy,
				oneLine(a.AgentID), oneLine(a.ActionType), a.Step, oneLine(a.ConversationID))
			return nil
		},
	}
	cmd.Flags().StringVar(&by, "by", os.Getenv("USER"), "who answers (default $USER)")
	cmd.Flags().StringVar(&reason, "reason", "", "why; shown to the agent with the verdict")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// openApprovals opens the queue on an existing state file. A missing file
// holds no approvals, and answering one must not create a database.
func openApprovals(cmd *cobra.Command) (*supervisor.Queue, func(), error) {
	path, _ := cmd.Flags().GetString("db")
	if path == "" {
		cfgPath, _ := cmd.Flags().GetString("config")
		cfg, err := config.Load(cfgPath)
		if err != nil {
			return nil, nil, usageError("%v", err)
		}
		path = cfg.StatePath()
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	db, err := openExistingDB(ctx, path)
	if err != nil {
		return nil, nil, withCode(exitError, err)
	}
	q, err := supervisor.OpenQueue(ctx, db, supervisor.QueueOptions{})
	if err != nil {
		db.Close()
		return nil, nil, withCode(exitError, fmt.Errorf("state database %s: %w", path, err))
	}
	return q, func() { q.Close(); db.Close() }, nil
}
