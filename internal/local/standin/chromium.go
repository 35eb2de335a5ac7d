package standin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// ChromiumPackage is Debian's package of Chromium, which the browser tests
// drive (apt-get install chromium).
const ChromiumPackage = "chromium"

// chromiumPaths are where Chromium is looked for, in order, before PATH.
var chromiumPaths = []string{"/usr/bin/chromium"}

// chromiumNames are the names Chromium is looked for on PATH.
var chromiumNames = []string{"chromium", "chromium-browser"}

// ErrNoChromium is FindChromium's error: no Chromium on this machine.
var ErrNoChromium = errors.New("standin: no Chromium (/usr/bin/chromium, or chromium on PATH); the browser tests need it: " +
	"on Debian or Ubuntu run `apt-get install --no-install-recommends chromium` as root (nudge local exec does it when it runs as root), " +
	"elsewhere install Chromium and put it on PATH")

// ChromiumFlags are the flags the browser tests start Chromium with,
// besides a fresh --user-data-dir: headless, without the sandbox (which
// needs a user namespace that a root container lacks) and the GPU, and
// without the background connections (updates, sync, QUIC, the first-run
// page) that a closed network refuses or that wait for a lookup.
var ChromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync"}

// FindChromium returns the path of Chromium on this machine, or
// ErrNoChromium.
func FindChromium() (string, error) {
	for _, p := range chromiumPaths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	for _, n := range chromiumNames {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// InstallChromium returns the path of Chromium, installing Debian's
// package first when it is missing and this process may (root, with
// apt-get), reporting progress to log. Otherwise its error says how to
// install it.
func InstallChromium(ctx context.Context, log io.Writer) (string, error) {
	if p, err := FindChromium(); err == nil {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", ErrNoChromium
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w (installing it takes root: this process is not)", ErrNoChromium)
	}
	fmt.Fprintf(log, "standin: installing Chromium (Debian's %s, for the browser tests) with apt-get\n", ChromiumPackage)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	// Another apt-get may hold dpkg's lock: wait for it rather than fail.
	lock := "DPkg::Lock::Timeout=300"
	for _, args := range [][]string{{"-q", "-o", lock, "update"}, {"-q", "-o", lock, "install", "-y", "--no-install-recommends", ChromiumPackage}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("standin: apt-get %s: %w; install Chromium by hand (apt-get install --no-install-recommends %s)",
				args[len(args)-1], err, ChromiumPackage)
		}
	}
	p, err := FindChromium()
	if err != nil {
		return "", fmt.Errorf("standin: apt-get installed %s, and still: %w", ChromiumPackage, err)
	}
	return p, nil
}
