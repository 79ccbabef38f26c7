package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/toolgate/toolgate/state"
)

// openExistingDB opens the state database for commands that only read or
// answer what is there (audit, approvals): they never create one. state.Open
// applies the pragmas, permission checks and migrations in one place.
func openExistingDB(ctx context.Context, path string) (*sql.DB, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no state database at %s (use --db or --config)", path)
	} else if err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	st, err := state.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return st.DB(), nil
}
