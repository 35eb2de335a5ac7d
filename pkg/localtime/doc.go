// Package localtime is the recipient's time: wall-clock times in an IANA
// zone, turned into instants by RFC 5545's rules, from a zone database that
// travels with the binary.
//
//   - Wall is a local date and time without a zone ("2027-03-28T02:30").
//   - Resolve turns a Wall in a zone into an instant. A wall-clock time
//     that does not exist (the hour skipped when clocks spring forward) is
//     moved forward by the length of the gap; one that exists twice (the
//     hour repeated when clocks fall back) is the first of the two. These
//     are RFC 5545's rules for a DATE-TIME with a TZID (section 3.3.5).
//   - LoadZone loads a zone by its IANA name from the database embedded in
//     this package (Version says which release), never from the machine's
//     files, so a Lambda function and a laptop agree on every offset. It
//     refuses names that are not region zones, with a fix.
//
// Nothing here reads the clock.
package localtime
