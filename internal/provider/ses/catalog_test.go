package ses_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/nudgehq/nudge/internal/provider/ses"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/pkg/clock"
)

// sesTemplates stands for SES's template store: it counts the reads and
// answers NotFoundException for a name it does not hold.
type sesTemplates struct {
	calls atomic.Int32
	mu    sync.Mutex
	held  map[string]string // name → text body
}

func (s *sesTemplates) add(name, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]string{}
	}
	s.held[name] = text
}

func (s *sesTemplates) GetEmailTemplate(_ context.Context, in *sesv2.GetEmailTemplateInput, _ ...func(*sesv2.Options)) (*sesv2.GetEmailTemplateOutput, error) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	text, ok := s.held[aws.ToString(in.TemplateName)]
	if !ok {
		return nil, &smithy.GenericAPIError{Code: "NotFoundException", Message: "Template does not exist"}
	}
	return &sesv2.GetEmailTemplateOutput{TemplateName: in.TemplateName,
		TemplateContent: &sestypes.EmailTemplateContent{Subject: aws.String("Hello"), Text: aws.String(text)}}, nil
}

var repoTemplates = fstest.MapFS{
	"renewal-notice/subject.txt":       {Data: []byte("Your {{plan}} plan renews")},
	"renewal-notice/body.txt":          {Data: []byte("It renews on {{renewsOn}}.{{#if note}} {{note}}{{/if}}")},
	"appointment-reminder/subject.txt": {Data: []byte("Your appointment")},
	"appointment-reminder/body.txt":    {Data: []byte("See you at {{when}}.")},
}

// TestTheStacksTemplatesAreKnownWithoutSES: the catalogue the stack passes
// (names and the variables each renders) answers for every template it
// deployed, through its encoding in the environment, with no SES call.
func TestTheStacksTemplatesAreKnownWithoutSES(t *testing.T) {
	t.Parallel()
	templates, err := ses.ReadTemplates(repoTemplates)
	if err != nil {
		t.Fatal(err)
	}
	env := ses.CatalogOf(templates).String()
	if env != `{"appointment-reminder":["when"],"renewal-notice":["plan","renewsOn"]}` {
		t.Fatalf("encoded catalogue %s", env)
	}
	catalog, err := ses.ParseCatalog(env)
	if err != nil {
		t.Fatal(err)
	}
	api := &sesTemplates{}
	d := &ses.DeployedTemplates{Catalog: catalog, SES: api, Prefix: "nudge-dev-", Clock: clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}
	for range 3 {
		for _, tc := range []struct {
			ref  string
			vars []string
		}{{"renewal-notice", []string{"plan", "renewsOn"}}, {"appointment-reminder", []string{"when"}}} {
			vars, ok, err := d.TemplateVariables(context.Background(), tc.ref)
			if err != nil || !ok || !reflect.DeepEqual(vars, tc.vars) {
				t.Fatalf("TemplateVariables(%q) = %v, %v, %v; want %v, true", tc.ref, vars, ok, err, tc.vars)
			}
		}
	}
	if n := api.calls.Load(); n != 0 {
		t.Errorf("%d SES calls for the stack's own templates; want none", n)
	}
	for _, bad := range []string{"", "[]", `{"a b":[]}`, `{"x":"y"}`} {
		if _, err := ses.ParseCatalog(bad); err == nil {
			t.Errorf("ParseTemplateCatalog(%q) accepted it", bad)
		}
	}
}

// TestUnknownTemplatesMakeAtMostOneSESCallAMinute: a batch naming a hundred
// templates nobody deployed, asked at once, makes one SES call, not a
// hundred; each is refused; the next call waits a minute.
func TestUnknownTemplatesMakeAtMostOneSESCallAMinute(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	api := &sesTemplates{}
	d := &ses.DeployedTemplates{Catalog: ses.Catalog{"renewal-notice": {"plan"}}, SES: api, Prefix: "nudge-dev-", Clock: clk}
	ask := func(n int, tag string) {
		t.Helper()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ref := fmt.Sprintf("%s-%d", tag, i)
				if _, ok, err := d.TemplateVariables(context.Background(), ref); ok || err != nil {
					t.Errorf("TemplateVariables(%q) = %v, %v; want not deployed", ref, ok, err)
				}
			}()
		}
		wg.Wait()
	}
	ask(100, "typo")
	if n := api.calls.Load(); n != 1 {
		t.Fatalf("%d SES calls for 100 unknown templates; want 1", n)
	}
	clk.Advance(ses.AskEvery - time.Second)
	ask(100, "other")
	if n := api.calls.Load(); n != 1 {
		t.Fatalf("%d SES calls within the minute; want still 1", n)
	}
	clk.Advance(time.Second)
	ask(100, "later")
	if n := api.calls.Load(); n != 2 {
		t.Fatalf("%d SES calls a minute on; want 2", n)
	}
}

// TestATemplateAddedIsAcceptedWithinAMinute: a template created after the
// intake was told it does not exist is accepted a minute later at the
// latest (a "not deployed" answer is kept no longer), and one SES has
// stays accepted while another name uses up the minute's call.
func TestATemplateAddedIsAcceptedWithinAMinute(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	api := &sesTemplates{}
	d := &ses.DeployedTemplates{SES: api, Prefix: "nudge-dev-", Clock: clk}
	ctx := context.Background()
	if _, ok, err := d.TemplateVariables(ctx, "welcome"); ok || err != nil {
		t.Fatalf("before it exists: %v, %v", ok, err)
	}
	api.add("nudge-dev-welcome", "Hello {{name}}")
	clk.Advance(30 * time.Second)
	if _, ok, _ := d.TemplateVariables(ctx, "welcome"); ok {
		t.Fatal("accepted 30 s on: the answer came from a call it should not have made")
	}
	clk.Advance(30 * time.Second)
	vars, ok, err := d.TemplateVariables(ctx, "welcome")
	if err != nil || !ok || strings.Join(vars, ",") != "name" {
		t.Fatalf("a minute after it was added: %v, %v, %v; want accepted, rendering name", vars, ok, err)
	}
	if n := api.calls.Load(); n != 2 {
		t.Errorf("%d SES calls; want 2 (one a minute)", n)
	}
	// A minute on, a typo takes the minute's call; the template SES has
	// stays accepted meanwhile.
	clk.Advance(ses.AskEvery)
	if _, ok, _ := d.TemplateVariables(ctx, "welcom"); ok {
		t.Fatal("a typo was accepted")
	}
	if _, ok, _ := d.TemplateVariables(ctx, "welcome"); !ok {
		t.Fatal("a template SES has was refused because another name used the minute's call")
	}
	if n := api.calls.Load(); n != 3 {
		t.Errorf("%d SES calls; want 3", n)
	}
}

// TestACatalogueTooLargeForLambdasEnvironmentIsRefused: past what Lambda's
// 4 KB environment leaves it, the catalogue is refused with the fix (the
// stack stops at synth, before any change).
func TestACatalogueTooLargeForLambdasEnvironmentIsRefused(t *testing.T) {
	t.Parallel()
	c := ses.Catalog{}
	for i := 0; len(c.String()) <= ses.MaxCatalogBytes; i++ {
		if err := c.CheckSize(); err != nil {
			t.Fatalf("%d bytes refused: %v", len(c.String()), err)
		}
		c[fmt.Sprintf("reminder-template-%03d", i)] = []string{"accountName", "renewsOn", "plan"}
	}
	err := c.CheckSize()
	if err == nil || !strings.Contains(err.Error(), "NUDGE_SES_TEMPLATES") || !strings.Contains(err.Error(), "templates/email") {
		t.Fatalf("%d templates, %d bytes: %v; want a refusal naming the variable and the fix", len(c), len(c.String()), err)
	}
}
