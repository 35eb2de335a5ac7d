package intake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// Client calls the API with SigV4-signed requests, as a function URL with
// AWS_IAM auth requires (service "lambda"). It is safe for concurrent use.
type Client struct {
	// URL is the function URL (or the local front's), without a path.
	// Required.
	URL string
	// Credentials sign each request. Required.
	Credentials aws.CredentialsProvider
	// Region is the function's region. Required.
	Region string
	// HTTP sends the requests. Default: a client with a 30 s timeout.
	HTTP *http.Client
}

// Error is an answer other than 2xx: its status and problem.
type Error struct {
	Status  int
	Problem Problem
}

func (e *Error) Error() string {
	s := fmt.Sprintf("intake: %d %s", e.Status, e.Problem.Title)
	if e.Problem.Detail != "" {
		s += ": " + e.Problem.Detail
	}
	if e.Problem.Fix != "" {
		s += "; " + e.Problem.Fix
	}
	return s
}

// Put creates the reminder in (PUT /v1/reminders/{id}).
func (c *Client) Put(ctx context.Context, in schedule.Input) (Created, error) {
	var out Created
	_, err := c.Do(ctx, http.MethodPut, "/v1/reminders/"+url.PathEscape(in.ID), in, &out)
	return out, err
}

// Get reads a reminder (GET /v1/reminders/{id}).
func (c *Client) Get(ctx context.Context, id string) (schedule.Document, error) {
	var out schedule.Document
	_, err := c.Do(ctx, http.MethodGet, "/v1/reminders/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Cancel cancels a reminder (DELETE /v1/reminders/{id}). A conflict is an
// *Error whose Problem lists each delivery.
func (c *Client) Cancel(ctx context.Context, id string) (Changed, error) {
	var out Changed
	_, err := c.Do(ctx, http.MethodDelete, "/v1/reminders/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Reschedule moves a reminder (POST /v1/reminders/{id}/reschedule).
func (c *Client) Reschedule(ctx context.Context, id string, to schedule.Times) (Changed, error) {
	var out Changed
	_, err := c.Do(ctx, http.MethodPost, "/v1/reminders/"+url.PathEscape(id)+"/reschedule", to, &out)
	return out, err
}

// List reads a page of an account's reminders (GET /v1/reminders).
func (c *Client) List(ctx context.Context, account string, limit int, next string) (Page, error) {
	q := url.Values{"account": {account}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if next != "" {
		q.Set("next", next)
	}
	var out Page
	_, err := c.Do(ctx, http.MethodGet, "/v1/reminders?"+q.Encode(), nil, &out)
	return out, err
}

// Batch creates up to MaxBatch reminders (POST /v1/reminders); each has
// its own result.
func (c *Client) Batch(ctx context.Context, ins []schedule.Input) (BatchResult, error) {
	var out BatchResult
	_, err := c.Do(ctx, http.MethodPost, "/v1/reminders", map[string]any{"reminders": ins}, &out)
	return out, err
}

// Do sends a signed request with body (JSON-encoded unless it is []byte or
// nil) and decodes a 2xx answer into out. Any other answer is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (*http.Response, error) {
	var data []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			return nil, fmt.Errorf("intake: encode the body: %w", err)
		}
	}
	req, err := c.NewRequest(ctx, method, path, data)
	if err != nil {
		return nil, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("intake: %s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return res, fmt.Errorf("intake: %s %s: reading the answer: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		e := &Error{Status: res.StatusCode}
		if json.Unmarshal(b, &e.Problem) != nil || e.Problem.Status == 0 {
			e.Problem = Problem{Status: res.StatusCode, Title: http.StatusText(res.StatusCode), Detail: strings.TrimSpace(string(b))}
		}
		return res, e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return res, fmt.Errorf("intake: %s %s: the answer is not what the API gives: %w", method, path, err)
		}
	}
	return res, nil
}

// NewRequest builds a request signed with SigV4 for the lambda service.
func (c *Client) NewRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	if c.URL == "" || c.Credentials == nil || c.Region == "" {
		return nil, errors.New("intake: the client needs URL, Credentials and Region")
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("intake: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	creds, err := c.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("intake: credentials for signing: %w", err)
	}
	sum := sha256.Sum256(body)
	// wall clock: a SigV4 signature is checked against AWS's clock
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", c.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("intake: sign: %w", err)
	}
	return req, nil
}
