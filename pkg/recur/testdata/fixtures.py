#!/usr/bin/env python3
"""Writes fixtures.json: each case's occurrences by python-dateutil, the oracle
that TestFixtures holds package recur to, Wall and At exactly.

Regenerate (python-dateutil 2.9, Python 3.9 or later for zoneinfo), from the
repository's root:

    python3 pkg/recur/testdata/fixtures.py

A case is a rule, a start (a wall-clock time, RFC 5545's DTSTART) and a zone.
dateutil expands the rule on naive datetimes, in the wall clock (rrulestr,
dtstart naive); each occurrence is then resolved to UTC with zoneinfo and
fold=0, which reads a time in a gap with the offset before the transition (so
it is moved forward by the gap, RFC 5545 section 3.3.5) and a repeated time as
the first of the two: localtime.Resolve's rules. zoneinfo reads the zone
database package localtime embeds (pkg/localtime/zoneinfo.zip), never the
machine's, so both sides agree on every offset.

Each case keeps at most CAP occurrences; "complete" says whether dateutil gave
no more (the series ended), which the Go test then checks too.

Where dateutil is not what package recur implements, by RFC 5545 or by
Nudge's choice, the case is adjusted, and says so here:

  - UNTIL as a DATE ("UNTIL=20271105") with a DATE-TIME start: RFC 5545 says
    UNTIL MUST have DTSTART's value type, so it does not define this; recur
    reads it as the end of that day (23:59:59), dateutil as its midnight
    (which drops that day's occurrence). The rule is given to dateutil with
    T235959 instead; the Go test parses the DATE form.
  - UNTIL in UTC ("...Z") with a floating start: dateutil refuses the pair.
    recur compares such an UNTIL with each occurrence's instant, so the rule
    is given to dateutil without UNTIL and the occurrences are cut where
    their UTC instant passes it.

Semantics both sides share on purpose, though RFC 5545 differs:

  - A start the rule does not match (WEEKLY;BYDAY=MO from a Wednesday) is not
    an occurrence, and COUNT counts from the first that matches; RFC 5545
    says DTSTART always counts as the first occurrence (and calls a start out
    of step with its rule undefined). The "start-off-rule" cases pin this.
  - A time in a gap is resolved, not skipped (RFC 5545 3.3.10 says to ignore
    such an instance; recur's doc.go says why it does not).
"""

import datetime as dt
import itertools
import json
import os
import re
import sys
import tempfile
import zipfile
import zoneinfo

from dateutil import __version__ as dateutil_version
from dateutil.rrule import rrulestr

HERE = os.path.dirname(os.path.abspath(__file__))
ZIP = os.path.join(HERE, "..", "..", "localtime", "zoneinfo.zip")
OUT = os.path.join(HERE, "fixtures.json")
CAP = 60
MAX_BYTES = 400_000

# (name, rule, start, zone). Starts are wall-clock times as localtime.Wall
# writes them. The daylight-saving dates of 2027: Berlin 28 March (02:00 ->
# 03:00) and 31 October (03:00 -> 02:00); New York and St John's 14 March and
# 7 November (at 02:00); Lord Howe 4 April (02:00 -> 01:30) and 3 October
# (02:00 -> 02:30); Adelaide 4 April (03:00 -> 02:00) and 3 October (02:00 ->
# 03:00); Chatham 4 April (03:45 -> 02:45) and 26 September (02:45 -> 03:45);
# Santiago 4 April (00:00 -> 3 April 23:00) and 5 September (00:00 -> 01:00).
CASES = [
    # DAILY, across the changes, starting in gaps and repeats.
    ("daily-berlin-spring", "FREQ=DAILY;COUNT=10", "2027-03-24T02:30", "Europe/Berlin"),
    ("daily-berlin-start-in-gap", "FREQ=DAILY;COUNT=5", "2027-03-28T02:30", "Europe/Berlin"),
    ("daily-berlin-fall", "FREQ=DAILY;COUNT=8", "2027-10-28T02:30", "Europe/Berlin"),
    ("daily-newyork-start-in-gap", "FREQ=DAILY;COUNT=6", "2027-03-14T02:15", "America/New_York"),
    ("daily-newyork-fall-0215", "FREQ=DAILY;COUNT=6", "2027-11-05T02:15", "America/New_York"),
    ("daily-newyork-start-repeated", "FREQ=DAILY;COUNT=6", "2027-11-07T01:30", "America/New_York"),
    ("daily-lordhowe-spring", "FREQ=DAILY;COUNT=5", "2027-10-01T02:15", "Australia/Lord_Howe"),
    ("daily-lordhowe-fall", "FREQ=DAILY;COUNT=5", "2027-04-02T01:45", "Australia/Lord_Howe"),
    ("daily-chatham-spring", "FREQ=DAILY;COUNT=5", "2027-09-24T03:00", "Pacific/Chatham"),
    ("daily-chatham-fall", "FREQ=DAILY;COUNT=5", "2027-04-02T03:00", "Pacific/Chatham"),
    ("daily-santiago-spring", "FREQ=DAILY;COUNT=5", "2027-09-03T00:30", "America/Santiago"),
    ("daily-santiago-fall", "FREQ=DAILY;COUNT=5", "2027-04-02T23:30", "America/Santiago"),
    ("daily-adelaide-spring", "FREQ=DAILY;COUNT=5", "2027-10-01T02:30", "Australia/Adelaide"),
    ("daily-adelaide-fall", "FREQ=DAILY;COUNT=5", "2027-04-02T02:30", "Australia/Adelaide"),
    ("daily-unbounded-lordhowe", "FREQ=DAILY", "2027-09-10T02:15", "Australia/Lord_Howe"),
    ("daily-interval-3", "FREQ=DAILY;INTERVAL=3;COUNT=20", "2027-03-01T08:00", "Europe/Berlin"),
    ("daily-weekdays", "FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR;COUNT=20", "2027-03-10T07:45:30", "America/St_Johns"),
    ("daily-bymonth", "FREQ=DAILY;BYMONTH=1,7;COUNT=45", "2027-06-20T12:00", "Asia/Kathmandu"),
    ("daily-bymonthday", "FREQ=DAILY;BYMONTHDAY=1,15,-1;COUNT=12", "2027-01-10T09:00", "Pacific/Chatham"),
    ("daily-interval-10-until", "FREQ=DAILY;INTERVAL=10;UNTIL=20280101T000000", "2027-06-01T00:00", "America/Santiago"),
    ("daily-until-date", "FREQ=DAILY;UNTIL=20271105", "2027-10-30T01:30", "America/New_York"),
    ("daily-until-floating", "FREQ=DAILY;UNTIL=20271107T013000", "2027-11-01T01:30", "America/New_York"),
    ("daily-until-utc-fall", "FREQ=DAILY;UNTIL=20271107T053000Z", "2027-11-01T01:30", "America/New_York"),
    ("daily-until-utc-gap", "FREQ=DAILY;UNTIL=20270328T013000Z", "2027-03-25T02:30", "Europe/Berlin"),
    # WEEKLY
    ("weekly-default-day", "FREQ=WEEKLY;COUNT=10", "2027-03-03T18:00", "Europe/Berlin"),
    ("weekly-newyork-sunday-0215", "FREQ=WEEKLY;BYDAY=SU;COUNT=40", "2027-03-07T02:15", "America/New_York"),
    ("weekly-stjohns-sunday-0230", "FREQ=WEEKLY;BYDAY=SU;COUNT=40", "2027-03-07T02:30", "America/St_Johns"),
    ("weekly-unbounded-berlin", "FREQ=WEEKLY;BYDAY=SU", "2027-01-03T02:30", "Europe/Berlin"),
    ("weekly-interval-2-mwf", "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE,FR;COUNT=20", "2027-01-01T09:00", "America/New_York"),
    ("weekly-start-off-rule", "FREQ=WEEKLY;BYDAY=MO;COUNT=5", "2027-11-03T09:00", "Europe/Berlin"),
    ("weekly-interval-3-weekend-until", "FREQ=WEEKLY;INTERVAL=3;BYDAY=SA,SU;UNTIL=20271231T235959", "2027-05-09T10:00",
     "Australia/Adelaide"),
    ("weekly-wkst-monday", "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,SU;COUNT=12", "2027-02-07T08:30", "Asia/Kathmandu"),
    ("weekly-bymonth", "FREQ=WEEKLY;BYMONTH=12;BYDAY=MO,FR;COUNT=12", "2027-01-04T09:00", "Pacific/Chatham"),
    # MONTHLY
    ("monthly-last-friday", "FREQ=MONTHLY;BYDAY=-1FR;COUNT=12", "2027-01-29T18:00", "Europe/Berlin"),
    ("monthly-second-tuesday", "FREQ=MONTHLY;BYDAY=2TU;COUNT=12", "2027-01-12T09:00", "America/New_York"),
    ("monthly-second-last-monday", "FREQ=MONTHLY;BYDAY=-2MO;COUNT=12", "2027-01-18T03:00", "Pacific/Chatham"),
    ("monthly-31st", "FREQ=MONTHLY;BYMONTHDAY=31;COUNT=12", "2027-01-31T08:00", "Europe/Berlin"),
    ("monthly-default-31st", "FREQ=MONTHLY;COUNT=10", "2027-01-31T08:00", "Australia/Lord_Howe"),
    ("monthly-last-day", "FREQ=MONTHLY;BYMONTHDAY=-1;COUNT=14", "2027-01-31T09:00", "Asia/Kathmandu"),
    ("monthly-29th", "FREQ=MONTHLY;BYMONTHDAY=29;COUNT=14", "2027-01-29T09:00", "America/Santiago"),
    ("monthly-30th", "FREQ=MONTHLY;BYMONTHDAY=30;COUNT=14", "2027-01-30T09:00", "Australia/Adelaide"),
    ("monthly-interval-3", "FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=15;COUNT=8", "2027-02-15T12:00", "America/St_Johns"),
    ("monthly-friday-13th", "FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR;COUNT=6", "2027-01-01T13:13", "Europe/Berlin"),
    ("monthly-first-weekday-ish", "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYMONTHDAY=1,2,3;COUNT=12", "2027-01-01T09:00",
     "America/New_York"),
    ("monthly-first-and-last-monday", "FREQ=MONTHLY;BYDAY=1MO,-1MO;COUNT=10", "2027-01-04T10:00", "Australia/Lord_Howe"),
    ("monthly-fifth-monday", "FREQ=MONTHLY;BYDAY=5MO;COUNT=8", "2027-01-01T10:00", "Asia/Kathmandu"),
    ("monthly-eu-change-sundays", "FREQ=MONTHLY;BYMONTH=3,10;BYDAY=-1SU;COUNT=8", "2027-03-28T02:30", "Europe/Berlin"),
    ("monthly-first-and-last-day", "FREQ=MONTHLY;BYMONTHDAY=1,-1;COUNT=10", "2027-04-01T23:30", "America/Santiago"),
    ("monthly-every-tuesday", "FREQ=MONTHLY;BYDAY=TU;COUNT=15", "2027-02-02T07:00", "America/St_Johns"),
    ("monthly-start-off-rule", "FREQ=MONTHLY;BYDAY=-1FR;COUNT=4", "2027-05-03T09:00", "Europe/Berlin"),
    # YEARLY
    ("yearly-feb-29", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;COUNT=5", "2028-02-29T09:00", "Europe/Berlin"),
    ("yearly-default-feb-29", "FREQ=YEARLY;COUNT=6", "2028-02-29T09:00", "America/New_York"),
    ("yearly-20th-monday", "FREQ=YEARLY;BYDAY=20MO;COUNT=6", "2027-05-17T09:00", "Australia/Adelaide"),
    ("yearly-thanksgiving", "FREQ=YEARLY;BYMONTH=11;BYDAY=4TH;COUNT=10", "2027-11-25T16:00", "America/New_York"),
    ("yearly-last-sunday", "FREQ=YEARLY;BYDAY=-1SU;COUNT=5", "2027-12-26T11:00", "Pacific/Chatham"),
    ("yearly-eu-spring-gap", "FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU;COUNT=10", "2027-03-28T02:30", "Europe/Berlin"),
    ("yearly-eu-fall-repeat", "FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU;COUNT=10", "2027-10-31T02:30", "Europe/Berlin"),
    ("yearly-us-spring-gap", "FREQ=YEARLY;BYMONTH=3;BYDAY=2SU;COUNT=10", "2027-03-14T02:15", "America/New_York"),
    ("yearly-us-fall-repeat", "FREQ=YEARLY;BYMONTH=11;BYDAY=1SU;COUNT=10", "2027-11-07T01:30", "America/New_York"),
    ("yearly-lordhowe-spring-gap", "FREQ=YEARLY;BYMONTH=10;BYDAY=1SU;COUNT=8", "2027-10-03T02:15", "Australia/Lord_Howe"),
    ("yearly-santiago-spring-gap", "FREQ=YEARLY;BYMONTH=9;BYDAY=1SU;COUNT=8", "2027-09-05T00:30", "America/Santiago"),
    ("yearly-interval-2", "FREQ=YEARLY;INTERVAL=2;BYMONTH=1,7;BYMONTHDAY=1;COUNT=8", "2027-01-01T00:00", "Asia/Kathmandu"),
    ("yearly-first-of-every-month", "FREQ=YEARLY;BYMONTHDAY=1;COUNT=24", "2027-01-01T06:00", "America/St_Johns"),
    ("yearly-january-mondays", "FREQ=YEARLY;BYMONTH=1;BYDAY=MO;COUNT=15", "2027-01-04T09:00", "Europe/Berlin"),
    ("yearly-end-of-february", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=-1;COUNT=6", "2027-02-28T20:00", "Pacific/Chatham"),
    ("yearly-first-monday-last-friday", "FREQ=YEARLY;BYDAY=1MO,-1FR;COUNT=10", "2027-01-04T09:00", "America/Santiago"),
    ("yearly-53rd-monday", "FREQ=YEARLY;BYDAY=53MO;COUNT=3", "2027-01-01T09:00", "Europe/Berlin"),
    ("yearly-fifth-monday-of-february", "FREQ=YEARLY;BYMONTH=2;BYDAY=5MO;COUNT=2", "2027-01-01T09:00", "America/New_York"),
    ("yearly-until-date", "FREQ=YEARLY;UNTIL=20351231", "2027-06-15T09:00", "Australia/Adelaide"),
    ("yearly-friday-13th-in-summer", "FREQ=YEARLY;BYMONTH=6,7,8;BYMONTHDAY=13;BYDAY=FR;COUNT=5", "2027-01-01T09:00",
     "Asia/Kathmandu"),
    ("yearly-never", "FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29", "2025-01-01T09:00", "Europe/Berlin"),
]


def until_of(rule):
    m = re.search(r"UNTIL=([0-9TZ]+)", rule)
    return m.group(1) if m else None


def occurrences(rule, start, zone):
    dtstart = dt.datetime.fromisoformat(start)
    until = until_of(rule)
    cut = None
    if until and until.endswith("Z"):
        cut = dt.datetime.strptime(until, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
        rule = re.sub(r";?UNTIL=[0-9TZ]+", "", rule)
    elif until and len(until) == 8:
        rule = rule.replace("UNTIL=" + until, "UNTIL=" + until + "T235959")
    got = list(itertools.islice(rrulestr(rule, dtstart=dtstart), CAP + 1))
    out = []
    for wall in got:
        at = wall.replace(tzinfo=zoneinfo.ZoneInfo(zone), fold=0).astimezone(dt.timezone.utc)
        if cut is not None and at > cut:
            return out, True
        out.append([wall_string(wall), at.strftime("%Y-%m-%dT%H:%M:%SZ")])
    if len(out) > CAP:
        return out[:CAP], False
    return out, True


def wall_string(w):
    s = w.strftime("%Y-%m-%dT%H:%M")
    return s + w.strftime(":%S") if w.second else s


def main():
    if not dateutil_version.startswith("2.9"):
        sys.exit(f"fixtures.py: python-dateutil {dateutil_version}; the fixtures were made with 2.9")
    with tempfile.TemporaryDirectory() as tzdir:
        with zipfile.ZipFile(ZIP) as z:
            z.extractall(tzdir)
        zoneinfo.reset_tzpath([tzdir])
        for _, _, _, zone in CASES:
            if not os.path.isfile(os.path.join(tzdir, zone)):
                sys.exit(f"fixtures.py: {zone} is not in {ZIP}")
        names = [c[0] for c in CASES]
        if len(names) != len(set(names)):
            sys.exit("fixtures.py: two cases share a name")
        cases = []
        for name, rule, start, zone in CASES:
            occ, complete = occurrences(rule, start, zone)
            cases.append({"name": name, "rule": rule, "start": start, "zone": zone, "complete": complete,
                          "occurrences": occ})
    doc = {
        "generator": "pkg/recur/testdata/fixtures.py",
        "dateutil": dateutil_version,
        "cases": cases,
    }
    text = json.dumps(doc, indent=1) + "\n"
    # One occurrence a line keeps the file readable and its diffs small.
    text = re.sub(r'\[\n\s+("[^"]+"),\n\s+("[^"]+")\n\s+\]', r"[\1, \2]", text)
    if len(text) > MAX_BYTES:
        sys.exit(f"fixtures.py: {len(text)} bytes, over {MAX_BYTES}")
    with open(OUT, "w") as f:
        f.write(text)
    print(f"{OUT}: {len(cases)} cases, {sum(len(c['occurrences']) for c in cases)} occurrences, {len(text)} bytes")


if __name__ == "__main__":
    main()
