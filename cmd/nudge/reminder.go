package main

// nudge reminder show|purge: one reminder's deliveries and history; its
// deletion.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/schedule"
)

func reminderCommand(s streams) *cobra.Command {
	return newGroup("reminder", "one reminder's deliveries and history; delete it", reminderShow(s), reminderPurge(s))
}

func reminderShow(s streams) *cobra.Command {
	c := newCommand("show ID", "one reminder's deliveries, attempts, last error and history",
		`The reminder, each delivery's state, attempts, last error and receipt, whether it was handed
off, and the transition history in time order.`, s)
	o := addOperation(c)
	reveal := c.flags().Bool("reveal", false, "show recipients' addresses whole (personal data: they are masked otherwise)")
	c.run = func(ctx context.Context, args []string) int {
		out := o.out
		if len(args) != 1 {
			fmt.Fprintln(o.errs, "nudge reminder show: give one reminder id")
			return exitUsage
		}
		if err := o.connect(ctx, false); err != nil {
			return o.fail(err)
		}
		store, err := schedule.New(schedule.Config{Ledger: o.ledger})
		if err != nil {
			return o.fail(err)
		}
		v, err := store.Show(ctx, args[0])
		if err != nil {
			return o.fail(err)
		}
		doc, err := store.Document(ctx, v, *reveal)
		if err != nil {
			return o.fail(err)
		}
		if o.json {
			o.printJSON(doc)
			return exitOK
		}
		if r := v.Reminder; r != nil {
			fmt.Fprintf(out, "reminder %s  account %s  due %s  expires %s", r.ID, r.AccountRef, ledger.Format(r.DueAt), ledger.Format(r.ExpiresAt))
			switch {
			case r.Late.Policy == schedule.LateSendLate:
				fmt.Fprintf(out, "  late: send-late within %s", schedule.FormatSpan(r.Late.Within))
			case r.Late.Policy != "":
				fmt.Fprintf(out, "  late: %s", r.Late.Policy)
			}
			keys := make([]string, 0, len(r.Metadata))
			for k := range r.Metadata {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(out, "  %s=%s", k, r.Metadata[k])
			}
			fmt.Fprintln(out)
			if r.TimeZone != "" {
				fmt.Fprintf(out, "  local: due %s  expires %s\n", schedule.LocalView(r.DueAt, r.TimeZone, r.DueLocal),
					schedule.LocalView(r.ExpiresAt, r.TimeZone, r.ExpiresLocal))
			}
			if r.Series != "" {
				fmt.Fprintf(out, "  occurrence of series %s\n", r.Series)
			}
			if sv := v.Series; sv != nil {
				fmt.Fprintf(out, "  series: %s, %d occurrences created", r.Recur, sv.Created)
				switch {
				case sv.CancelledAt != "":
					fmt.Fprintf(out, "; cancelled at %s", sv.CancelledAt)
				case sv.Next != nil:
					fmt.Fprintf(out, "; next %s at %s (%s %s)", sv.Next.ID, ledger.Format(sv.Next.DueAt), sv.Next.DueLocal, r.TimeZone)
				default:
					fmt.Fprint(out, "; no occurrence left")
				}
				fmt.Fprintln(out)
			}
		} else {
			fmt.Fprintf(out, "reminder %s  (no reminder item: its deliveries were written directly)\n", args[0])
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\nDELIVERY\tSTATUS\tHANDED OFF\tATTEMPTS\tDUE\tLAST ERROR\tRECEIPT\tNEXT ATTEMPT")
		for _, d := range doc.Deliveries {
			lastErr := string(d.LastErrorClass)
			if d.LastError != "" {
				lastErr += ": " + d.LastError
			}
			handed := "-"
			switch {
			case d.HandedOff == nil:
			case *d.HandedOff:
				handed = "yes"
			default:
				handed = "no, from " + d.PublishAt
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.Key, d.Told(), handed, d.Attempts, d.DueAt, dash(lastErr), dash(d.Receipt), dash(d.NextAttemptAt))
		}
		tw.Flush()
		if v.Reminder != nil {
			printWindows(out, *v.Reminder)
		}
		for _, d := range doc.Deliveries {
			if d.Feedback != nil && d.Feedback.Failed {
				fmt.Fprintf(out, "\nFAILED AFTER SENDING: %s: %s (the recipient did not get it, or complained of it)\n", d.Key, d.Told())
			}
		}
		addresses := false
		for _, d := range doc.Deliveries {
			if d.Address != "" {
				if !addresses {
					note := "masked; --reveal shows them"
					if *reveal {
						note = "revealed: personal data"
					}
					fmt.Fprintf(out, "\nADDRESSES (%s)\n", note)
					addresses = true
				}
				fmt.Fprintf(out, "  %s  %s\n", d.Key, d.Address)
			}
		}
		fmt.Fprintln(out, "\nHISTORY (the last entries of each delivery; the logs hold every transition)")
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, e := range doc.History {
			detail := e.Note
			if e.Class != "" {
				detail = string(e.Class) + ": " + detail
			}
			attempt := ""
			if e.Attempt > 0 {
				attempt = fmt.Sprintf("attempt %d", e.Attempt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At, e.Delivery, e.Status, attempt, detail)
		}
		tw.Flush()
		return exitOK
	}
	return c.cmd
}

func reminderPurge(s streams) *cobra.Command {
	c := newCommand("purge ID", "delete a reminder, its deliveries and their history",
		`Delete the reminder, its deliveries and their history (a deletion request). Refused, removing
nothing, while a delivery is being sent.`, s)
	o := addOperation(c)
	yes := c.flags().Bool("yes", false, "do not ask for confirmation")
	c.run = func(ctx context.Context, args []string) int {
		out := o.out
		if len(args) != 1 {
			fmt.Fprintln(o.errs, "nudge reminder purge: give one reminder id")
			return exitUsage
		}
		id := args[0]
		if err := o.connect(ctx, false); err != nil {
			return o.fail(err)
		}
		if stored, err := o.ledger.ReadReminder(ctx, id); err != nil {
			return o.fail(err)
		} else if stored.Series != nil {
			return purgeSeries(ctx, o, *stored.Series, *yes)
		}
		if !*yes {
			if o.json {
				fmt.Fprintln(o.errs, "nudge reminder purge: --json cannot ask for confirmation; add --yes")
				return exitUsage
			}
			stored, err := o.ledger.ReadReminder(ctx, id)
			if err != nil {
				return o.fail(err)
			}
			if stored.Empty() {
				return o.fail(fmt.Errorf("%q: %w", id, schedule.ErrNoReminder))
			}
			fmt.Fprintf(out, "This deletes reminder %s for good: %d item(s) and %d deliveries with their history:\n", id, stored.OtherItems(), len(stored.Deliveries))
			for _, d := range stored.Deliveries {
				fmt.Fprintf(out, "  %s  %s\n", d.Key(), d.Status)
			}
			if !confirm(o.in, out, "Purge it?") {
				fmt.Fprintln(out, "Nothing was deleted.")
				return exitRefused
			}
		}
		p, err := o.ledger.Purge(ctx, id)
		if err != nil {
			return o.fail(err)
		}
		if o.json {
			keys := []string{}
			for _, d := range p.Deliveries {
				keys = append(keys, d.Key().String())
			}
			o.printJSON(map[string]any{"reminderId": id, "removedDeliveries": keys, "removedOtherItems": len(p.OtherItems)})
			return exitOK
		}
		fmt.Fprintf(out, "purged %s: removed %d deliveries with their history", id, len(p.Deliveries))
		if len(p.OtherItems) > 0 {
			fmt.Fprintf(out, " and the reminder item")
		}
		fmt.Fprintln(out, ".")
		for _, d := range p.Deliveries {
			fmt.Fprintf(out, "  %s (was %s)\n", d.Key(), d.Status)
		}
		fmt.Fprintln(out, "The functions' logs keep ids and outcomes (never names or addresses) until their retention ends; a message still on the queue is dead-lettered as not-found.")
		return exitOK
	}
	return c.cmd
}

// printWindows lists the send windows of r's deliveries and fallbacks
// under SEND WINDOWS, each with its zone; nothing if none has one.
func printWindows(out io.Writer, r schedule.Reminder) {
	windows := false
	for _, d := range r.Deliveries {
		for _, w := range []struct {
			key    string
			window localtime.Window
		}{{r.Key(d).String(), d.Window}, {fallbackKey(r.ID, d.Fallback), fallbackWindow(d.Fallback)}} {
			if w.window.IsZero() {
				continue
			}
			if !windows {
				fmt.Fprintln(out, "\nSEND WINDOWS (never sent outside them; due outside, a delivery waits for the opening)")
				windows = true
			}
			fmt.Fprintf(out, "  %s  %s\n", w.key, w.window)
		}
	}
}

// fallbackKey and fallbackWindow are f's key in reminder id and its send
// window; "" and none for no fallback.
func fallbackKey(id string, f *schedule.Fallback) string {
	if f == nil {
		return ""
	}
	return f.Key(id).String()
}

func fallbackWindow(f *schedule.Fallback) localtime.Window {
	if f == nil {
		return localtime.Window{}
	}
	return f.Window
}

// purgeSeries deletes series sr for good: it is cancelled first, so that
// no occurrence is created any more, then each occurrence it created is
// purged (stopping at one in flight: run the purge again once its lease
// ends), then the series item.
func purgeSeries(ctx context.Context, o *operation, sr ledger.Series, yes bool) int {
	out, id := o.out, sr.Item.ID
	if !yes {
		if o.json {
			fmt.Fprintln(o.errs, "nudge reminder purge: --json cannot ask for confirmation; add --yes")
			return exitUsage
		}
		fmt.Fprintf(out, "%s is a series (%s). This cancels it, then deletes for good each occurrence it created, with its deliveries and history, and then the series.\n",
			id, sr.Item.Recur)
		if !confirm(o.in, out, "Purge it?") {
			fmt.Fprintln(out, "Nothing was deleted.")
			return exitRefused
		}
	}
	sr, err := o.ledger.CancelSeries(ctx, id)
	if err != nil {
		return o.fail(err)
	}
	ids, err := schedule.CreatedOccurrences(sr, schedule.DefaultSeriesAhead)
	if err != nil {
		return o.fail(err)
	}
	var purged, inFlight []string
	for _, oid := range ids {
		// An id may hold a reminder created by hand under an
		// occurrence's id: not the series' to delete.
		if st, err := o.ledger.ReadReminder(ctx, oid); err != nil {
			return o.fail(err)
		} else if st.Reminder == nil || st.Reminder.Series != id {
			continue // purged already, never created (missed), or not the series'
		}
		if _, err := o.ledger.Purge(ctx, oid); errors.Is(err, ledger.ErrNotFound) {
			continue
		} else if errors.Is(err, ledger.ErrInFlight) {
			inFlight = append(inFlight, oid) // the others are purged still
			continue
		} else if err != nil {
			fmt.Fprintf(o.errs, "nudge reminder purge: series %s is cancelled, and %d of its occurrences purged; %s was not: run the purge again\n", id, len(purged), oid)
			return o.fail(err)
		}
		purged = append(purged, oid)
	}
	if len(inFlight) > 0 {
		// The series item stays: it is what finds its occurrences when
		// the purge is run again.
		fmt.Fprintf(o.errs, "nudge reminder purge: series %s is cancelled, and %d of its occurrences purged; %d are sending now (%s) and were not: "+
			"run the purge again in a few minutes, once their sends end\n", id, len(purged), len(inFlight), strings.Join(inFlight, ", "))
		return exitRefused
	}
	if _, err := o.ledger.Purge(ctx, id); err != nil {
		return o.fail(err)
	}
	if o.json {
		o.printJSON(map[string]any{"seriesId": id, "removedOccurrences": append([]string{}, purged...)})
		return exitOK
	}
	fmt.Fprintf(out, "purged series %s and %d occurrences:\n", id, len(purged))
	for _, oid := range purged {
		fmt.Fprintf(out, "  %s\n", oid)
	}
	return exitOK
}
