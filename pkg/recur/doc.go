// Package recur is recurring reminders: RFC 5545's recurrence rules
// (RRULE, section 3.3.10), their common part, evaluated in a reminder's
// wall clock and zone. Nudge stores a series (a rule, the first
// occurrence's local time and the zone) and creates each occurrence as a
// reminder of its own, a bounded number ahead, with an id from
// OccurrenceID that is the same however often the series is read.
//
//	r, err := recur.Parse("FREQ=MONTHLY;BYDAY=-1FR;COUNT=12") // the last Friday of 12 months
//	s := recur.Series{Rule: r, Start: start, Zone: zone}   // start: localtime.Wall, zone: localtime.LoadZone
//	if err := s.Check(); err != nil { … }                   // no occurrence, or fewer than COUNT
//	next := s.After(now, 5)                                 // the next five, each with its place N in the series
//
// # Rules
//
// Parse takes FREQ (DAILY, WEEKLY, MONTHLY, YEARLY), INTERVAL (1 to
// 1000), BYMONTH, BYMONTHDAY (1 to 31, or -31 to -1 from the month's end),
// BYDAY (MO, or with an ordinal: 2TU the second Tuesday, -1FR the last
// Friday), COUNT (1 to 1000) or UNTIL, and WKST=MO; weeks start on Monday.
// It refuses the rest with a fix (an *Error): the parts Nudge does not
// support (BYSETPOS, BYHOUR, BYMINUTE, BYSECOND, BYWEEKNO, BYYEARDAY, any
// other WKST, HOURLY and faster: a series has one time of day), a part
// given twice, COUNT with UNTIL, an ordinal with FREQ=DAILY or WEEKLY, or
// beyond ±5 where it counts within a month and ±53 within a year, and
// BYMONTHDAY with FREQ=WEEKLY. A COUNT is bounded so that checking a
// series and reading it from its start stay cheap; a longer series takes
// UNTIL, or no end. String writes a rule back in a fixed order, FREQ first.
//
// UNTIL is inclusive, and takes three forms:
//   - "20271231T235959", a local time in the series' wall clock (Rule.Until),
//     compared with each occurrence's nominal local time;
//   - "20271231T235959Z", a time in UTC (Rule.UntilUTC), an instant,
//     compared with each occurrence's instant;
//   - "20271231", a date, read as the end of that day, 23:59:59 (Until).
//     RFC 5545 wants UNTIL of DTSTART's type, so it leaves a date with a
//     date and time undefined; the end of the day is what a person means
//     by "until 31 December".
//
// # Occurrences
//
// The start is RFC 5545's DTSTART: every occurrence has its time of day,
// and the periods that INTERVAL counts begin with its day, week (Monday
// to Sunday), month or year. Within a period, the BY parts expand or limit
// by section 3.3.10's table, which comes to this: a day of the period is
// an occurrence if it is in BYMONTH, is one of BYMONTHDAY's days, and is
// one of BYDAY's days, for each part given. So:
//   - FREQ=WEEKLY;BYDAY=MO,FR: Mondays and Fridays of every week.
//   - FREQ=MONTHLY;BYDAY=2TU: the second Tuesday of every month; an
//     ordinal counts within the month for MONTHLY, and for YEARLY with
//     BYMONTH (FREQ=YEARLY;BYMONTH=11;BYDAY=4TH is Thanksgiving), and
//     within the year for YEARLY without it (FREQ=YEARLY;BYDAY=20MO is the
//     20th Monday of the year).
//   - FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR: BYMONTHDAY and BYDAY together
//     intersect, Friday the 13th.
//   - FREQ=DAILY;BYMONTH=1,7: BYMONTH limits the other frequencies, here to
//     every day of January and July.
//
// Without BYDAY or BYMONTHDAY the day comes from the start: a weekly rule
// repeats on its weekday, a monthly one on its day of the month, a yearly
// one on its day and, without BYMONTH, month.
//
// A date that does not exist is skipped, as RFC 5545 says: FREQ=MONTHLY
// from 31 January (or BYMONTHDAY=31) gives the months that have a 31st,
// and FREQ=YEARLY from 29 February leap years only. For the last day of
// every month, give BYMONTHDAY=-1. Check does not refuse such a rule.
//
// The occurrences are the dates the rule gives at or after the start, as
// python-dateutil reads them: the start itself is one only if the rule
// matches it (FREQ=WEEKLY;BYDAY=MO from a Wednesday begins the Monday
// after), and COUNT counts from the first. RFC 5545 counts DTSTART as the
// first occurrence in any case (and calls a start out of step with its
// rule undefined); Nudge's intake refuses a series whose start is not its
// first occurrence, which First gives. The occurrences end after COUNT,
// after UNTIL, or at the end of the year 9999.
//
// # Daylight saving
//
// Each occurrence has a nominal local time (Occurrence.Wall: the date and
// the start's time of day) and an instant (Occurrence.At, in UTC):
// localtime.Resolve's reading of it in the zone. A local time that does
// not exist, in the hour skipped when clocks spring forward, is moved
// forward by the gap (02:30 in Berlin on 28 March 2027 is 03:30 CEST); one
// that exists twice, when clocks fall back, is the first of the two. These
// are RFC 5545's rules for a DATE-TIME with a zone (section 3.3.5). Section
// 3.3.10 says instead to ignore a recurrence instance that does not exist;
// Nudge does not, since that would silently drop a daily 02:30 reminder
// once a year, and a reminder a series makes should fire as one made by
// hand for the same local time would.
//
// Occurrences are in order: Wall strictly increases (one occurrence a day
// at most), and At never decreases. At strictly increases but where a zone
// skips a whole day between two occurrences, as Samoa (Pacific/Apia) did
// on 30 December 2011: 09:00 on the 30th is moved forward by the gap, a
// day, to the instant of 09:00 on the 31st. That is because two
// occurrences are a day or more apart in the wall clock, and no zone's
// offset has gone up by more than a day within two days (the most, by
// 2025's database, is exactly 24 hours: Manila 1844, Kwajalein 1993,
// Kiritimati 1995, Apia and Fakaofo 2011).
//
// # Cost and termination
//
// A rule's matching days depend only on the kind of year (leap or not,
// and 1 January's weekday), so the package works a year at a time on sets
// of days. After finds the occurrences after an instant by counting the
// ones before it a year at a time, so reading a daily series five years on
// costs a few years' counts, not some 1,800 occurrences; with COUNT it
// counts the same way. A rule no date can match (FREQ=YEARLY;BYMONTH=2;
// BYMONTHDAY=30) has no occurrence at once; one that matches dates its
// interval never reaches (FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29
// from an odd year) ends once a whole cycle of the calendar and the
// interval has passed without one (the Gregorian calendar repeats every
// 400 years; with the interval, 400 times INTERVAL years at most), or at
// the year 9999. Check says so when
// the series is made, with a fix.
//
// Nothing here reads the clock.
package recur
