package standin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// SentEmail is one e-mail the SES stand-in accepted, as its GET /store
// lists it.
type SentEmail struct {
	MessageID   string `json:"messageId"`
	From        string `json:"from"`
	Destination struct {
		To []string `json:"to"`
	} `json:"destination"`
	Subject string `json:"subject"`
	Body    struct {
		Text string `json:"text"`
		HTML string `json:"html"`
	} `json:"body"`
	Headers []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"headers"`
	// At is when it was accepted, in Unix seconds.
	At int64 `json:"at"`
}

// Header returns the e-mail's header name (case-insensitive), or "".
func (e SentEmail) Header(name string) string {
	for _, h := range e.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// SentEmails reads every e-mail the SES stand-in at endpoint accepted.
func SentEmails(ctx context.Context, endpoint string) ([]SentEmail, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/store", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("standin: read the SES store: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("standin: the SES store answered %d", resp.StatusCode)
	}
	var store struct {
		Emails []SentEmail `json:"emails"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&store); err != nil {
		return nil, fmt.Errorf("standin: the SES store: %w", err)
	}
	return store.Emails, nil
}
