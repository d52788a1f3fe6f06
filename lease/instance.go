package lease

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// ErrInstanceInUse: the instance file is locked by another running
// process (two instances given the same ha.instance-file).
var ErrInstanceInUse = errors.New("lease: instance file in use")

// Instance is this process's claim on an instance file (ha.instance-file):
// an exclusive flock(2) held while the process lives, and the id of the
// process that held it before, which is therefore dead. The kernel drops
// the lock when the process ends, however it ends (kill -9 included), and
// nobody else can hold it while it is alive, paused (SIGSTOP) or not.
type Instance struct {
	f *os.File
	// Previous is the id of the process that held the file before ("":
	// none, a new file): its leases are this instance's to take at once
	// (Acquire's prev).
	Previous string
}

// ClaimInstance locks the instance file at path (created 0600 if absent)
// without waiting, reads the previous process's id from it and writes
// owner in its place. It fails with ErrInstanceInUse when another process
// holds the lock. The file must be on a local file system (flock over NFS
// is not reliable) and belong to one instance: in Kubernetes an emptyDir
// of the pod (it survives the container's restarts, not the pod).
func ClaimInstance(path, owner string) (*Instance, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lease: ha.instance-file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: ha.instance-file %s is locked by another running instance: give each instance its own file (or none)", ErrInstanceInUse, path)
		}
		return nil, fmt.Errorf("lease: ha.instance-file %s: lock: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1024))
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt([]byte(owner+"\n"), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lease: ha.instance-file %s: %w", path, err)
	}
	prev := strings.TrimSpace(string(b))
	if strings.ContainsAny(prev, " \n") || prev == owner {
		prev = "" // not an id this code wrote
	}
	return &Instance{f: f, Previous: prev}, nil
}

// Close releases the lock (the file keeps this process's id for the next).
func (i *Instance) Close() error { return i.f.Close() }
