package intake_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/intake"
)

func TestFunctionURLCarriesTheEventAndTheCaller(t *testing.T) {
	f := setup(t)
	fn := intake.FunctionURL(f.h, nil)
	body, _ := json.Marshal(reminder(""))
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/v1/reminders/rem-1", Headers: map[string]string{"content-type": "application/json"},
		Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true,
		RequestContext: events.LambdaFunctionURLRequestContext{RequestID: "req-1", HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "PUT"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:role/billing"}}},
	}
	res, err := fn(context.Background(), ev)
	if err != nil || res.StatusCode != 201 || res.Headers["location"] != "/v1/reminders/rem-1" || res.Headers["content-type"] != "application/json" {
		t.Fatalf("PUT through the function URL: %+v, %v", res, err)
	}
	ev.RawPath, ev.Body, ev.IsBase64Encoded = "/v1/reminders/rem-1", "", false
	ev.RequestContext.HTTP.Method = "DELETE"
	if res, err := fn(context.Background(), ev); err != nil || res.StatusCode != 200 {
		t.Fatalf("DELETE: %+v, %v", res, err)
	}
	d, _ := f.led.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"})
	if last := d.History[len(d.History)-1]; !strings.Contains(last.Note, "arn:aws:iam::123456789012:role/billing") {
		t.Errorf("the cancel's history note %q does not name the caller", last.Note)
	}
	ev.RequestContext.HTTP.Method, ev.RawQueryString = "GET", "account=acct-1&limit=x"
	ev.RawPath = "/v1/reminders"
	if res, _ := fn(context.Background(), ev); res.StatusCode != 400 || !strings.Contains(res.Body, `"instance":"req-1"`) {
		t.Errorf("a bad listing: %+v", res)
	}
	ev.Body, ev.IsBase64Encoded = "%%%", true
	if res, err := fn(context.Background(), ev); err != nil || res.StatusCode != 400 {
		t.Errorf("a body that is not base64: %+v, %v", res, err)
	}
}

func TestTheCallersSessionNameIsNotKept(t *testing.T) {
	f := setup(t)
	fn := intake.FunctionURL(f.h, nil)
	body, _ := json.Marshal(reminder(""))
	ev := events.LambdaFunctionURLRequest{RawPath: "/v1/reminders/rem-1", Headers: map[string]string{"content-type": "application/json"}, Body: string(body),
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "PUT"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
				UserARN: "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Support/ana.silva@example.com"}}}}
	if res, _ := fn(context.Background(), ev); res.StatusCode != 201 {
		t.Fatal(res)
	}
	ev.Body, ev.RequestContext.HTTP.Method = "", "DELETE"
	fn(context.Background(), ev)
	d, _ := f.led.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"})
	note := d.History[len(d.History)-1].Note
	if strings.Contains(note, "ana.silva") || !strings.Contains(note, "assumed-role/AWSReservedSSO_Support") {
		t.Errorf("the history note %q keeps the session name, or not the role", note)
	}
	ev.RequestContext.HTTP.Method = "HEAD"
	if res, _ := fn(context.Background(), ev); res.StatusCode != 200 || res.Body != "" {
		t.Errorf("HEAD: %d with %d bytes of body", res.StatusCode, len(res.Body))
	}
	if a := f.do("GET", "/v1/reminders?account=a&next=%zz", "", nil); a.status != 400 || a.problem(t).Field != "query" {
		t.Errorf("a malformed query: %d %s", a.status, a.body)
	}
}
