package ledgertest

import (
	"testing"

	"github.com/nudgehq/nudge/pkg/clock"
)

// TestMemoryConformance runs the conformance suite against Memory; package
// ledger runs the same suite against DynamoDB Local.
func TestMemoryConformance(t *testing.T) {
	Run(t, func(t *testing.T, clk *clock.Fake, historyLimit int) Store { return NewMemory(clk, historyLimit) })
}
