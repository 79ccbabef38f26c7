package toolgate

// WithoutWaiting returns a Verifier that shares v's engine, state store,
// tiers, approvals queue and audit log, and that returns pending with the
// approval id instead of waiting for a person (as NoWait does), so one
// server can honour a per-request choice. Close v, not the view: closing the
// view does nothing.
func (v *Verifier) WithoutWaiting() *Verifier {
	c := *v
	c.noWait = true
	c.closers = nil
	return &c
}
