package slurm_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/slurm"
)

// standIn is a directory of stand-in Slurm commands (Options.Bin): shell
// scripts that answer as slurmctld would, without one. Each records that
// it ran by touching ran.NAME in the directory.
type standIn string

// okConfig is what the stand-in scontrol answers to `show config`.
const okConfig = "KillWait                = 30 sec\nSlurmdPort              = 6818\n"

// newStandIn writes a stand-in for each of scontrol, sinfo and squeue; a
// body given in scripts replaces the default (an empty cluster that
// answers).
func newStandIn(t *testing.T, scripts map[string]string) standIn {
	t.Helper()
	dir := t.TempDir()
	bodies := map[string]string{
		"scontrol": "printf '" + okConfig + "'\n",
		"sinfo":    "echo '{\"nodes\":[]}'\n",
		"squeue":   "echo '{\"jobs\":[]}'\n",
	}
	for name, body := range scripts {
		bodies[name] = body
	}
	for name, body := range bodies {
		script := "#!/bin/sh\n: > " + filepath.Join(dir, "ran."+name) + "\n" + body
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return standIn(dir)
}

// ran reports whether the stand-in command ran.
func (s standIn) ran(name string) bool {
	_, err := os.Stat(filepath.Join(string(s), "ran."+name))
	return err == nil
}

// check runs the attach check of conf against the stand-ins.
func (s standIn) check(t *testing.T, conf string, opts slurm.Options) error {
	t.Helper()
	opts.Bin = string(s)
	opts.Retries = -1
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return slurm.Check(ctx, []byte(conf), opts)
}
