package awscall

import (
	"strings"
	"testing"
)

func TestScrubRemovesTheAddressHoweverItIsWritten(t *testing.T) {
	const addr = "ana.lopez@example.com"
	for _, msg := range []string{
		"Email address is not valid: ana.lopez@example.com",
		"Email address is not valid: ANA.LOPEZ@EXAMPLE.COM",
		"ȺȺȺȺȺȺȺȺȺȺ address ana.lopez@example.com rejected", // lower-casing changes byte lengths
		"KKKKKK address ana.lopez@example.com",              // the Kelvin sign
		"rejected <ana.lopez@example.com> (mailbox)",
		"rejected \"ana.lopez@example.com\"",
		"rejected ana.lopez%40example.com",
		"the local part ana.lopez was refused",
		"ana.lopez ana.lopez,ana.lopez",
		"another one: bob+tag@example.org",
	} {
		got := Scrub(msg, addr)
		low := strings.ToLower(got)
		if strings.Contains(low, "ana") || strings.Contains(low, "lopez") || strings.Contains(low, "@") || strings.Contains(low, "%40") || strings.Contains(low, "bob") {
			t.Errorf("Scrub(%q) = %q: part of an address remains", msg, got)
		}
	}
}

func TestScrubLeavesWordsThatMerelyContainTheLocalPart(t *testing.T) {
	if got := Scrub("Email address management failed for info", "info@example.com"); got != "Email address management failed for <address>" {
		t.Errorf("scrub = %q", got)
	}
	if got := Scrub("mailbox email is full", "email@example.com"); got != "mailbox <address> is full" {
		t.Errorf("scrub = %q", got)
	}
}
