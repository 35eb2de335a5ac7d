package ses

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/nudgehq/nudge/internal/provider/awscall"
	"github.com/nudgehq/nudge/pkg/clock"
)

// Catalog is what the stack knows of the e-mail templates it
// deploys: each template's name (the templateRef deliveries give, without
// the stage's prefix) and the variables it renders (Template.Variables).
// The stack gives it to the intake in its environment (NUDGE_SES_TEMPLATES),
// so that the intake checks a delivery's template without asking SES.
type Catalog map[string][]string

// MaxCatalogBytes is the most an encoded catalogue may take. Lambda allows
// 4 KB for a function's whole environment, names and values; the intake's
// other variables take well under the 1 KB this leaves them.
const MaxCatalogBytes = 3 << 10

// CatalogOf returns the catalogue of templates.
func CatalogOf(templates []Template) Catalog {
	c := Catalog{}
	for _, t := range templates {
		c[t.Name] = t.Variables()
	}
	return c
}

// String encodes c as JSON, {"name":["variable",…],…}, sorted by name.
func (c Catalog) String() string {
	if c == nil {
		return "{}"
	}
	b, _ := json.Marshal(map[string][]string(c)) // a map of strings cannot fail to encode
	return string(b)
}

// CheckSize refuses a catalogue too large for the intake's environment,
// with what to do: the stack stops before it deploys.
func (c Catalog) CheckSize() error {
	if n := len(c.String()); n > MaxCatalogBytes {
		return fmt.Errorf("templates: the %d e-mail templates and the variables they render take %d bytes in the intake's environment (NUDGE_SES_TEMPLATES), "+
			"over the %d bytes Lambda's 4 KB environment leaves them: remove the templates the stage does not use from templates/email, or shorten their names and variables", len(c), n, MaxCatalogBytes)
	}
	return nil
}

// ParseCatalog reads a catalogue String wrote.
func ParseCatalog(s string) (Catalog, error) {
	var c map[string][]string
	if err := json.Unmarshal([]byte(s), &c); err != nil || c == nil {
		return nil, fmt.Errorf("not the stack's template list, a JSON object of each template's name to the variables it renders (%q): %v", clipText(s), err)
	}
	for name, vars := range c {
		if !ValidTemplateRef(name, 0) {
			return nil, fmt.Errorf("the template list names %q, which is no template name (letters, digits, '-' and '_')", clipText(name))
		}
		if vars == nil {
			c[name] = []string{}
		}
	}
	return c, nil
}

func clipText(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// AskEvery is how often a DeployedTemplates asks SES at most, and how long
// it keeps SES's answer that a template does not exist.
const AskEvery = time.Minute

// DeployedTemplates tells the intake whether a templateRef names a deployed
// SES template, and which data it needs (schedule.Templates), from the
// stack's catalogue: a template the stack deployed costs no SES call. A
// deploy that adds, changes or removes a template changes the function's
// configuration, and every request after it is served by an instance that
// has the new catalogue.
//
// A name the catalogue lacks (a template created outside the stack, or
// during the moment of a deploy) is asked of SES, if SES is set, at most
// once per AskEvery per DeployedTemplates (one per warm instance), whatever
// the names: a batch naming a hundred unknown templates makes one call, not
// a hundred, and cannot use up the account's template reads (SES allows
// about one a second). What SES says is kept for AskEvery; a name asked
// while that call's minute runs is not deployed (an unknown name is refused
// for at most a minute), but one SES said it has stays known until SES can
// be asked again.
type DeployedTemplates struct {
	// Catalog is the templates the stack deployed (NUDGE_SES_TEMPLATES).
	// Default: none.
	Catalog Catalog
	// SES, if set, is asked about a name the catalogue lacks. Default: not
	// asked; such a name is not deployed.
	SES TemplateReader
	// Prefix is the stage's template prefix (Config.TemplatePrefix),
	// which SES's names begin with. Default "".
	Prefix string
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock

	mu      sync.Mutex
	asked   time.Time                 // when SES was last asked
	learned map[string]templateAnswer // SES's answers, by templateRef
}

// TemplateVariables returns the data the template ref names renders (its
// required variables), and false if no such template is deployed.
func (d *DeployedTemplates) TemplateVariables(ctx context.Context, ref string) ([]string, bool, error) {
	if vars, ok := d.Catalog[ref]; ok {
		return slices.Clone(vars), true, nil
	}
	if d.SES == nil {
		return nil, false, nil
	}
	clk := d.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	now := clk.Now()
	d.mu.Lock()
	ans, known := d.learned[ref]
	switch {
	case known && now.Sub(ans.at) < AskEvery:
		d.mu.Unlock()
		return slices.Clone(ans.vars), ans.exists, nil
	case !d.asked.IsZero() && now.Sub(d.asked) < AskEvery:
		// SES was asked less than a minute ago (about this name or another):
		// not again. A template it has stays known meanwhile.
		d.mu.Unlock()
		if known && ans.exists {
			return slices.Clone(ans.vars), true, nil
		}
		return nil, false, nil
	}
	d.asked = now // taken before the call: a concurrent request does not ask too
	d.mu.Unlock()
	vars, exists, err := readTemplate(ctx, d.SES, d.Prefix+ref)
	if err != nil {
		return nil, false, err // not remembered; SES is asked again in a minute
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.learned == nil {
		d.learned = map[string]templateAnswer{}
	}
	for name, a := range d.learned {
		if !a.exists && now.Sub(a.at) >= AskEvery {
			delete(d.learned, name) // bounded: one name a minute, and the templates SES has
		}
	}
	d.learned[ref] = templateAnswer{vars: vars, exists: exists, at: now}
	return slices.Clone(vars), exists, nil
}

// TemplateReader is the part of the SES v2 client that reads templates.
type TemplateReader interface {
	GetEmailTemplate(ctx context.Context, in *sesv2.GetEmailTemplateInput, optFns ...func(*sesv2.Options)) (*sesv2.GetEmailTemplateOutput, error)
}

var _ TemplateReader = (*sesv2.Client)(nil)

// TemplateLookup tells whether a templateRef names a deployed SES template
// and which data it needs (schedule.Templates), asking SES once per
// template for Remember (SES throttles its template reads to about one a
// second: an import of thousands of reminders makes one call per template,
// found or not). It suits one short-lived process, such as the operator
// CLI's import; the intake, whose warm instances would each ask for every
// name a caller gives, uses DeployedTemplates, which knows the stack's
// templates without a call.
type TemplateLookup struct {
	// Client reads templates. Required.
	Client TemplateReader
	// Prefix is the stage's template prefix (Config.TemplatePrefix).
	Prefix string
	// Remember is how long an answer is kept, found or not: a long-lived
	// intake (a warm Lambda instance) sees a template deployed, changed or
	// removed after it asked within this long. Default 5 minutes.
	Remember time.Duration
	// Now tells the time. Default clock.Real{}.Now.
	Now func() time.Time

	mu    sync.Mutex
	known map[string]templateAnswer
}

// readTemplate asks SES for the template name: the variables it renders,
// or false if SES has no template of that name.
func readTemplate(ctx context.Context, c TemplateReader, name string) ([]string, bool, error) {
	out, err := c.GetEmailTemplate(ctx, &sesv2.GetEmailTemplateInput{TemplateName: aws.String(name)})
	switch a, answered := awscall.AnswerOf(err); {
	case err == nil:
		var tpl Template
		if c := out.TemplateContent; c != nil {
			tpl = Template{Name: name, Subject: aws.ToString(c.Subject), HTML: aws.ToString(c.Html), Text: aws.ToString(c.Text)}
		}
		return tpl.Variables(), true, nil
	case answered && (a.Code == "NotFoundException" || a.Status == 404):
		return nil, false, nil
	}
	return nil, false, err
}

type templateAnswer struct {
	vars   []string
	exists bool
	at     time.Time
}

// TemplateVariables returns the data the template ref names needs (its
// required variables), and false if no such template is deployed.
func (t *TemplateLookup) TemplateVariables(ctx context.Context, ref string) ([]string, bool, error) {
	now := clock.Real{}.Now
	if t.Now != nil {
		now = t.Now
	}
	remember := cmp.Or(t.Remember, 5*time.Minute)
	t.mu.Lock()
	ans, known := t.known[ref]
	t.mu.Unlock()
	if known && now().Sub(ans.at) < remember {
		return ans.vars, ans.exists, nil
	}
	vars, exists, err := readTemplate(ctx, t.Client, t.Prefix+ref)
	if err != nil {
		return nil, false, err // not remembered: the next reminder asks again
	}
	ans = templateAnswer{vars: vars, exists: exists, at: now()}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known == nil {
		t.known = map[string]templateAnswer{}
	}
	t.known[ref] = ans
	return ans.vars, ans.exists, nil
}
