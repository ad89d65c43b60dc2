package e2e

import (
	"os"
	"testing"
)

// TestMain removes the binaries bins built (when MRC_BIN was not given).
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
