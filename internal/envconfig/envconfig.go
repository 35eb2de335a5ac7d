package envconfig

import (
	"fmt"
	"strconv"
	"time"
)

// Reader reads variables and keeps the first error.
type Reader struct {
	// Getenv looks a variable up (os.Getenv in a function).
	Getenv func(string) string
	// Who prefixes errors, such as "consumer".
	Who string

	err error
}

func (r *Reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(r.Who+": "+format, args...)
	}
}

// Required returns a variable that must be set.
func (r *Reader) Required(name string) string {
	v := r.Getenv(name)
	if v == "" {
		r.fail("%s is not set; the stack (or `nudge local`) sets it", name)
	}
	return v
}

// Duration returns a positive duration, or def if the variable is unset.
func (r *Reader) Duration(name string, def time.Duration) time.Duration {
	v := r.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail("%s=%q is not a positive duration such as 30s or 6h", name, v)
	}
	return d
}

// Int returns a positive whole number, or def if the variable is unset.
func (r *Reader) Int(name string, def int) int {
	v := r.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		r.fail("%s=%q is not a positive whole number", name, v)
	}
	return n
}

// Rate returns a rate per second, 0 (no limit) or above, or def if the
// variable is unset.
func (r *Reader) Rate(name string, def float64) float64 {
	v := r.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1e6 || f != f {
		r.fail("%s=%q is not a rate per second from 0 (no limit) to 1000000", name, v)
	}
	return f
}

// Err returns the first error.
func (r *Reader) Err() error { return r.err }
