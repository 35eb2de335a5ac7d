package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
)

// SignatureScheme is the version of the webhook signature Nudge sends.
//
// v2: Nudge-Signature is "v2=" + hex(HMAC-SHA256(secret, timestamp + "." +
// idempotencyKey + "." + body)), with timestamp the Nudge-Timestamp header
// (Unix seconds) and idempotencyKey the Idempotency-Key header. Both headers
// are inside the signature, so a captured request can neither be replayed
// after the receiver's tolerance nor replayed under another key.
//
// v1 (before 2026-11-30) signed the timestamp and body only, and nothing
// checked the timestamp's age. It is retired: Nudge no longer sends it and
// Verifier does not accept it (docs/webhook.md, "Switching from v1").
const SignatureScheme = "v2"

// Sign returns the Nudge-Signature header value for a request with
// timestamp ts (Unix seconds), idempotency key key and body.
func Sign(secret []byte, ts, key string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write([]byte(key))
	m.Write([]byte("."))
	m.Write(body)
	return SignatureScheme + "=" + hex.EncodeToString(m.Sum(nil))
}

// Reasons Verify refuses a request; match with errors.Is.
var (
	// ErrNoSignature: a header is missing, or the signature is not in the
	// v2 scheme.
	ErrNoSignature = errors.New("webhook: no v2 signature")
	// ErrBadSignature: the signature does not match any of the secrets.
	ErrBadSignature = errors.New("webhook: signature does not match")
	// ErrStale: the timestamp is further from now than the tolerance: a
	// replay, or a clock far off.
	ErrStale = errors.New("webhook: timestamp outside the tolerance")
)

// DefaultTolerance is how far a request's timestamp may be from the
// receiver's clock unless a Verifier says otherwise.
const DefaultTolerance = 5 * time.Minute

// Verifier checks the requests of Nudge's webhook provider, for a receiver
// written in Go (docs/webhook.md describes the same steps for any
// language). The zero value with Secrets set is ready to use.
type Verifier struct {
	// Secrets are the signing secrets accepted: the current one and, during
	// a rotation, the previous one. Required.
	Secrets [][]byte
	// Tolerance is how far the request's timestamp may be from now, either
	// way. Default DefaultTolerance. A request older than this is refused
	// as a replay, so the receiver need keep the idempotency keys it has
	// seen only this long to refuse replays (it keeps them longer to
	// deduplicate Nudge's own retries; see docs/webhook.md).
	Tolerance time.Duration
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// Verify checks a request's headers and body: the signature is v2 and made
// with one of the secrets over the timestamp, the idempotency key and the
// body, and the timestamp is within the tolerance of now. The comparison is
// in constant time.
func (v Verifier) Verify(h http.Header, body []byte) error {
	if len(v.Secrets) == 0 {
		return errors.New("webhook: Verifier has no secrets; set Verifier.Secrets to the signing secret")
	}
	if v.Tolerance < 0 {
		return fmt.Errorf("webhook: Verifier.Tolerance %v is negative; leave it 0 for %v or set a positive age", v.Tolerance, DefaultTolerance)
	}
	tol, clk := v.Tolerance, v.Clock
	if tol == 0 {
		tol = DefaultTolerance
	}
	if clk == nil {
		clk = clock.Real{}
	}
	ts, key, sig := h.Get(HeaderTimestamp), h.Get(HeaderIdempotencyKey), h.Get(HeaderSignature)
	if ts == "" || key == "" || sig == "" {
		return fmt.Errorf("%w: want the %s, %s and %s headers", ErrNoSignature, HeaderTimestamp, HeaderIdempotencyKey, HeaderSignature)
	}
	var given []string
	for _, part := range strings.Split(sig, ",") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(part), SignatureScheme+"="); ok && s != "" {
			given = append(given, s)
		}
	}
	if len(given) == 0 {
		return fmt.Errorf("%w: %s holds no %s= signature", ErrNoSignature, HeaderSignature, SignatureScheme)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not Unix seconds", ErrNoSignature, HeaderTimestamp, ts)
	}
	if age := clk.Now().Sub(time.Unix(secs, 0)); age > tol || age < -tol {
		return fmt.Errorf("%w: %s is %v from now (tolerance %v)", ErrStale, HeaderTimestamp, age.Round(time.Second), tol)
	}
	for _, secret := range v.Secrets {
		want := []byte(Sign(secret, ts, key, body)[len(SignatureScheme)+1:])
		for _, g := range given {
			if hmac.Equal(want, []byte(g)) {
				return nil
			}
		}
	}
	return ErrBadSignature
}
