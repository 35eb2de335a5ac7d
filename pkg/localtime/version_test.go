package localtime

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"testing"
)

// The zip, the embedded copy and Version cannot part: update-zoneinfo.sh
// writes the zip's digest beside the release it came from.
func TestZoneinfoIsTheReleaseVersionNames(t *testing.T) {
	onDisk, err := os.ReadFile("zoneinfo.zip")
	if err != nil {
		t.Fatal(err)
	}
	for what, data := range map[string][]byte{"zoneinfo.zip": onDisk, "the embedded zoneinfo": zoneinfo} {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != zoneinfoSHA256 {
			t.Errorf("%s has SHA-256 %s, version.go says %s: run go generate ./pkg/localtime", what, got, zoneinfoSHA256)
		}
	}
	if !regexp.MustCompile(`^[0-9]{4}[a-z]$`).MatchString(Version) {
		t.Errorf("Version = %q, want a tz release like 2025c", Version)
	}
}
