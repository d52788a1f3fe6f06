package secure

import (
	"fmt"
	"os"
	"strings"
)

// ReadSecret returns the content of the file at path without its
// trailing newline (files made with echo, or Kubernetes Secrets), and a
// warning when the file is readable or writable by its group or others
// (mode & 0o077). The errors name setting, never the content.
func ReadSecret(path, setting string) (value, warning string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", setting, err)
	}
	if fi.IsDir() {
		return "", "", fmt.Errorf("%s: %s is a directory, want the file holding the secret", setting, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", setting, err)
	}
	value = strings.TrimRight(string(b), "\r\n")
	if value == "" {
		return "", "", fmt.Errorf("%s: %s is empty", setting, path)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		warning = fmt.Sprintf("%s: %s is readable by others (mode %04o): chmod 600 it (or 0400; a Kubernetes Secret volume: defaultMode: 0400)", setting, path, m)
	}
	return value, warning, nil
}
