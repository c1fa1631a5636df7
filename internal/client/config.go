package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Config is the CLI's config file: where the server is and how to
// authenticate. The server writes it on first start with the admin token.
type Config struct {
	URL   string `json:"url,omitempty"`
	Token string `json:"token,omitempty"`
}

// DefaultConfigPath returns $SPARECAP_CONFIG if set, else
// $XDG_CONFIG_HOME/sparecap/config.yaml, else ~/.config/sparecap/config.yaml.
func DefaultConfigPath() string { return ConfigPathFromEnv(os.Getenv) }

// ConfigPathFromEnv is DefaultConfigPath with the environment read through
// getenv, so callers (and tests) can supply their own.
func ConfigPathFromEnv(getenv func(string) string) string {
	if p := getenv("SPARECAP_CONFIG"); p != "" {
		return p
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "sparecap", "config.yaml")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".config", "sparecap", "config.yaml")
}

// LoadConfig reads the config file at path. A missing file is not an error:
// it yields the zero Config.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	var c Config
	if err := yaml.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("parse config %s: %w", path, err)
	}
	return c, nil
}

// WriteConfig writes c to path atomically (temp file, fsync, rename, fsync
// of the directory), creating the directory with mode 0700. The file gets
// mode 0600 because it holds a token.
func WriteConfig(path string, c Config) (err error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create config dir: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp config: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	// CreateTemp already uses 0600; say so explicitly in case that changes.
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("chmod temp config: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write temp config: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync temp config: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close temp config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename config: %w", err)
	}
	// Make the rename durable. Not every platform can fsync a directory;
	// the file itself is already safe, so that failure is ignored.
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
