package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is the browser the console tests drive; make services
// (scripts/ensure-chromium.sh) installs it.
const chromiumPath = "/usr/bin/chromium"

// updateScreenshots, when "1", makes the console tests rewrite the console
// screenshots of the documentation (docs/images/console-*.png).
const updateScreenshotsEnv = "SPARECAP_UPDATE_SCREENSHOTS"

// browser is one headless Chromium with one tab, against one server. It
// records every error the page reports: console.error and console.warn
// calls, uncaught exceptions and error entries of the browser log (failed
// loads, CSP violations). Errors the test provokes on purpose are declared
// first with expect; any other fails the test.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu       sync.Mutex
	expected []expectedEntry
	problems []string
	allowed  []string
}

// expectedEntry is a browser log error the test causes on purpose: the
// load of path (on the test server, without a query) answered with status.
type expectedEntry struct {
	path   string
	status int
}

// startBrowser starts headless Chromium. A missing browser fails the test:
// it is never skipped.
func startBrowser(t *testing.T, base string) *browser {
	t.Helper()
	if fi, err := os.Stat(chromiumPath); err != nil || fi.IsDir() {
		t.Fatalf("the console's browser tests need Chromium at %s (%v): run scripts/ensure-chromium.sh (make services)", chromiumPath, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium-profile")),
		chromedp.WindowSize(1366, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t, base: base}
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithListener(b.onEvent))
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	b.ctx = ctx
	start := time.Now()
	// The first action starts the browser on the context it gets, so it
	// gets the tab's own context: a timeout here would end the browser.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	if _, err := runIn(b, 10*time.Second, chromedp.EmulateViewport(1366, 900)); err != nil {
		t.Fatalf("set the viewport to 1366x900: %v", err)
	}
	t.Logf("Chromium started in %s", time.Since(start).Round(time.Millisecond))
	return b
}

// onEvent runs on chromedp's event loop: it only records.
func (b *browser) onEvent(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeWarning {
			return
		}
		var parts []string
		for _, a := range ev.Args {
			switch {
			case len(a.Value) > 0:
				parts = append(parts, string(a.Value))
			case a.Description != "":
				parts = append(parts, a.Description)
			default:
				parts = append(parts, string(a.Type))
			}
		}
		msg = fmt.Sprintf("console.%s(%s)%s", ev.Type, strings.Join(parts, ", "), stackPlace(ev.StackTrace))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			text += " " + d.Exception.Description
		}
		msg = fmt.Sprintf("uncaught exception: %s (%s:%d:%d)", text, d.URL, d.LineNumber, d.ColumnNumber)
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level != log.EntryLevelError {
			return
		}
		b.mu.Lock()
		for _, x := range b.expected {
			if strings.SplitN(e.URL, "?", 2)[0] == b.base+x.path && strings.Contains(e.Text, "status of "+strconv.Itoa(x.status)+" ") {
				b.allowed = append(b.allowed, fmt.Sprintf("%s (%s)", e.Text, e.URL))
				b.mu.Unlock()
				return
			}
		}
		b.mu.Unlock()
		msg = fmt.Sprintf("browser log [%s] %s (%s)", e.Source, e.Text, e.URL)
	default:
		return
	}
	b.mu.Lock()
	b.problems = append(b.problems, msg)
	b.mu.Unlock()
}

func stackPlace(st *runtime.StackTrace) string {
	if st == nil || len(st.CallFrames) == 0 {
		return ""
	}
	f := st.CallFrames[0]
	return fmt.Sprintf(" at %s:%d:%d", f.URL, f.LineNumber+1, f.ColumnNumber+1)
}

// expect declares a browser log error the test provokes: the load of path
// answered with status (an error page, a refused API call).
func (b *browser) expect(path string, status int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expected = append(b.expected, expectedEntry{path: path, status: status})
}

// checkConsole fails the test if the page reported any error so far that
// the test did not provoke. where names the step.
func (b *browser) checkConsole(where string) {
	b.t.Helper()
	b.mu.Lock()
	problems := b.problems
	b.problems = nil
	b.mu.Unlock()
	for _, p := range problems {
		b.t.Errorf("browser console error (%s): %s", where, p)
	}
}

// runIn runs one action with a timeout, so a hang fails the step rather
// than eating the test's whole budget.
func runIn[T any](b *browser, d time.Duration, action chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Run(ctx, action)
}

// do runs actions that return nothing.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if _, err := runIn(b, 15*time.Second, chromedp.Steps(actions...)); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// navigate opens path and returns the HTTP status of the document, after
// redirects.
func (b *browser) navigate(path string) int64 {
	b.t.Helper()
	resp, err := runIn(b, 15*time.Second, chromedp.NavigateResponse(b.base+path))
	if err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
	return resp.Status
}

// clickAndLoad clicks the element sel and waits for the page it leads to;
// it returns the HTTP status of the new document.
func (b *browser) clickAndLoad(what, sel string) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		b.t.Fatalf("%s (click %s): %v", what, sel, err)
	}
	return resp.Status
}

// path is the path (and query) of the page the tab shows.
func (b *browser) path() string {
	b.t.Helper()
	loc, err := runIn(b, 5*time.Second, chromedp.Location())
	if err != nil {
		b.t.Fatalf("read the location: %v", err)
	}
	return strings.TrimPrefix(loc, b.base)
}

// eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into T.
func evalJS[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := runIn(b, 15*time.Second, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the trimmed textContent of the first element matching sel, or
// "<missing>".
func (b *browser) text(sel string) string {
	b.t.Helper()
	return evalJS[string](b, fmt.Sprintf(`(() => { const el = document.querySelector(%q); return el ? el.textContent.trim().replace(/\s+/g, " ") : "<missing>"; })()`, sel))
}

// waitJS polls the expression until it is truthy. It polls from Go rather
// than with chromedp.Poll, whose predicate is built with new Function: the
// console's CSP (no 'unsafe-eval') rightly refuses that. describe is an
// expression whose value explains a timeout.
func (b *browser) waitJS(what, expr, describe string, timeout time.Duration) time.Duration {
	b.t.Helper()
	took, state, ok := b.tryWaitJS(expr, describe, timeout)
	if !ok {
		b.t.Fatalf("waited %s for %s (%s); the page shows: %s", timeout, what, expr, state)
	}
	return took
}

// tryWaitJS is waitJS that reports a timeout, with the page's state as
// describe tells it, instead of failing.
func (b *browser) tryWaitJS(expr, describe string, timeout time.Duration) (took time.Duration, state string, ok bool) {
	b.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var lastErr error
	for {
		v, err := runIn(b, 5*time.Second, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && v {
			return time.Since(start), "", true
		}
		lastErr = err
		if time.Now().After(deadline) {
			state = fmt.Sprintf("? (last error %v)", lastErr)
			if describe != "" {
				if s, err := runIn(b, 5*time.Second, chromedp.Evaluate[string](describe)); err == nil {
					state = s
				}
			}
			return time.Since(start), state, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cookies are the browser's cookies for the server.
func (b *browser) cookies() map[string]string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{b.base + "/console/"}})
	if err != nil {
		b.t.Fatalf("read cookies: %v", err)
	}
	out := map[string]string{}
	for _, c := range res.Cookies {
		out[c.Name] = c.Value
	}
	return out
}

// screenshot writes a PNG of the page to docs/images/console-<name>.png
// when SPARECAP_UPDATE_SCREENSHOTS=1, so a plain test run leaves the tree
// clean. A page taller than 2000 pixels is cut to the viewport.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv(updateScreenshotsEnv) != "1" {
		return
	}
	height := evalJS[float64](b, `document.documentElement.scrollHeight`)
	action := chromedp.FullScreenshot(100)
	if height > 2000 {
		action = chromedp.CaptureScreenshot()
	}
	png, err := runIn(b, 15*time.Second, action)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	root, err := moduleRoot()
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(root, "docs", "images", "console-"+name+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("wrote %s (%d KiB)", path, len(png)>>10)
}
