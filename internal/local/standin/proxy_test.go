package standin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProxyCountsByOperation(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) }))
	defer backend.Close()
	p, err := NewProxy(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, target := range []string{"DynamoDB_20120810.Query", "DynamoDB_20120810.Query", "AmazonSQS.SendMessageBatch", ""} {
		req, _ := http.NewRequest(http.MethodPost, p.Endpoint, strings.NewReader("{}"))
		req.Header.Set("X-Amz-Target", target)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%v %v", resp, err)
		}
		resp.Body.Close()
	}
	c := p.Counts()
	if c["Query"] != 2 || c["SendMessageBatch"] != 1 || c["other"] != 1 || p.Total() != 4 {
		t.Fatalf("counts %v", c)
	}
}
