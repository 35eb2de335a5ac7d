package failure

import (
	"errors"
	"fmt"
	"testing"
)

func TestChainFirstDefiniteAnswerWins(t *testing.T) {
	t.Parallel()
	var asked []string
	c := Chain{
		ClassifierFunc(func(error) (Outcome, bool) { asked = append(asked, "a"); return Outcome{}, false }),
		ClassifierFunc(func(error) (Outcome, bool) {
			asked = append(asked, "b")
			return Outcome{Kind: KindPermanent, Class: "b"}, true
		}),
		ClassifierFunc(func(error) (Outcome, bool) { asked = append(asked, "c"); return Outcome{}, true }),
	}
	if got := c.Classify(errors.New("x")); got.Class != "b" {
		t.Fatalf("got %+v", got)
	}
	if fmt.Sprint(asked) != "[a b]" {
		t.Fatalf("asked %v, want [a b]", asked)
	}
}
