package csvcell

import "testing"

// TestText: a cell a spreadsheet would read as a formula gets a leading
// quote; any other is left as it is.
func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"=HYPERLINK(\"http://x\",\"y\")": "'=HYPERLINK(\"http://x\",\"y\")",
		"+1":                             "'+1",
		"-2+3":                           "'-2+3",
		"@SUM(A1)":                       "'@SUM(A1)",
		"\tcmd":                          "'\tcmd",
		"\rcmd":                          "'\rcmd",
		"train-1":                        "train-1",
		"a=b":                            "a=b",
		"":                               "",
		"'quoted":                        "'quoted",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	cells := Texts("ok", "=1", "x")
	if cells[0] != "ok" || cells[1] != "'=1" || cells[2] != "x" {
		t.Errorf("Texts: %q", cells)
	}
}
