// Package e2e holds the soft NIC's end-to-end tests on real network
// namespaces, veths, XDP and AF_XDP: mrc-nicd processes on both ends and
// mrc-write-bw / mrc-write-lat between them. It has no code of its own.
package e2e
