#!/usr/bin/env python3
"""Writes resolve.json: wall-clock times around every change of offset in
2020-2040 in eight zones, each with the instant RFC 5545 resolves it to,
as an oracle for localtime.Resolve that shares none of its code.

Regenerate it, after update-zoneinfo.sh has changed zoneinfo.zip, from
pkg/localtime:

    python3 testdata/resolve.py > testdata/resolve.json

It needs Python 3.9 or later and nothing else. It reads the same zone
database as the package: it unpacks ../zoneinfo.zip into a temporary
directory and points zoneinfo there, never at the machine's files or the
tzdata package.

Python's zoneinfo follows PEP 495: a wall time with fold=0 that falls in a
gap is read with the offset in force before the change, which moves it
forward by the gap, and one that happens twice is the first of the two;
both are RFC 5545's rules (section 3.3.5). Each case says how it resolved:

  skipped   the time read with fold=0 does not come back as itself
  exact     fold=0 and fold=1 give the same instant
  repeated  they give different instants
"""

import json
import pathlib
import re
import sys
import tempfile
import zipfile
import zoneinfo
from datetime import datetime, timedelta, timezone

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # a 30-minute change
    "Pacific/Chatham",  # +12:45 and +13:45
    "Australia/Adelaide",  # +9:30 and +10:30
    "America/St_Johns",  # -3:30 and -2:30
    "Asia/Kathmandu",  # +5:45, no changes
    "America/Santiago",  # changes at midnight
]
FIRST, LAST = 2020, 2040  # years, inclusive
STEP = 1800  # seconds between looks for a change; no zone here changes twice within it

here = pathlib.Path(__file__).resolve().parent
package = here.parent
version = re.search(r'const Version = "([^"]+)"', (package / "version.go").read_text()).group(1)


def offset(zone, unix):
    return datetime.fromtimestamp(unix, zone).utcoffset()


def changes(zone):
    """Yields (instant, offset before, offset after) for every change of
    offset in [FIRST, LAST], the instant to the second."""
    start = int(datetime(FIRST, 1, 1, tzinfo=timezone.utc).timestamp())
    end = int(datetime(LAST + 1, 1, 1, tzinfo=timezone.utc).timestamp())
    for t in range(start, end, STEP):
        before, after = offset(zone, t), offset(zone, t + STEP)
        if before == after:
            continue
        lo, hi = t, t + STEP  # offset(lo) == before, offset(hi) == after
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if offset(zone, mid) == before:
                lo = mid
            else:
                hi = mid
        yield hi, before, after


def resolve(zone, wall):
    """The instant of wall in zone by PEP 495's fold=0, and how it resolved."""
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    instant = first.astimezone(timezone.utc)
    if instant.astimezone(zone).replace(tzinfo=None) != wall:
        how = "skipped"
    elif instant == second.astimezone(timezone.utc):
        how = "exact"
    else:
        how = "repeated"
    return instant, how


def wall_string(wall):
    # As localtime.Wall.String writes it: seconds only where not zero.
    return wall.strftime("%Y-%m-%dT%H:%M:%S" if wall.second else "%Y-%m-%dT%H:%M")


def cases(name):
    zone = zoneinfo.ZoneInfo(name)
    walls = []
    for unix, before, after in changes(zone):
        at = datetime.fromtimestamp(unix, timezone.utc).replace(tzinfo=None)
        # A gap (after > before) or a repeat (after < before) runs on the
        # wall clock from at + the smaller offset to at + the larger.
        lo, hi = at + min(before, after), at + max(before, after)
        second = timedelta(seconds=1)
        walls += [lo - second, lo, lo + (hi - lo) / 2, hi - second, hi]
    for year in range(FIRST, LAST + 1):
        walls += [datetime(year, 1, 15, 12), datetime(year, 7, 15, 9, 30)]
    for wall in sorted(set(walls)):
        instant, how = resolve(zone, wall)
        yield {"zone": name, "wall": wall_string(wall), "want": instant.strftime("%Y-%m-%dT%H:%M:%SZ"), "how": how}


def main():
    with tempfile.TemporaryDirectory() as tzdir:
        with zipfile.ZipFile(package / "zoneinfo.zip") as z:
            z.extractall(tzdir)
        zoneinfo.reset_tzpath([tzdir])
        zoneinfo.ZoneInfo.clear_cache()
        assert zoneinfo.TZPATH == (tzdir,), zoneinfo.TZPATH
        all_cases = [c for name in ZONES for c in cases(name)]
    out = sys.stdout
    out.write("{\n")
    out.write(f'"generator": "testdata/resolve.py, Python {sys.version.split()[0]}",\n')
    out.write(f'"version": {json.dumps(version)},\n')
    out.write('"cases": [\n')
    out.write(",\n".join(json.dumps(c) for c in all_cases))
    out.write("\n]\n}\n")


if __name__ == "__main__":
    main()
