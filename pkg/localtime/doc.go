// Package localtime is the recipient's time: wall-clock times in an IANA
// zone, turned into instants by RFC 5545's rules, send windows on a zone's
// wall clock, and a zone database that travels with the binary.
//
//   - Wall is a local date and time without a zone ("2027-03-28T02:30").
//   - Resolve turns a Wall in a zone into an instant. A wall-clock time
//     that does not exist (the hour skipped when clocks spring forward) is
//     moved forward by the length of the gap; one that exists twice (the
//     hour repeated when clocks fall back) is the first of the two. These
//     are RFC 5545's rules for a DATE-TIME with a TZID (section 3.3.5).
//   - Window is a send window, such as 08:00-21:00 America/New_York on
//     weekdays: Contains says whether it is open at an instant, Next when
//     it next opens.
//   - LoadZone loads a zone by its IANA name from the database embedded in
//     this package (Version says which release), never from the machine's
//     files, so a Lambda function and a laptop agree on every offset. It
//     refuses names that are not region zones, with a fix.
//
// # Resolving a wall-clock time
//
// In Europe/Berlin the clocks spring forward on 2027-03-28 from 02:00 CET
// (+01:00) to 03:00 CEST (+02:00), so no clock there reads 02:30 that day:
// Resolve reads 02:30 with the offset before the change, +01:00, which is
// 01:30Z, and the clocks read 03:30 CEST then. The time moves forward by
// the gap, an hour (Skipped).
//
// They fall back on 2027-10-31 from 03:00 CEST to 02:00 CET, so 02:30
// happens twice, at 00:30Z (CEST) and at 01:30Z (CET): Resolve takes the
// first, 00:30Z (Repeated). Every other time happens once (Exact).
//
// # Send windows
//
// A Window is open when the wall clock in its zone reads a time in [From,
// To) on a day it opens; a From after To spans midnight, so 22:00-06:00 on
// Fridays is open from Friday 22:00 to Saturday 06:00. The wall clock
// decides everything, also across the changes:
//
//   - a window whose From falls in a gap opens when the clocks jump, at
//     the first instant whose wall clock reads From or later: 02:30-05:00
//     in Berlin opens at 03:00 CEST on 2027-03-28, the instant of the
//     change. A window wholly within a gap (02:00-02:30 that day) does not
//     open that day.
//   - in a repeated hour the wall clock reads the same times twice, and
//     the window is open whenever it reads a time within it: 02:30-03:00 in
//     Berlin is open twice on 2027-10-31, from 00:30Z and from 01:30Z,
//     and a window that closed at 02:15 CEST opens again when the clocks
//     fall back to 02:00 CET.
//
// Next is the earliest instant at or after a given one at which the window
// is open, exact to the nanosecond: the instant itself, the instant the
// window's From comes round, or the instant of a change that moves the
// wall clock into the window.
//
// Nothing here reads the clock.
package localtime
