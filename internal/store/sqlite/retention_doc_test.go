package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// TestRetentionTableListsEveryTable: docs/operations.md's retention table
// has a row naming every table of the schema, so a table added without
// saying how long its rows live fails here.
func TestRetentionTableListsEveryTable(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sizes, err := st.(store.Sizer).TableSizes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Retention of every table")
	section, _, _ = strings.Cut(section, "\n## ")
	var rows strings.Builder
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `") {
			first, _, _ := strings.Cut(line[1:], " |")
			rows.WriteString(first + "\n")
		}
	}
	for _, tb := range sizes {
		if strings.HasPrefix(tb.Table, "sqlite_") || tb.Table == "goose_db_version" {
			continue
		}
		if !strings.Contains(rows.String(), "`"+tb.Table+"`") {
			t.Errorf("docs/operations.md's retention table has no row for table %s", tb.Table)
		}
	}
}
