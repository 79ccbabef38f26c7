// Package bundles builds, signs, verifies, inspects and loads OPA policy
// bundles in OPA's own format (a .tar.gz with .manifest and
// .signatures.json), using OPA's bundle and loader packages rather than its
// own readers and writers, so that whatever it signs OPA accepts and whatever
// OPA refuses it refuses too. It loads bundles from a directory, a .tar.gz or
// an http(s) URL (polled with ETags) and, when a verification key is
// configured, refuses any bundle that is unsigned or does not match its
// signature. It hands verified bundles to a callback. It compiles only to
// check a build (as opa build does); it must not evaluate policies, prepare or
// swap the engine's query, or touch policies/.
package bundles
