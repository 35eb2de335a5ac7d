package main

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/nudgehq/nudge/internal/deployment"
)

var assetHash = regexp.MustCompile(`[0-9a-f]{64}`)

// normalize drops what differs between a CLI synth and a test synth (CDK
// metadata) and what changes with every code change (asset hashes), so
// that the comparison sees infrastructure only.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(assetHash.ReplaceAllString(string(b), "ASSET")), &m); err != nil {
		t.Fatal(err)
	}
	res := m["Resources"].(map[string]any)
	delete(res, "CDKMetadata")
	for _, r := range res {
		delete(r.(map[string]any), "Metadata")
	}
	if c, ok := m["Conditions"].(map[string]any); ok {
		delete(c, "CDKMetadataAvailable")
	}
	return m
}

// TestTemplateMatchesTheSnapshot compares the dev stack with the committed
// snapshot, infra/testdata/Nudge-dev.template.json. A change to the
// infrastructure fails here until `make snapshot` records it (review it
// with `make diff` first); a change to the functions' code does not.
func TestTemplateMatchesTheSnapshot(t *testing.T) {
	_, tpl := synth(t, deployment.Dev())
	raw, err := os.ReadFile("testdata/Nudge-dev.template.json")
	if err != nil {
		t.Fatalf("%v; create it with `make snapshot`", err)
	}
	var snap any
	if err := json.Unmarshal(raw, &snap); err != nil {
		t.Fatal(err)
	}
	got, want := normalize(t, map[string]any(toJSON(t, tpl))), normalize(t, snap)
	if reflect.DeepEqual(got, want) {
		return
	}
	g, w := got.(map[string]any), want.(map[string]any)
	for _, section := range []string{"Parameters", "Resources", "Conditions", "Outputs", "Rules"} {
		gs, _ := g[section].(map[string]any)
		ws, _ := w[section].(map[string]any)
		for id := range gs {
			if !reflect.DeepEqual(gs[id], ws[id]) {
				t.Errorf("%s.%s differs from the snapshot", section, id)
			}
		}
		for id := range ws {
			if _, ok := gs[id]; !ok {
				t.Errorf("%s.%s is in the snapshot but no longer in the stack", section, id)
			}
		}
	}
	t.Error("the stack changed: review with `make diff`, then record it with `make snapshot`")
}
