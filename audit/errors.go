package audit

import (
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/schema"
)

// CodeNotRecorded is the reason code of a decision turned into a deny because
// the audit log could not record it durably. No action runs unrecorded.
const CodeNotRecorded = "AUDIT-001"

// ErrNotRecorded is wrapped by every Append error: the entry is not in the
// log (disk full, database locked or read-only, log closed, signer failed).
// The pipeline must then deny the call (see DenyUnrecorded).
var ErrNotRecorded = errors.New("audit: decision not recorded")

// ErrClosed is returned (wrapped with ErrNotRecorded) by Append after Close.
var ErrClosed = errors.New("audit: log closed")

// ErrNoLog is returned by Verify, Query and Export when the database has no
// audit tables.
var ErrNoLog = errors.New("audit: no audit log in this database")

// notRecorded wraps err so that errors.Is(err, ErrNotRecorded) holds and the
// cause stays reachable too.
func notRecorded(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrNotRecorded, what, err)
}

// DenyUnrecorded is what the pipeline does with a decision whose audit entry
// could not be written: anything but a deny becomes a deny, and the reason
// AUDIT-001 is added naming the cause. The input is not modified.
func DenyUnrecorded(d schema.Decision, cause error) schema.Decision {
	out := d
	out.Reasons = append(append([]schema.Reason(nil), d.Reasons...), schema.Reason{
		Code:    CodeNotRecorded,
		Rule:    "audit_unrecorded",
		Message: fmt.Sprintf("the decision could not be written to the audit log, so the call is denied: %v", cause),
		Outcome: schema.Deny,
	})
	out.Outcome = schema.Deny
	return out
}
