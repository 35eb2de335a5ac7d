package ses

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/pkg/failure/awsfailure"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snsprovider "github.com/nudgehq/nudge/internal/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider"

	"github.com/nudgehq/nudge/pkg/failure"
)

func TestValidEmail(t *testing.T) {
	for s, want := range map[string]bool{
		"ana@example.com": true, "ana.lopez+renewals@mail.example.co.uk": true, "o'brien@example.ie": true, "a@xn--bcher-kva.example": true,
		"": false, "ana": false, "ana@": false, "@example.com": false, "ana@example": false, "ana@@example.com": false,
		"Ana <ana@example.com>": false, ".ana@example.com": false, "ana.@example.com": false, "a..b@example.com": false,
		"ana@-example.com": false, "ana@example..com": false, "añá@example.com": false, "ana@bücher.example": false,
		"ana@[192.0.2.1]": false, strings.Repeat("a", 65) + "@example.com": false, "a@" + strings.Repeat("b", 250) + ".com": false,
	} {
		if ValidEmail(s) != want {
			t.Errorf("ValidEmail(%q) = %v, want %v", s, !want, want)
		}
	}
}

func TestTemplateVariables(t *testing.T) {
	for body, want := range map[string]string{
		"Your {{plan}} plan renews on {{ renewsOn }}":                         "plan,renewsOn",
		"{{#if where}} at {{where}}{{/if}}":                                   "",
		"{{~#if opt~}}{{opt}}{{~/if~}} {{~name~}}":                            "name",
		"{{{reference}}} {{customer.name}}":                                   "customer,reference",
		"{{#each items}}{{name}} {{this}} {{@index}}{{/each}}":                "items",
		"{{#with customer}}{{name}}{{/with}}":                                 "customer",
		"{{#if a}}{{a}}{{else if b}}{{b}}{{else}}none{{/if}}":                 "",
		"{{!-- {{x}} --}}{{! {{y}} }}{{z}}":                                   "z",
		"{{^missing}}no {{missing}}{{/missing}} {{lookup map key}} {{../up}}": "",
		"{{[first name]}} {{this.name}}":                                      "",
		"{{#unless paid}}pay {{amount}}{{/unless}}":                           "amount",
	} {
		got := strings.Join(Template{Subject: "s", Text: body}.Variables(), ",")
		if got != want {
			t.Errorf("Variables(%q) = %q, want %q", body, got, want)
		}
	}
}

// TestAnUnreadableSuccessIsAmbiguous: SES or SNS answered 200 but the
// answer could not be read; the request was handled, so a retry may be a
// second message.
func TestAnUnreadableSuccessIsAmbiguous(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"MessageId":`)) // cut
	}))
	defer srv.Close()
	creds := credentials.NewStaticCredentialsProvider("local", "local", "")
	ses, _ := New(Config{From: "a@example.com", Client: sesv2.New(sesv2.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(srv.URL)})})
	_, err := ses.Send(context.Background(), provider.Request{Address: "b@example.com", TemplateRef: "t"}, "k")
	if o := awsfailure.Default.Classify(err); o.Kind != failure.KindAmbiguous {
		t.Errorf("SES: %v classified %v/%s, want ambiguous", err, o.Kind, o.Class)
	}
	pub, _ := snsprovider.New(snsprovider.Config{TopicARN: "arn:aws:sns:us-east-1:123456789012:t", Client: sns.New(sns.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(srv.URL)})})
	_, err = pub.Send(context.Background(), provider.Request{ReminderID: "r"}, "k")
	if o := awsfailure.Default.Classify(err); o.Kind != failure.KindAmbiguous {
		t.Errorf("SNS: %v classified %v/%s, want ambiguous", err, o.Kind, o.Class)
	}
}

func TestSESAuthorisationAndCredentialAnswers(t *testing.T) {
	for code, want := range map[string]struct {
		kind  failure.Kind
		class failure.Class
	}{
		"AccessDeniedException":               {failure.KindPermanent, failure.ClassConfig},
		"InvalidSignatureException":           {failure.KindRetry, failure.ClassAWS},
		"MissingAuthenticationTokenException": {failure.KindRetry, failure.ClassAWS},
		"ExpiredTokenException":               {failure.KindRetry, failure.ClassAWS},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Amzn-ErrorType", code)
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"no"}`))
		}))
		creds := credentials.NewStaticCredentialsProvider("local", "local", "")
		ses, _ := New(Config{From: "a@example.com", Client: sesv2.New(sesv2.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(srv.URL)})})
		_, err := ses.Send(context.Background(), provider.Request{Address: "b@example.com", TemplateRef: "t"}, "k")
		if o := awsfailure.Default.Classify(err); o.Kind != want.kind || o.Class != want.class {
			t.Errorf("%s: classified %v/%s, want %v/%s", code, o.Kind, o.Class, want.kind, want.class)
		}
		srv.Close()
	}
}

func TestTagValueIsReversibleAndFitsSES(t *testing.T) {
	for in, want := range map[string]string{"rem-184": "rem-184", "rem_1.a": "rem__1_da", "a:b": "a_cb"} {
		if got := TagValue(in); got != want {
			t.Errorf("TagValue(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat(".", 128)
	if got := TagValue(long); len(got) > 256 || strings.Trim(got, "_d") != "" {
		t.Errorf("a 128-dot id encodes to %d characters", len(got))
	}
	for _, in := range []string{"rem-184", "rem_1.a", "a:b", "__", "_d", "x_y_z", long, "héllo wörld", "", "rem-2026.11.30_a:b"} {
		if got, err := TagValueDecode(TagValue(in)); err != nil || got != in {
			t.Errorf("TagValueDecode(TagValue(%q)) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"a_", "a_q", "a.b", "a b", "_x12", "_xzzzz", "a@b"} {
		if got, err := TagValueDecode(bad); err == nil {
			t.Errorf("TagValueDecode(%q) = %q; want an error: TagValue never writes it", bad, got)
		}
	}
}
