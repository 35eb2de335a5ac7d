package standin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Service is a running stand-in.
type Service struct {
	// Name is "dynamodb", "sqs", "ses" or "lambda".
	Name string
	// Endpoint is its base URL on loopback.
	Endpoint string
	// Port is its port.
	Port int
	cmd  *exec.Cmd
	done chan struct{}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Options for starting a service.
type Options struct {
	// Log receives the service's output. Default: a file in the stand-in
	// folder (dir/logs/<name>-<port>.log).
	Log io.Writer
	// Env is added to the service's environment.
	Env []string
}

// keepLogs is how many earlier logs of one service the stand-in folder
// keeps: every start writes a new one, named by its port.
const keepLogs = 20

// pruneLogs deletes all but the newest keep-1 logs of name in dir, making
// room for the one about to be written. A log another process is still
// writing survives as long as that process holds it open.
func pruneLogs(dir, name string, keep int) {
	paths, _ := filepath.Glob(filepath.Join(dir, name+"-*.log"))
	if len(paths) < keep {
		return
	}
	type log struct {
		path string
		mod  time.Time
	}
	logs := make([]log, 0, len(paths))
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			logs = append(logs, log{p, fi.ModTime()})
		}
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].mod.After(logs[j].mod) })
	for _, l := range logs[min(len(logs), keep-1):] {
		_ = os.Remove(l.path)
	}
}

// start runs cmd in its own process group, killed if this process dies, and
// waits until ready succeeds.
func start(ctx context.Context, dir, name string, port int, opts Options, ready func(context.Context) error, argv ...string) (*Service, error) {
	log := opts.Log
	if log == nil {
		if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
			return nil, err
		}
		pruneLogs(filepath.Join(dir, "logs"), name, keepLogs)
		f, err := os.Create(filepath.Join(dir, "logs", fmt.Sprintf("%s-%d.log", name, port)))
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child keeps its own descriptor
		log = f
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir // DynamoDB Local writes a metadata file into its working directory
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A child that inherited the output (the emulator's runtime) must not
	// hold Wait, and so Exited, open after the service itself has ended.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("standin: start %s: %w", name, err)
	}
	s := &Service{Name: name, Port: port, Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := ready(rctx)
		cancel()
		if err == nil {
			// Ready may have reached another process's listener on a port
			// taken between FreePort and the bind (tests start many
			// services at once): such a service fails its bind and exits at
			// once. It counts as started only if it is still running a
			// moment later.
			select {
			case <-s.done:
				return nil, fmt.Errorf("standin: %s %w (see its log in %s/logs)", name, errExited, dir)
			case <-time.After(startGrace):
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("standin: %s %w (see its log in %s/logs)", name, errExited, dir)
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("standin: %s not ready on port %d after 60s: %v", name, port, err)
		}
	}
}

// Stop stops the service and its children, politely then firmly.
func (s *Service) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// Exited reports whether the service's process has ended (and its output
// closed, at most a second later).
func (s *Service) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Pid returns the service's process id.
func (s *Service) Pid() int { return s.cmd.Process.Pid }

// onFreePort runs launch on a free port, trying again on another port if the
// service dies while starting (another process took the port meanwhile).
func onFreePort(ctx context.Context, launch func(port int) (*Service, error)) (*Service, error) {
	var err error
	for try := 0; try < 3; try++ {
		var port int
		if port, err = FreePort(); err != nil {
			return nil, err
		}
		var s *Service
		if s, err = launch(port); err == nil || ctx.Err() != nil || !errors.Is(err, errExited) {
			return s, err
		}
	}
	return nil, err
}

// StartDynamoDB starts DynamoDB Local, in memory, on a free port.
func StartDynamoDB(ctx context.Context, dir string, opts Options) (*Service, error) {
	emu := dynamoDir(dir)
	return onFreePort(ctx, func(port int) (*Service, error) {
		return start(ctx, dir, "dynamodb", port, opts, httpReady(port, 400),
			"java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx2g",
			"-Djava.library.path="+filepath.Join(emu, "DynamoDBLocal_lib"),
			"-jar", DynamoDBJar(dir), "-inMemory", "-port", strconv.Itoa(port), "-disableTelemetry")
	})
}

// StartSQS starts the fauxqs SQS emulator on a free port.
func StartSQS(ctx context.Context, dir string, opts Options) (*Service, error) {
	return onFreePort(ctx, func(port int) (*Service, error) {
		o := opts
		o.Env = append(append([]string{}, opts.Env...), "FAUXQS_PORT="+strconv.Itoa(port), "FAUXQS_HOST=127.0.0.1", "FAUXQS_LOGGER=false", "NODE_NO_WARNINGS=1")
		return start(ctx, dir, "sqs", port, o, httpReady(port, 0), NodeBinary(dir), FauxqsCLI(dir))
	})
}

// StartSES starts the aws-ses-v2-local SES emulator on a free port, on the
// Node that runs fauxqs.
func StartSES(ctx context.Context, dir string, opts Options) (*Service, error) {
	return onFreePort(ctx, func(port int) (*Service, error) {
		o := opts
		o.Env = append(append([]string{}, opts.Env...), "NODE_NO_WARNINGS=1")
		return start(ctx, dir, "ses", port, o, httpPathReady(port, "/health-check"),
			NodeBinary(dir), SESCLI(dir), "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	})
}

// Lambda is a function running under the runtime interface emulator.
type Lambda struct {
	*Service
}

// StartLambda runs the bootstrap binary under the runtime interface
// emulator on a free port, with env added to its environment. The
// emulator runs one invocation at a time.
func StartLambda(ctx context.Context, dir, bootstrap string, opts Options) (*Lambda, error) {
	abs, err := filepath.Abs(bootstrap)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("standin: bootstrap %s not found; build it first (make build-local)", bootstrap)
	}
	s, err := onFreePort(ctx, func(port int) (*Service, error) {
		apiPort, err := FreePort()
		if err != nil {
			return nil, err
		}
		return start(ctx, dir, "lambda", port, opts, tcpReady(port),
			RIEBinary(dir), "--runtime-interface-emulator-address", "127.0.0.1:"+strconv.Itoa(port),
			"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(apiPort), abs)
	})
	if err != nil {
		return nil, err
	}
	return &Lambda{Service: s}, nil
}

// InvokeURL is where events are POSTed.
func (l *Lambda) InvokeURL() string {
	return l.Endpoint + "/2015-03-31/functions/function/invocations"
}

func httpReady(port, wantStatus int) func(context.Context) error {
	return func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if wantStatus != 0 && resp.StatusCode != wantStatus {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

func httpPathReady(port int, path string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

func tcpReady(port int) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// startGrace is how long a service must keep running after it first
// answers to count as started (a bind that failed exits sooner).
const startGrace = 150 * time.Millisecond

// errExited is why start fails when the service died before it was ready.
var errExited = errors.New("exited while starting")

// ErrNotConfigured is returned by FromEnv when no stand-in endpoints are set.
var ErrNotConfigured = errors.New("standin: AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL_SESV2 are not set; run the tests with `make test`, which starts the stand-ins")

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id Invoke gives the
// invocation: the emulator's X-Amzn-RequestId, the id of its START, END and
// REPORT lines and of the function's context (lambdacontext's
// AwsRequestID), as Lambda gives a function URL's invocation the request's
// id. Without it the emulator makes one up.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// Invoke posts payload to the function and returns its response, so a
// Lambda is an esm.Invoker. A function error comes back as the payload
// ({"errorType": …}); an emulator that cannot answer is an error. ctx may
// carry the invocation's request id (WithRequestID).
func (l *Lambda) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.InvokeURL(), bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if id, ok := ctx.Value(requestIDKey{}).(string); ok && id != "" {
		req.Header.Set("X-Amzn-RequestId", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("standin: invoke %s: %w", l.Endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 6<<20))
	if err != nil {
		return nil, fmt.Errorf("standin: invoke %s: %w", l.Endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("standin: the emulator answered %s: %.200s", resp.Status, body)
	}
	return body, nil
}

// LambdaEnv is the environment Lambda gives every function, which the
// emulator and the Lambda Go runtime read: its name, timeout and memory.
func LambdaEnv(name string, timeout time.Duration, memoryMB int) []string {
	return []string{
		"AWS_LAMBDA_FUNCTION_NAME=" + name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(timeout.Seconds())),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(memoryMB),
	}
}

// Runtime returns the process id of the function's runtime (the bootstrap
// the emulator started), or false before the first invocation starts it and
// after it died. The emulator starts a new one on the next invocation, as
// Lambda starts a new execution environment.
func (l *Lambda) Runtime() (int, bool) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", l.Pid()))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				return pid, true
			}
		}
	}
	return 0, false
}

// MinRuntimeAge is how long a runtime must have run before KillRuntime
// kills it. The emulator registers a runtime's exit only a moment after it
// starts it; a runtime killed within that moment makes the emulator itself
// panic ("Unable to find an exitedChannel"), after which every invocation
// of that function fails. The chaos run met it once in 1,000 kills: a kill
// 5 ms after the emulator had started a runtime in place of the one killed
// before.
const MinRuntimeAge = 100 * time.Millisecond

// ErrRuntimeTooYoung is KillRuntime's refusal of a runtime younger than
// MinRuntimeAge.
var ErrRuntimeTooYoung = errors.New("standin: the runtime has only just started; the emulator cannot take a kill yet")

// KillRuntime kills the function's runtime at once (SIGKILL), as a crash,
// an out-of-memory kill or a timeout does: the invocation in progress
// fails, and the next one starts a new runtime. It refuses a runtime that
// started less than MinRuntimeAge ago (ErrRuntimeTooYoung).
func (l *Lambda) KillRuntime() error {
	pid, ok := l.Runtime()
	if !ok {
		return fmt.Errorf("standin: %s has no runtime running", l.Endpoint)
	}
	age, err := ProcessAge(pid)
	if err != nil {
		return fmt.Errorf("standin: %s's runtime: %w", l.Endpoint, err)
	}
	if age < MinRuntimeAge {
		return fmt.Errorf("%w (%s, %v)", ErrRuntimeTooYoung, l.Endpoint, age)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// Recycle ends the invocation the function may still be running, as Lambda
// ends the execution environment of an invocation that timed out: it kills
// the runtime (SIGKILL), and the emulator starts a new one for the next
// invocation. With no runtime running there is nothing to end. It returns
// once the runtime is gone, so that the emulator, which cannot take two
// invocations at once, has ended the old one. It is an esm.Recycler's
// method.
func (l *Lambda) Recycle(ctx context.Context) error {
	for {
		pid, ok := l.Runtime()
		if !ok {
			return nil
		}
		err := l.KillRuntime()
		if err != nil && !errors.Is(err, ErrRuntimeTooYoung) {
			if now, ok := l.Runtime(); !ok || now != pid {
				return nil // it ended meanwhile
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(MinRuntimeAge):
		}
		if err == nil {
			for wait := 0; wait < 50; wait++ {
				if now, ok := l.Runtime(); !ok || now != pid {
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
			return fmt.Errorf("standin: %s's runtime (pid %d) was still there 5 s after it was killed", l.Endpoint, pid)
		}
	}
}

// RuntimeAge returns how long ago the function's runtime started.
func (l *Lambda) RuntimeAge() (time.Duration, error) {
	pid, ok := l.Runtime()
	if !ok {
		return 0, fmt.Errorf("standin: %s has no runtime running", l.Endpoint)
	}
	return ProcessAge(pid)
}

// ProcessAge returns how long ago a process started, to the kernel's clock
// tick (10 ms): /proc/uptime less the start time in /proc/PID/stat.
func ProcessAge(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after its closing parenthesis start at field 3.
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 20 {
		return 0, fmt.Errorf("standin: /proc/%d/stat has no start time", pid)
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64) // field 22, starttime
	if err != nil {
		return 0, fmt.Errorf("standin: /proc/%d/stat start time: %w", pid, err)
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, err
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if err != nil {
		return 0, fmt.Errorf("standin: /proc/uptime: %w", err)
	}
	const ticksPerSecond = 100 // USER_HZ, the same on every Linux
	return time.Duration(secs*float64(time.Second)) - time.Duration(ticks)*time.Second/ticksPerSecond, nil
}

// PeakRSS returns the runtime's peak resident memory so far, in bytes
// (VmHWM), as Lambda's "Max Memory Used" reports it; the emulator's own
// REPORT line gives the configured size instead.
func (l *Lambda) PeakRSS() (int64, error) {
	pid, ok := l.Runtime()
	if !ok {
		return 0, fmt.Errorf("standin: %s has no runtime running", l.Endpoint)
	}
	return PeakRSS(pid)
}

// PeakRSS returns a process's peak resident memory in bytes (VmHWM).
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("standin: no VmHWM for process %d", pid)
}
