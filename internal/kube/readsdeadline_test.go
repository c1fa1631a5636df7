package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestReadsDeadline: a pod reads its deadline annotation when a Downward
// API volume (plain or projected) holds its annotations, or that one; an
// environment variable from the Downward API is set once, at start, and
// does not count.
func TestReadsDeadline(t *testing.T) {
	file := func(path string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: "f", FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	plain := func(files ...corev1.DownwardAPIVolumeFile) corev1.Volume {
		return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: files}}}
	}
	projected := func(files ...corev1.DownwardAPIVolumeFile) corev1.Volume {
		return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{Items: files}}}}}}
	}
	for _, tc := range []struct {
		name string
		vols []corev1.Volume
		env  []corev1.EnvVar
		want bool
	}{
		{"none", nil, nil, false},
		{"all annotations", []corev1.Volume{plain(file("metadata.labels"), file("metadata.annotations"))}, nil, true},
		{"the deadline's", []corev1.Volume{plain(file("metadata.annotations['sparecap.dev/preempt-deadline']"))}, nil, true},
		{"another annotation", []corev1.Volume{plain(file("metadata.annotations['other']"))}, nil, false},
		{"projected", []corev1.Volume{projected(file("metadata.annotations"))}, nil, true},
		{"labels only", []corev1.Volume{plain(file("metadata.labels"))}, nil, false},
		{"an env var", nil, []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['sparecap.dev/preempt-deadline']"}}}}, false},
	} {
		p := &corev1.Pod{Spec: corev1.PodSpec{Volumes: tc.vols, Containers: []corev1.Container{{Name: "c", Env: tc.env}}}}
		if got := readsDeadline(p); got != tc.want {
			t.Errorf("%s: readsDeadline = %v, want %v", tc.name, got, tc.want)
		}
		trimmed, _ := trimPod(p)
		if got := readsDeadline(trimmed.(*corev1.Pod)); got != tc.want {
			t.Errorf("%s: trimmed, readsDeadline = %v, want %v", tc.name, got, tc.want)
		}
	}
}
