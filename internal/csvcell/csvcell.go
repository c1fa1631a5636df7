// Package csvcell makes the text cells of a CSV export safe to open in a
// spreadsheet. A cell that begins with "=", "+", "-", "@", a tab or a
// carriage return is a formula to Excel, LibreOffice and Google Sheets
// (OWASP's "CSV injection"): a tenant's job name or label value of
// =HYPERLINK(...) would run when the operator opens the file. Such a text
// cell gets a leading single quote, which the spreadsheet shows as text.
// Numbers are not text cells: "-0.50" stays a number.
package csvcell

// Text returns s as a cell a spreadsheet takes as text.
func Text(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// Texts applies Text to each of cells in place and returns them.
func Texts(cells ...string) []string {
	for i, c := range cells {
		cells[i] = Text(c)
	}
	return cells
}
