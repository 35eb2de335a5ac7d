package intake

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// readBody reads a JSON body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Problem) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
			return nil, &Problem{Type: ProblemMediaType, Status: http.StatusUnsupportedMediaType, Detail: fmt.Sprintf("the body is %q", clip(ct)),
				Fix: "send JSON with Content-Type: application/json"}
		}
	}
	if r.ContentLength > limit {
		return nil, tooLarge(r.ContentLength, limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(-1, limit)
	case err != nil:
		return nil, &Problem{Type: ProblemInvalid, Status: http.StatusBadRequest, Detail: "the body could not be read: " + err.Error(), Fix: "send the request again"}
	case len(b) == 0:
		return nil, &Problem{Type: ProblemInvalid, Status: http.StatusBadRequest, Detail: "the body is empty", Fix: "send a JSON object (docs/api.md)"}
	}
	return b, nil
}

func tooLarge(size, limit int64) *Problem {
	detail := fmt.Sprintf("the body is over the limit of %d bytes", limit)
	if size > 0 {
		detail = fmt.Sprintf("the body is %d bytes; the limit is %d", size, limit)
	}
	return &Problem{Type: ProblemTooLarge, Status: http.StatusRequestEntityTooLarge, Detail: detail,
		Fix: "keep metadata short and references brief; send at most 100 reminders a batch"}
}

// noBody refuses a body on a request that takes none.
func noBody(r *http.Request) *Problem {
	if r.ContentLength > 0 {
		return &Problem{Type: ProblemInvalid, Status: http.StatusBadRequest, Detail: r.Method + " takes no body", Fix: "send it without one"}
	}
	return nil
}
