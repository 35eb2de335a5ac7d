// Package browsertest drives headless Chromium in tests, to prove pages
// work in a real browser: with chromedp, on Debian's Chromium as the
// project's scripts install it (standin.InstallChromium, run by nudge local
// exec), with a fresh profile per test.
//
// A Browser fails its test when a page writes an error to the console (a
// console.error, an uncaught exception, a resource the Content-Security-
// Policy blocked or that failed to load), takes screenshots into
// .local/screenshots, and moves with the keyboard alone (Tab to an
// element, type, Enter), as a person without a mouse would.
//
// Start skips its test when Chromium is missing, unless the stand-ins are
// required (NUDGE_REQUIRE_STANDINS, CI), where it fails, as it always does
// when Chromium is there and does not start. Only tests import it: chromedp
// stays out of the binaries.
package browsertest
