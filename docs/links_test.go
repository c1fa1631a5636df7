package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestLinksResolve: every relative link of README.md and of the pages in
// this directory leads somewhere: its file (or directory) exists, and its
// #anchor, if any, is the anchor of a heading of that page, as GitHub
// makes it. Web and mail links are not followed; links in fenced code
// blocks and in code spans are not links.
func TestLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join("..", "README.md")}, pages...)
	anchors := map[string][]string{} // a page's anchors, by its clean path
	anchorsOf := func(page string) ([]string, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		b, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchors[page] = a
		return a, nil
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			checked++
			if err := checkLink(page, l.target, anchorsOf); err != nil {
				t.Errorf("%s:%d: link (%s): %v", pageName(page), l.line, l.target, err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links found: the parser is broken")
	}
}

// pageName is how a failure names a page: from the repository's root.
func pageName(page string) string {
	if rel, ok := strings.CutPrefix(filepath.ToSlash(page), "../"); ok {
		return rel
	}
	return "docs/" + filepath.ToSlash(page)
}

// checkLink checks a link of page: nil when it needs no checking (a web
// or mail link) or resolves.
func checkLink(page, target string, anchorsOf func(string) ([]string, error)) error {
	lower := strings.ToLower(target)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "mailto:") {
		return nil
	}
	if strings.Contains(target, "://") || strings.HasPrefix(target, "/") {
		return fmt.Errorf("neither relative nor http(s)")
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
		fi, err := os.Stat(file)
		if err != nil {
			return fmt.Errorf("no such file or directory")
		}
		if fi.IsDir() {
			if anchor != "" {
				return fmt.Errorf("an anchor on a directory")
			}
			return nil
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		if regexp.MustCompile(`^L\d+(-L\d+)?$`).MatchString(anchor) {
			return nil // a line of a source file
		}
		return fmt.Errorf("an anchor on a file that is not a page")
	}
	a, err := anchorsOf(filepath.Clean(file))
	if err != nil {
		return err
	}
	if !slices.Contains(a, anchor) {
		return fmt.Errorf("%s has no heading with the anchor #%s", pageName(filepath.Clean(file)), anchor)
	}
	return nil
}

type mdLink struct {
	target string
	line   int
}

var (
	// linkRE is an inline link or image: [text](target) or
	// [text](target "title"). The text may run over lines.
	linkRE = regexp.MustCompile(`!?\[([^\]\[]*(?:\[[^\]\[]*\][^\]\[]*)*)\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// codeSpanRE is a code span of one line.
	codeSpanRE = regexp.MustCompile("(`+)[^`\n]*?(`+)")
	// headingRE is an ATX heading.
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
)

// markdownLinks returns the inline links of a page, outside fenced code
// blocks and code spans, with the line each starts on.
func markdownLinks(page string) []mdLink {
	text := strings.Join(proseLines(page), "\n")
	// Blank the code spans, keeping line breaks and offsets.
	text = codeSpanRE.ReplaceAllStringFunc(text, func(s string) string {
		return strings.Repeat(" ", len(s))
	})
	var links []mdLink
	for _, m := range linkRE.FindAllStringSubmatchIndex(text, -1) {
		links = append(links, mdLink{
			target: text[m[4]:m[5]],
			line:   1 + strings.Count(text[:m[0]], "\n"),
		})
	}
	return links
}

// proseLines returns the lines of a page with the lines of its fenced
// code blocks (fences included) blanked, so line numbers stay true.
func proseLines(page string) []string {
	lines := strings.Split(page, "\n")
	var fence string // the opening fence while in a block
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " \t")
		if fence == "" {
			for _, c := range []string{"```", "~~~"} {
				if strings.HasPrefix(trimmed, c) {
					n := len(trimmed) - len(strings.TrimLeft(trimmed, c[:1]))
					fence = strings.Repeat(c[:1], n)
				}
			}
			if fence != "" {
				lines[i] = ""
			}
			continue
		}
		lines[i] = ""
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
			fence = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives a page's headings, in
// order.
func headingAnchors(page string) []string {
	var anchors []string
	seen := map[string]int{}
	for _, line := range proseLines(page) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(headingText(m[2]))
		a := slug
		if n := seen[slug]; n > 0 {
			a = fmt.Sprintf("%s-%d", slug, n)
		}
		seen[slug]++
		anchors = append(anchors, a)
	}
	return anchors
}

var (
	headingLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRE     = regexp.MustCompile(`<[^>]+>`)
)

// headingText is the text a heading renders: links give their text,
// HTML tags and code-span backticks go.
func headingText(md string) string {
	md = headingLinkRE.ReplaceAllString(md, "$1")
	md = htmlTagRE.ReplaceAllString(md, "")
	return strings.ReplaceAll(md, "`", "")
}

// slugify makes an anchor of a heading's text as GitHub does: lower
// case; letters, marks, digits, underscores, hyphens and spaces kept,
// every other character dropped; each space a hyphen.
func slugify(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestSlugify pins the anchor rules on headings of these pages.
func TestSlugify(t *testing.T) {
	for heading, want := range map[string]string{
		"## Several servers (PostgreSQL)":                                 "several-servers-postgresql",
		"### GET /v1/tokens · GET /v1/admin/projects/{id}/tokens":         "get-v1tokens--get-v1adminprojectsidtokens",
		"## `PUT /v1/admin/clusters/{id}/slurm`":                          "put-v1adminclustersidslurm",
		"## Whole system at fleet scale (`make bench-scale`)":             "whole-system-at-fleet-scale-make-bench-scale",
		"### 1. The pod spec":                                             "1-the-pod-spec",
		"## Kueue: reclaim to requeue, `BenchmarkRequeueAtNotice` (x) ##": "kueue-reclaim-to-requeue-benchmarkrequeueatnotice-x",
		"## `max_preemptible_gpus` and [the API](api.md)":                 "max_preemptible_gpus-and-the-api",
	} {
		if got := headingAnchors(heading); len(got) != 1 || got[0] != want {
			t.Errorf("%q: anchors %q, want %q", heading, got, want)
		}
	}
	got := headingAnchors("# A\n## A\n```\n# A\n```\n## A\n")
	if want := []string{"a", "a-1", "a-2"}; !slices.Equal(got, want) {
		t.Errorf("duplicates: %q, want %q", got, want)
	}
	links := markdownLinks("[a](x.md)\n`[b](y.md)`\n```\n[c](z.md)\n```\n[multi\nline](w.md#q) ![i](img.png)\n")
	var targets []string
	for _, l := range links {
		targets = append(targets, fmt.Sprintf("%s@%d", l.target, l.line))
	}
	if want := []string{"x.md@1", "w.md#q@6", "img.png@7"}; !slices.Equal(targets, want) {
		t.Errorf("links %q, want %q", targets, want)
	}
}
