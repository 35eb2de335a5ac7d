package standin

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
)

// TestAServiceThatLosesItsPortIsNotStarted: a service whose port another
// process took between FreePort and its bind answers nothing itself — the
// other listener does — and exits; start must not count it as running
// (tests start many emulators at once, and an instance counted as running
// that is not stalls every batch sent to it).
func TestAServiceThatLosesItsPortIsNotStarted(t *testing.T) {
	t.Parallel()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := other.Addr().(*net.TCPAddr).Port
	// Like the emulator on a taken address: it fails its bind and exits.
	_, err = start(context.Background(), t.TempDir(), "loser", port, Options{Log: io.Discard}, tcpReady(port), "sh", "-c", "sleep 0.05; exit 2")
	if !errors.Is(err, errExited) {
		t.Fatalf("start of a service that lost its port: %v; want errExited", err)
	}
}
