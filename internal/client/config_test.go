package client

import (
	"os"
	"path/filepath"
	"testing"
)

func TestConfigPathFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SPARECAP_CONFIG": "/x/c.yaml", "XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}, "/x/c.yaml"},
		{map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}, "/xdg/sparecap/config.yaml"},
		{map[string]string{"HOME": "/h"}, "/h/.config/sparecap/config.yaml"},
	}
	for _, tc := range cases {
		if got := ConfigPathFromEnv(env(tc.env)); got != tc.want {
			t.Errorf("ConfigPathFromEnv(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "config.yaml")

	c, err := LoadConfig(path)
	if err != nil || c != (Config{}) {
		t.Fatalf("missing file: %+v, %v; want zero config, nil", c, err)
	}
	want := Config{URL: "http://127.0.0.1:8407", Token: "sc_admin_x"}
	if err := WriteConfig(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(path)
	if err != nil || got != want {
		t.Fatalf("LoadConfig = %+v, %v; want %+v", got, err, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode = %v, want 0600", st.Mode().Perm())
	}
	dst, _ := os.Stat(filepath.Dir(path))
	if dst.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v, want 0700", dst.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if string(b) != "token: sc_admin_x\nurl: http://127.0.0.1:8407\n" {
		t.Errorf("file = %q", b)
	}
	// Overwrite, and leave no temp files behind.
	if err := WriteConfig(path, Config{URL: "http://other"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := LoadConfig(path); got != (Config{URL: "http://other"}) {
		t.Errorf("after overwrite: %+v", got)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("dir holds %d entries, want just the config", len(ents))
	}
}

func TestLoadConfigBad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("url: [unclosed\n"), 0o600)
	if _, err := LoadConfig(path); err == nil {
		t.Error("want a parse error")
	}
}
