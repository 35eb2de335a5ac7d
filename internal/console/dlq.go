package console

// The dead letters: the DLQ reviewed and grouped (GET /dlq), and the
// redrive of a chosen, bounded selection of a group: chosen (POST
// /dlq/select) and held, confirmed on a page that shows exactly what will
// move (GET /dlq/selections/{id}), then moved (POST /dlq/redrive) or put
// back (POST /dlq/release). The reading, choosing and moving are
// internal/redrive's, as for `nudge dlq list` and `nudge dlq redrive`.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/pkg/failure"
)

// deadLetters serves the DLQ's pages; held are the selections awaiting
// their confirmation.
type deadLetters struct {
	s    *Server
	held *holds
}

// errNoDLQ answers the DLQ's pages of a console without a redriver.
var errNoDLQ = errors.New("this console has no DLQ to show: it was started without the stage's queues (no redriver); " +
	"start `nudge console` for a stage whose queues it can reach")

// redriver makes the operator's redriver, or says there is none.
func (d *deadLetters) redriver() (*redrive.Redriver, error) {
	if d.s.cfg.Redriver == nil {
		return nil, errNoDLQ
	}
	return d.s.cfg.Redriver(d.s.by())
}

// letterGroup is the DLQ's letters of one error class and reason.
type letterGroup struct {
	Class  failure.Class
	Reason string
	// Deliveries counts its letters; Messages their copies in the DLQ.
	Deliveries, Messages int
	// Oldest and Newest are when its first and last letters were
	// dead-lettered, and how long ago.
	Oldest, Newest       string
	OldestAge, NewestAge time.Duration
	// Helps counts the letters a redrive would help (Letter.Redrivable);
	// Not the others, by why not (Letter.Why), as `nudge dlq list` says.
	Helps int
	Not   []whyCount
	// Settled counts the letters whose delivery already ended another way,
	// which a redrive moves only when told to (the consumer retires them).
	Settled int
	Letters []letterRow
}

// whyCount is how many letters a redrive would not help, for one reason.
type whyCount struct {
	Why   string
	Count int
}

// letterRow is a letter as the pages show it.
type letterRow struct {
	redrive.Letter
	Age string
	// To is where a redrive sends it, or "no: why".
	To string
}

func rowOf(l redrive.Letter) letterRow {
	to := l.Destination
	if !l.Redrivable {
		to = "no: " + l.Why
	}
	return letterRow{Letter: l, Age: l.Age().String(), To: to}
}

// groupLetters groups letters by class and reason, the largest group
// first, and within one the oldest letter first.
func groupLetters(letters []redrive.Letter) []*letterGroup {
	byKey := map[[2]string]*letterGroup{}
	var out []*letterGroup
	for _, l := range letters {
		k := [2]string{string(l.ErrorClass), l.Reason}
		g := byKey[k]
		if g == nil {
			g = &letterGroup{Class: l.ErrorClass, Reason: l.Reason, Oldest: ledger.Format(l.DeadLetteredAt), OldestAge: l.Age()}
			byKey[k] = g
			out = append(out, g)
		}
		g.Deliveries++
		g.Messages += l.Copies
		if l.Age() > g.OldestAge {
			g.Oldest, g.OldestAge = ledger.Format(l.DeadLetteredAt), l.Age()
		}
		if g.Newest == "" || l.Age() < g.NewestAge {
			g.Newest, g.NewestAge = ledger.Format(l.DeadLetteredAt), l.Age()
		}
		switch {
		case l.Redrivable:
			g.Helps++
		default:
			if l.Settled() {
				g.Settled++
			}
			found := false
			for i := range g.Not {
				if g.Not[i].Why == l.Why {
					g.Not[i].Count++
					found = true
				}
			}
			if !found {
				g.Not = append(g.Not, whyCount{Why: l.Why, Count: 1})
			}
		}
		g.Letters = append(g.Letters, rowOf(l))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Deliveries > out[j].Deliveries })
	return out
}

// dlqPage is the dead letters page's data.
type dlqPage struct {
	DLQ, Target string
	Limit       int
	// Deliveries and Messages count what was read.
	Deliveries, Messages int
	Groups               []*letterGroup
	// Warning says what went wrong after the read (a release).
	Warning string
}

// list is GET /dlq: the DLQ grouped, as `nudge dlq list` reviews it; the
// messages stay in the DLQ. Its JSON twin is `nudge dlq list --json`'s.
func (d *deadLetters) list(w http.ResponseWriter, r *http.Request) {
	s := d.s
	limit := s.cfg.DLQRead
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 1000 {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("limit %q: read 1 to 1000 messages (?limit=100)", q))
			return
		}
		limit = n
	}
	rd, err := d.redriver()
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	letters, err := rd.List(r.Context(), limit)
	p := dlqPage{DLQ: rd.DLQ(), Target: rd.Target(), Limit: limit}
	switch {
	case errors.Is(err, redrive.ErrNotReleased):
		p.Warning = err.Error()
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if letters == nil {
		letters = []redrive.Letter{}
	}
	for _, l := range letters {
		p.Messages += l.Copies
	}
	p.Deliveries, p.Groups = len(letters), groupLetters(letters)
	s.render(w, r, http.StatusOK, "dlq", "Dead letters", p, map[string]any{"dlq": rd.DLQ(), "messages": letters})
}

// choice is a selection's filter, as the group's form posts it.
type choice struct {
	Filter redrive.Filter
	// OlderThan is the form's older-than, as given.
	OlderThan string
}

// choiceOf reads and checks the selection form.
func choiceOf(r *http.Request) (choice, error) {
	c := choice{Filter: redrive.Filter{Class: failure.Class(r.PostFormValue("class")), Reason: r.PostFormValue("reason"), Max: 10}}
	if v := strings.TrimSpace(r.PostFormValue("max")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return c, fmt.Errorf("at most %q: redrive 1 to 1000 messages at a time (a redrive is a bounded batch)", v)
		}
		c.Filter.Max = n
	}
	if v := strings.TrimSpace(r.PostFormValue("olderThan")); v != "" {
		age, err := time.ParseDuration(v)
		if err != nil || age < 0 {
			return c, fmt.Errorf("older than %q: give a duration such as 30m, 6h or 336h, or nothing", v)
		}
		c.Filter.OlderThan, c.OlderThan = age, v
	}
	c.Filter.IncludeSettled = r.PostFormValue("includeSettled") == "on"
	if c.Filter.Class == "" {
		return c, errors.New("choose a group of the dead letters page: its class is missing")
	}
	return c, nil
}

// choose is POST /dlq/select: Select a bounded selection of one group,
// hold it under a random id, and show it for confirmation.
func (d *deadLetters) choose(w http.ResponseWriter, r *http.Request) {
	s := d.s
	c, err := choiceOf(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if n, until := d.held.count(s.now()); n >= s.cfg.Selections {
		s.fail(w, r, http.StatusConflict, fmt.Errorf("%d selections are held already, their messages hidden in the DLQ: redrive or cancel one, "+
			"or wait until %s, when the first one's hold ends", n, ledger.Format(until)))
		return
	}
	rd, err := d.redriver()
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	sel, err := rd.Select(r.Context(), c.Filter)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if len(sel.Chosen) == 0 {
		s.render(w, r, http.StatusOK, "dlq-confirm", "Nothing to redrive", confirmPage{DLQ: rd.DLQ(), Target: rd.Target(), Choice: c, Selection: selectionRows(sel)},
			dryRunDoc(sel))
		return
	}
	id, err := d.held.put(&hold{r: rd, sel: sel, choice: c, at: s.now()}, s.now())
	if err != nil {
		_ = rd.Release(context.WithoutCancel(r.Context()), sel.Chosen)
		s.fail(w, r, http.StatusConflict, err)
		return
	}
	s.cfg.Logger.Info("console: redrive selection held", "by", s.by(), "selection", id, "chosen", len(sel.Chosen), "until", ledger.Format(sel.Until))
	http.Redirect(w, r, "/dlq/selections/"+id, http.StatusSeeOther)
}

// confirmPage is a selection's confirmation page's data.
type confirmPage struct {
	ID          string
	DLQ, Target string
	Choice      choice
	Selection   selectionView
	// Until is when the hold ends; Left how long until then.
	Until, Left string
}

// selectionView is a selection as the page shows it.
type selectionView struct {
	Scanned int
	Chosen  []letterRow
	// Passed are the reasons the other letters read were left, counted.
	Passed []whyCount
}

func selectionRows(sel *redrive.Selection) selectionView {
	v := selectionView{Scanned: sel.Scanned}
	for _, l := range sel.Chosen {
		v.Chosen = append(v.Chosen, rowOf(l))
	}
	count := map[string]int{}
	for _, l := range sel.Passed {
		if count[l.Why] == 0 {
			v.Passed = append(v.Passed, whyCount{Why: l.Why})
		}
		count[l.Why]++
	}
	for i := range v.Passed {
		v.Passed[i].Count = count[v.Passed[i].Why]
	}
	return v
}

// dryRunDoc is `nudge dlq redrive --dry-run --json`'s document.
func dryRunDoc(sel *redrive.Selection) map[string]any {
	return map[string]any{"dryRun": true, "scanned": sel.Scanned, "wouldMove": nonNilLetters(sel.Chosen), "left": nonNilLetters(sel.Passed)}
}

func nonNilLetters(ls []redrive.Letter) []redrive.Letter {
	if ls == nil {
		return []redrive.Letter{}
	}
	return ls
}

// confirm is GET /dlq/selections/{id}: exactly the letters that will
// move, and the buttons that move them or put them back.
func (d *deadLetters) confirm(w http.ResponseWriter, r *http.Request) {
	s := d.s
	id := r.PathValue("id")
	h, ok := d.held.get(id, s.now())
	if !ok {
		d.gone(w, r, id)
		return
	}
	p := confirmPage{ID: id, DLQ: h.r.DLQ(), Target: h.r.Target(), Choice: h.choice, Selection: selectionRows(h.sel),
		Until: ledger.Format(h.sel.Until), Left: h.sel.Until.Sub(s.now()).Round(time.Second).String()}
	doc := dryRunDoc(h.sel)
	doc["dryRun"], doc["selection"], doc["until"] = false, id, h.sel.Until
	s.render(w, r, http.StatusOK, "dlq-confirm", "Confirm the redrive", p, doc)
}

// gone answers for a selection that is unknown, expired or already used.
func (d *deadLetters) gone(w http.ResponseWriter, r *http.Request, id string) {
	d.s.fail(w, r, http.StatusGone, fmt.Errorf("the selection %q is unknown or its hold has ended (or it was redriven or cancelled already): "+
		"nothing was moved; choose again from the dead letters page", id))
}

// redrive is POST /dlq/redrive: Move exactly the held selection, as
// `nudge dlq redrive` does, and show what happened to each letter.
func (d *deadLetters) redrive(w http.ResponseWriter, r *http.Request) {
	s := d.s
	id := r.PostFormValue("selection")
	h, ok := d.held.take(id, s.now())
	if !ok {
		d.gone(w, r, id)
		return
	}
	s.cfg.Logger.Info("console: redrive", "by", s.by(), "selection", id, "letters", len(h.sel.Chosen))
	// The batch confirmed runs to its end even if the page is closed (a
	// redrive stopped halfway is safe, but not what was confirmed); it
	// stops, between two messages, when the console closes.
	res, err := h.r.Move(s.base, h.sel, nil)
	if res.Outcomes == nil {
		res.Outcomes = []redrive.Outcome{}
	}
	p := donePage{Target: h.r.Target(), Result: res}
	if err != nil {
		p.Error = err.Error()
	}
	for _, o := range res.Outcomes {
		p.Rows = append(p.Rows, outcomeRow{Key: o.DeliveryKey, Moved: o.Moved, Text: outcomeText(o)})
	}
	code := http.StatusOK
	if err != nil || res.Failed > 0 {
		code = http.StatusBadGateway
	}
	s.cfg.Logger.Info("console: redriven", "by", s.by(), "selection", id, "moved", res.Moved, "skipped", res.Skipped, "failed", res.Failed)
	s.render(w, r, code, "dlq-done", "Redriven", p, res)
}

// donePage is a redrive's result page's data.
type donePage struct {
	Target string
	Result redrive.Result
	Rows   []outcomeRow
	Error  string
}

// outcomeRow is one letter's outcome, in the CLI's words.
type outcomeRow struct {
	Key   string
	Moved bool
	Text  string
}

func outcomeText(o redrive.Outcome) string {
	switch {
	case o.Moved:
		return fmt.Sprintf("moved (ledger marked: %v; new message %s)", o.Marked, o.NewMessageID)
	case o.Problem != "":
		return "FAILED: " + o.Problem
	default:
		return "skipped: " + o.Why
	}
}

// release is POST /dlq/release: put a held selection back, visible in the
// DLQ at once; nothing moves.
func (d *deadLetters) release(w http.ResponseWriter, r *http.Request) {
	s := d.s
	id := r.PostFormValue("selection")
	h, ok := d.held.take(id, s.now())
	if ok {
		if err := h.r.Release(r.Context(), h.sel.Chosen); err != nil {
			s.fail(w, r, http.StatusBadGateway, err)
			return
		}
		s.cfg.Logger.Info("console: redrive selection released", "by", s.by(), "selection", id)
	}
	http.Redirect(w, r, "/dlq", http.StatusSeeOther)
}

// hold is a selection held for its confirmation.
type hold struct {
	r      *redrive.Redriver
	sel    *redrive.Selection
	choice choice
	// at is when it was chosen.
	at time.Time
}

// expired reports whether too little of its hold is left at now to move
// it: the time its move takes at the redriver's rate, and a tenth of the
// hold (at most 30 s) besides, so that its messages are still hidden
// until the last has moved.
func (h *hold) expired(now time.Time) bool {
	return !now.Before(h.sel.Until.Add(-holdMargin(h.sel.Until.Sub(h.at), h.r.MoveTime(len(h.sel.Chosen)))))
}

// holdMargin is what must be left of a hold of length hold to move a
// selection that takes move.
func holdMargin(hold, move time.Duration) time.Duration {
	return move + min(30*time.Second, hold/10)
}

// releaseAll puts every held selection back in the DLQ (Server.Close).
func (d *deadLetters) releaseAll(ctx context.Context) {
	d.held.mu.Lock()
	all := d.held.by
	d.held.by = nil
	d.held.mu.Unlock()
	for id, h := range all {
		if err := h.r.Release(ctx, h.sel.Chosen); err != nil {
			d.s.cfg.Logger.Warn("console: a held selection not put back; its messages come back when its hold ends", "selection", id,
				"until", ledger.Format(h.sel.Until), "error", err.Error())
		}
	}
}

// holds are the selections held, by id, at most max at a time.
type holds struct {
	mu  sync.Mutex
	max int
	by  map[string]*hold
}

// prune forgets the expired holds (their messages are visible again, or
// about to be). Called with mu held.
func (hs *holds) prune(now time.Time) {
	for id, h := range hs.by {
		if h.expired(now) {
			delete(hs.by, id)
		}
	}
}

// count returns how many are held, and when the first hold ends.
func (hs *holds) count(now time.Time) (int, time.Time) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.prune(now)
	var first time.Time
	for _, h := range hs.by {
		if first.IsZero() || h.sel.Until.Before(first) {
			first = h.sel.Until
		}
	}
	return len(hs.by), first
}

// put holds h under a new random id.
func (hs *holds) put(h *hold, now time.Time) (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("console: a selection's id: %w", err)
	}
	id := hex.EncodeToString(b)
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.by == nil {
		hs.by = map[string]*hold{}
	}
	hs.prune(now)
	if len(hs.by) >= hs.max {
		return "", fmt.Errorf("%d selections are held already: redrive or cancel one first", len(hs.by))
	}
	hs.by[id] = h
	return id, nil
}

// get returns the hold id, if it is held and not expired.
func (hs *holds) get(id string, now time.Time) (*hold, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.prune(now)
	h, ok := hs.by[id]
	return h, ok
}

// take returns the hold id and forgets it, so that only one request moves
// or releases it.
func (hs *holds) take(id string, now time.Time) (*hold, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.prune(now)
	h, ok := hs.by[id]
	delete(hs.by, id)
	return h, ok
}
