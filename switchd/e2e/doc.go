// Package e2e holds the network-namespace integration tests of mrc-switchd:
// real veths, real namespaces, each switch a real mrc-switchd process with
// its XDP program attached. The tests need root, bpffs and XDP; they skip
// (saying which) otherwise.
package e2e
