//go:build integration

package integration

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cdc-outbox/cdc-outbox/internal/workload"
	"github.com/cdc-outbox/cdc-outbox/sink"
	"github.com/cdc-outbox/cdc-outbox/verify"
)

// TestImageRun runs the release image for real (make image-run-check: podman,
// the image loaded from the release's OCI archive, named by CDC_IMAGE) against
// the local stack over the host's network, with the image's own entrypoint
// and command and the config file mounted where the image expects it: the
// process runs as uid 65532, /healthz and /readyz answer, the rows of a
// workload are published in order, and podman stop (SIGTERM) exits 0.
func TestImageRun(t *testing.T) {
	img := os.Getenv("CDC_IMAGE")
	if img == "" {
		t.Skip("CDC_IMAGE is not set: make image-run-check loads the release image and runs this test")
	}
	// CDC_PODMAN: the command and its global flags (make image-run-check: podman --runtime runc)
	podman := strings.Fields(envOr("CDC_PODMAN", "podman"))
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := e.config()
	if err := os.Chmod(cfg, 0o644); err != nil { // read by the image's user
		t.Fatal(err)
	}
	name := "cdc-outbox-" + strings.ReplaceAll(e.name, "_", "-")
	logPath := filepath.Join(e.dir, "container.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The sandbox's limits: podman's default nofile and nproc are above what it may set.
	cmd := exec.Command(podman[0], append(podman[1:], "run", "--rm", "--name", name, "--network", "host",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		"-e", "CDC_OUTBOX_METRICS_ADDR="+addr, "-v", cfg+":/etc/cdc-outbox/config.yaml:ro", img)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = exec.Command(podman[0], append(podman[1:], "rm", "-f", "-t", "0", name)...).Run()
			_ = cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("container log:\n%s", tail(string(b), 40))
		}
	})

	for _, path := range []string{"/healthz", "/readyz"} {
		deadline := time.Now().Add(90 * time.Second)
		for {
			r, err := http.Get("http://" + addr + path)
			if err == nil {
				r.Body.Close()
				if r.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v %v, want 200 within 90 s", path, r, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// the container's process as the host sees it (no ps in the image for podman top)
	out, err := exec.Command(podman[0], append(podman[1:], "inspect", "--format", "{{.State.Pid}}", name)...).Output()
	if err != nil {
		t.Fatalf("podman inspect: %v", err)
	}
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(out)) + "/status")
	if err != nil || !regexp.MustCompile(`(?m)^Uid:\s+65532\s+65532\s`).Match(status) {
		t.Errorf("the container's process: %v\n%s\nwant uid 65532", err, status)
	}
	// the image's HEALTHCHECK command, inside the running container
	if out, err := exec.Command(podman[0], append(podman[1:], "exec", "-e", "CDC_OUTBOX_METRICS_ADDR="+addr, name, "/usr/local/bin/cdc-outbox-probe")...).CombinedOutput(); err != nil {
		t.Errorf("cdc-outbox-probe in the container: %v: %s", err, out)
	}

	w := e.writer()
	plan := workload.Generate(7, 0, 5, 200, 1, 20, 100)
	if err := produce(w, plan); err != nil {
		t.Fatal(err)
	}
	requireOK(t, e.consume(verify.NewChecker(plan.Last), verify.NewConsumer(sink.Config{Brokers: brokers}, e.topic), 2*time.Minute))

	if out, err := exec.Command(podman[0], append(podman[1:], "stop", "-t", "30", name)...).CombinedOutput(); err != nil {
		t.Fatalf("podman stop: %v: %s", err, out)
	}
	stopped = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the container after SIGTERM: %v, want exit 0", err)
	}
	t.Logf("image %s ran as uid 65532 and published %d rows", img, plan.Total)
}
