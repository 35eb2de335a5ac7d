package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
)

// TemplateCatalog is what the stack knows of the e-mail templates it
// deploys: each template's name (the templateRef deliveries give, without
// the stage's prefix) and the variables it renders (EmailTemplate.Variables).
// The stack gives it to the intake in its environment (NUDGE_SES_TEMPLATES),
// so that the intake checks a delivery's template without asking SES.
type TemplateCatalog map[string][]string

// MaxCatalogBytes is the most an encoded catalogue may take. Lambda allows
// 4 KB for a function's whole environment, names and values; the intake's
// other variables take well under the 1 KB this leaves them.
const MaxCatalogBytes = 3 << 10

// CatalogOf returns the catalogue of templates.
func CatalogOf(templates []EmailTemplate) TemplateCatalog {
	c := TemplateCatalog{}
	for _, t := range templates {
		c[t.Name] = t.Variables()
	}
	return c
}

// String encodes c as JSON, {"name":["variable",…],…}, sorted by name.
func (c TemplateCatalog) String() string {
	if c == nil {
		return "{}"
	}
	b, _ := json.Marshal(map[string][]string(c)) // a map of strings cannot fail to encode
	return string(b)
}

// CheckSize refuses a catalogue too large for the intake's environment,
// with what to do: the stack stops before it deploys.
func (c TemplateCatalog) CheckSize() error {
	if n := len(c.String()); n > MaxCatalogBytes {
		return fmt.Errorf("templates: the %d e-mail templates and the variables they render take %d bytes in the intake's environment (NUDGE_SES_TEMPLATES), "+
			"over the %d bytes Lambda's 4 KB environment leaves them: remove the templates the stage does not use from templates/email, or shorten their names and variables", len(c), n, MaxCatalogBytes)
	}
	return nil
}

// ParseTemplateCatalog reads a catalogue String wrote.
func ParseTemplateCatalog(s string) (TemplateCatalog, error) {
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
	Catalog TemplateCatalog
	// SES, if set, is asked about a name the catalogue lacks. Default: not
	// asked; such a name is not deployed.
	SES SESTemplateAPI
	// Prefix is the stage's template prefix (SESConfig.TemplatePrefix),
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
