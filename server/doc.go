// Package server is `toolgate serve`: the HTTP API (POST /v1/verify, the
// approvals endpoints, an agent's budget, health and readiness), the
// Server-Sent Events stream of approvals and decisions, the embedded
// approvals web page, and the Prometheus metrics. It owns HTTP only: it
// decides nothing itself (the toolgate.Verifier does), keeps no tables of its
// own and reads state, approvals and the audit log only through their
// packages' APIs. Nothing imports it but cmd/.
package server
