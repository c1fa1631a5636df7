package api

import (
	"bytes"
	"encoding/csv"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestUsageCSVNeutralisesFormulas: a usage CSV's text cells that a
// spreadsheet would run as formulas (a job's name, a label's value) begin
// with a quote; its numbers, negative ones too, are left as numbers.
func TestUsageCSVNeutralisesFormulas(t *testing.T) {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	l := apiv1.UsageLine{ProjectID: "p", ClusterID: "c-1", ClusterName: "train", NodeID: "n-1", NodeName: "@node",
		ComputeClass: "PREEMPTIBLE", Region: "us-east-1", GPUType: "H100_SXM", GPUs: 8, Start: at, End: at.Add(time.Hour),
		RatePerGPUHour: "1.00", Amount: "-0.50", OnDemandAmount: "8.00", Group: `=HYPERLINK("http://evil","x")`}
	if err := writeCSVLine(cw, l, true); err != nil {
		t.Fatal(err)
	}
	cw.Flush()
	row, err := csv.NewReader(&buf).Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := row[4]; got != "'@node" {
		t.Errorf("node_name cell %q, want '@node", got)
	}
	if got := row[len(row)-2]; got != `'=HYPERLINK("http://evil","x")` {
		t.Errorf("group cell %q, want it after a quote", got)
	}
	if got := row[15]; got != "-0.50" {
		t.Errorf("amount cell %q, want the number -0.50", got)
	}
	if row[2] != "train" {
		t.Errorf("cluster_name cell %q changed", row[2])
	}
}
