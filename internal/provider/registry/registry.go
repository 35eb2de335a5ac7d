package registry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/internal/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
)

// drivers are the providers Nudge knows, in the order the docs list them.
// The first is the one a stage runs unless told otherwise. Adding a
// provider is a package declaring its provider.Driver and a line here (and,
// for a provider the stack provisions, its construct in infra/).
var drivers = []provider.Driver{
	webhook.Driver,
	ses.Driver,
	sns.Driver,
}

// All returns every driver, in the registry's order.
func All() []provider.Driver { return slices.Clone(drivers) }

// Names returns every driver's name, in the registry's order.
func Names() []string {
	names := make([]string, len(drivers))
	for i, d := range drivers {
		names[i] = d.Name
	}
	return names
}

// Default is the provider a stage runs unless told which: the first.
func Default() string { return drivers[0].Name }

// Lookup returns the driver called name.
func Lookup(name string) (provider.Driver, bool) {
	for _, d := range drivers {
		if d.Name == name {
			return d, true
		}
	}
	return provider.Driver{}, false
}

// Check refuses a name no driver has, naming the ones there are; who and
// setting say where the name came from ("consumer: NUDGE_PROVIDERS").
func Check(setting string, names []string) error {
	for _, n := range names {
		if _, ok := Lookup(n); !ok {
			return fmt.Errorf("%s names %q; the providers are %s", setting, n, strings.Join(Names(), ", "))
		}
	}
	return nil
}

// Parse reads a comma-separated list of providers, each once, in the
// order given; empty (or blank) is none.
func Parse(setting, list string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, Check(setting, out)
}

// Doors returns the intake's checks of deliveries to each of the named
// providers that has any, made from env (provider.IntakeRules.Door); nil
// when names is empty (schedule.Validator then makes every provider's from
// an empty environment).
func Doors(names []string, env provider.Env) (map[string]provider.Door, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	doors := map[string]provider.Door{}
	for _, n := range names {
		d, ok := Lookup(n)
		if !ok || d.Intake.Door == nil {
			continue
		}
		door, err := d.Intake.Door(env)
		if err != nil {
			return nil, err
		}
		doors[n] = door
	}
	return doors, nil
}

// StoodInBy returns the provider the local system stands in with kind,
// and false if none is (the first, if several are).
func StoodInBy(kind provider.StandInKind) (provider.Driver, bool) {
	for _, d := range drivers {
		if d.StandIn.Kind == kind {
			return d, true
		}
	}
	return provider.Driver{}, false
}
