// Package audit owns the append-only, hash-chained, signed audit log of final
// decisions: its tables in the SQLite database (audit_meta, audit_entries,
// audit_checkpoints), the canonical encoding that is hashed and signed, signed
// checkpoints, verification, query and export (OPA decision-log lines), and
// the signing keys' files. It never decides anything and must not touch other
// packages' tables; it does not open the database (the caller passes *sql.DB).
package audit
