package docs

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/vllmstat/vllmstat/internal/cli"
)

// root is the repository's root, seen from this package's directory, where go test runs.
const root = "../.."

// maxReadmeLines keeps the README one screen of what vllmstat is and how to start; the rest
// belongs in docs/.
const maxReadmeLines = 250

// shellLangs are the info strings of fenced blocks that hold shell commands.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "zsh": true}

// self is the reference, in a "run by:" marker, of TestCommands: the blocks it runs itself.
const self = "internal/docs TestCommands"

// checks are what a command run by TestCommands must print beyond exiting 0, by the command
// as the block spells it. A command without a check must print something.
var checks = map[string]func(t *testing.T, stdout string){
	"vllmstat replay --per-worker internal/cli/testdata/recordings/one-run/run.jsonl.gz": func(t *testing.T, stdout string) {
		want, err := os.ReadFile("internal/cli/testdata/recordings/one-run/steps.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if stdout != string(want) {
			t.Errorf("the replay is not the steps.jsonl its run wrote (%d bytes against %d), as recordings.md says", len(stdout), len(want))
		}
	},
	"vllmstat help run": func(t *testing.T, stdout string) {
		if !strings.HasPrefix(stdout, "Usage: vllmstat run [flags]\n") || !strings.Contains(stdout, "-step-every") {
			t.Errorf("not run's usage:\n%s", stdout)
		}
	},
}

// page is one markdown file: its fenced blocks, its links and the anchors it defines.
type page struct {
	path    string // relative to root, slash-separated
	blocks  []block
	links   []link
	anchors map[string]bool
}

// block is a fenced code block.
type block struct {
	line   int    // of the opening fence, from 1
	lang   string // the first word of the info string
	marker string // the "not run: …" or "run by: …" comment right before the fence, or ""
	body   []string
}

type link struct {
	line   int
	target string
}

var (
	fenceRe   = regexp.MustCompile("^(\\s*)(`{3,}|~{3,})\\s*([^\\s`]*)")
	markerRe  = regexp.MustCompile(`^\s*<!--\s*((?:not run|run by):.*?)\s*-->\s*$`)
	headingRe = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	linkRe    = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRe  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	htmlRefRe = regexp.MustCompile(`(?:href|src)="([^"]+)"`)
	htmlIDRe  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	schemeRe  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	mdLinkRe  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// commandLike is how an unfenced or text block that should be a shell block starts.
	commandLike = regexp.MustCompile(`^\s*(\$ |vllmstat [a-z-]+(\s|$)|go [a-z]+\s|python3? \S|pip3? \S|scripts/\S|curl\s)`)
)

// parse reads a markdown file's fenced blocks (with the marker before each), its links outside
// code, and its heading anchors as GitHub spells them.
func parse(p string, src []byte) page {
	pg := page{path: p, anchors: map[string]bool{}}
	lines := strings.Split(string(src), "\n")
	prose := make([]string, len(lines)) // the lines outside fenced blocks; blank inside them
	seen := map[string]int{}
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			prose[i] = lines[i]
			if h := headingRe.FindStringSubmatch(lines[i]); h != nil {
				s := slug(h[1])
				if n := seen[s]; n > 0 {
					pg.anchors[fmt.Sprintf("%s-%d", s, n)] = true
				} else {
					pg.anchors[s] = true
				}
				seen[s]++
			}
			for _, id := range htmlIDRe.FindAllStringSubmatch(lines[i], -1) {
				pg.anchors[id[1]] = true
			}
			continue
		}
		b := block{line: i + 1, lang: strings.ToLower(m[3])}
		for j := i - 1; j >= 0; j-- {
			if strings.TrimSpace(lines[j]) == "" {
				continue
			}
			if mk := markerRe.FindStringSubmatch(lines[j]); mk != nil {
				b.marker = mk[1]
			}
			break
		}
		indent, fence := len(m[1]), m[2]
		closeRe := regexp.MustCompile(`^\s*` + regexp.QuoteMeta(fence[:1]) + `{` + fmt.Sprint(len(fence)) + `,}\s*$`)
		for i++; i < len(lines) && !closeRe.MatchString(lines[i]); i++ {
			l := lines[i]
			for k := 0; k < indent && strings.HasPrefix(l, " "); k++ {
				l = l[1:]
			}
			b.body = append(b.body, l)
		}
		pg.blocks = append(pg.blocks, b)
	}
	text := stripCodeSpans(strings.Join(prose, "\n"))
	lineAt := func(off int) int { return strings.Count(text[:off], "\n") + 1 }
	for _, re := range []*regexp.Regexp{linkRe, refDefRe, htmlRefRe} {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			pg.links = append(pg.links, link{line: lineAt(m[0]), target: text[m[2]:m[3]]})
		}
	}
	sort.Slice(pg.links, func(i, j int) bool { return pg.links[i].line < pg.links[j].line })
	return pg
}

// stripCodeSpans blanks inline code (`…`, “…”), whose brackets are no links, keeping newlines
// so that offsets still give line numbers.
func stripCodeSpans(s string) string {
	b := []byte(s)
	run := func(i int) int {
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		return n
	}
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := run(i)
		end := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := run(j)
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end
	}
	return string(b)
}

// slug is a heading's anchor as GitHub makes it: the text (a link's text, without code or
// emphasis marks) in lower case, letters, digits, '-' and '_' kept, spaces as '-'.
func slug(h string) string {
	h = mdLinkRe.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// pagePaths are the pages whose blocks and links are checked: README.md and docs/*.md.
func pagePaths(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"README.md"}
	for _, d := range docs {
		paths = append(paths, "docs/"+filepath.Base(d))
	}
	sort.Strings(paths[1:])
	return paths
}

func load(t *testing.T, p string) page {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return parse(p, src)
}

func loadAll(t *testing.T) []page {
	t.Helper()
	var pages []page
	for _, p := range pagePaths(t) {
		pages = append(pages, load(t, p))
	}
	return pages
}

// TestReadmeLength keeps the README to one screen of what vllmstat is and how to start.
func TestReadmeLength(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(src, []byte("\n")); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail into docs/ and link it", n, maxReadmeLines)
	}
}

// TestCIRunsReadmeTests checks that CI runs the command the README gives for all tests: the
// shell block under "## Tests" is what .ci/run executes.
func TestCIRunsReadmeTests(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Tests\n")
	if !ok {
		t.Fatal(`README.md has no "## Tests" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal(`README.md's "## Tests" section has no shell block`)
	}
	cmd, _, _ := strings.Cut(block, "\n")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\n"+cmd+"\n") && !strings.Contains(string(ci), "\nexec "+cmd+"\n") {
		t.Errorf(".ci/run does not execute the README's test command %q", cmd)
	}
}

// TestShellBlocks checks that every shell block of the pages is run by a test that exists, or
// says why none runs it, and that no command hides in a block not fenced as shell.
func TestShellBlocks(t *testing.T) {
	for _, pg := range loadAll(t) {
		for _, b := range pg.blocks {
			where := fmt.Sprintf("%s:%d", pg.path, b.line)
			if !shellLangs[b.lang] {
				if b.marker != "" {
					t.Errorf("%s: %q marks a %q block, which is not a shell block (fence it as sh or console)", where, b.marker, b.lang)
				}
				if (b.lang == "" || b.lang == "text") && len(b.body) > 0 && commandLike.MatchString(b.body[0]) {
					t.Errorf("%s: the block starts with a command (%q): fence it as sh, or console with its output, and mark it (see docs/development.md)", where, b.body[0])
				}
				continue
			}
			if err := checkMarker(b.marker); err != nil {
				t.Errorf("%s: %v\n%s", where, err, strings.Join(b.body, "\n"))
			}
		}
	}
}

// checkMarker says what is wrong with a shell block's marker, nil if nothing.
func checkMarker(marker string) error {
	kind, rest, _ := strings.Cut(marker, ":")
	rest = strings.TrimSpace(rest)
	switch kind {
	case "":
		return fmt.Errorf(`a shell block that no test runs and no marker explains: put "<!-- run by: PACKAGE TestName -->", "<!-- run by: %s -->" or "<!-- not run: REASON -->" on the line before it (see docs/development.md)`, self)
	case "not run":
		if rest == "" {
			return fmt.Errorf("%q gives no reason", marker)
		}
		return nil
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return fmt.Errorf("%q names no test: want \"run by: PACKAGE TestName\" or \"run by: clients/python/FILE_test.py Class.test_method\"", marker)
	}
	if note := strings.Join(f[2:], " "); note != "" && (!strings.HasPrefix(note, "(") || !strings.HasSuffix(note, ")")) {
		return fmt.Errorf("%q: after the test, only a note in parentheses", marker)
	}
	if testOf(marker) == self {
		return nil
	}
	if strings.HasSuffix(f[0], ".py") {
		return pythonTestExists(f[0], f[1])
	}
	return goTestExists(f[0], f[1])
}

// testOf is the test that a "run by:" marker names ("internal/cli TestDemo"), without its note;
// "" for any other marker.
func testOf(marker string) string {
	rest, ok := strings.CutPrefix(marker, "run by:")
	if f := strings.Fields(rest); ok && len(f) >= 2 {
		return f[0] + " " + f[1]
	}
	return ""
}

// goTestExists reports whether the package in dir (relative to root) has a test function name,
// as go test -list would list it, by parsing the package's test files.
func goTestExists(dir, name string) error {
	if !strings.HasPrefix(name, "Test") {
		return fmt.Errorf("%s: %q is not a test function's name", dir, name)
	}
	files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*_test.go"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("%q: no Go test files there (want a package directory such as internal/cli)", dir)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range af.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == name && fn.Type.Params.NumFields() == 1 {
				return nil
			}
		}
	}
	return fmt.Errorf("%s has no func %s(t *testing.T)", dir, name)
}

// pythonTestExists reports whether file (relative to root), one of the Python test files that
// scripts/test runs, has the test method Class.method.
func pythonTestExists(file, name string) error {
	if ok, _ := path.Match("clients/python/*_test.py", file); !ok {
		return fmt.Errorf("%q is not one of the Python test files scripts/test runs (clients/python/*_test.py)", file)
	}
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return err
	}
	class, method, ok := strings.Cut(name, ".")
	if !ok {
		return fmt.Errorf("%s: %q: want Class.test_method", file, name)
	}
	loc := regexp.MustCompile(`(?m)^class ` + regexp.QuoteMeta(class) + `\b.*:\s*$`).FindIndex(src)
	if loc == nil {
		return fmt.Errorf("%s has no class %s", file, class)
	}
	body := src[loc[1]:]
	if end := regexp.MustCompile(`(?m)^\S`).FindIndex(body); end != nil {
		body = body[:end[0]]
	}
	if !strings.HasPrefix(method, "test") || !regexp.MustCompile(`(?m)^    def `+regexp.QuoteMeta(method)+`\(self`).Match(body) {
		return fmt.Errorf("%s: class %s has no test method %s", file, class, method)
	}
	return nil
}

// TestLinks checks that every relative link of the pages names a file of the repository, and
// that its #anchor is a heading of that page.
func TestLinks(t *testing.T) {
	cache := map[string]page{}
	anchorsOf := func(p string) map[string]bool {
		if pg, ok := cache[p]; ok {
			return pg.anchors
		}
		pg := load(t, p)
		cache[p] = pg
		return pg.anchors
	}
	for _, pg := range loadAll(t) {
		cache[pg.path] = pg
		for _, l := range pg.links {
			if schemeRe.MatchString(l.target) {
				continue
			}
			where := fmt.Sprintf("%s:%d: %s", pg.path, l.line, l.target)
			file, frag, _ := strings.Cut(l.target, "#")
			target := pg.path
			if file != "" {
				target = path.Join(path.Dir(pg.path), file)
				if target == ".." || strings.HasPrefix(target, "../") || path.IsAbs(file) {
					t.Errorf("%s: leads out of the repository", where)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s: no such file", where)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[frag] {
				t.Errorf("%s: %s has no heading with the anchor #%s", where, target, frag)
			}
		}
	}
}

// command is one command of a block that TestCommands runs.
type command struct {
	text string   // as the block spells it
	args []string // without the program's name
	want *string  // a console block's output after it; nil in an sh block
}

// commands are the commands of a block that TestCommands runs: every line of an sh block but
// comments, or a console block's lines after "$ " with the output that follows each.
func commands(b block) ([]command, error) {
	var cmds []command
	for _, l := range b.body {
		var text string
		switch {
		case b.lang == "console" && strings.HasPrefix(l, "$ "):
			text = strings.TrimSpace(l[2:])
		case b.lang == "console":
			if len(cmds) == 0 {
				return nil, fmt.Errorf("output %q before any command", l)
			}
			c := &cmds[len(cmds)-1]
			if c.want == nil {
				c.want = new(string)
			}
			*c.want += l + "\n"
			continue
		default:
			text = strings.TrimSpace(l)
			if text == "" || strings.HasPrefix(text, "#") {
				continue
			}
		}
		words, err := shellWords(text)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", text, err)
		}
		if len(words) == 0 || words[0] != "vllmstat" {
			return nil, fmt.Errorf("%q: only vllmstat commands are run in-process; mark the block with the test that runs it", text)
		}
		cmds = append(cmds, command{text: strings.Join(words, " "), args: words[1:]})
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("no command")
	}
	return cmds, nil
}

// shellWords splits a command line as a shell would split a plain one: words apart by blanks,
// '…' and "…" quoting, a # comment after a blank. Anything that needs a shell (pipes,
// redirections, background jobs, expansions) is refused.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote")
			}
			q := s[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(q, "$`\\") {
				return nil, fmt.Errorf("an expansion in double quotes needs a shell")
			}
			cur.WriteString(q)
			inWord = true
			i += j + 1
		case strings.IndexByte("|&;<>()$`\\*?[{~", c) >= 0:
			return nil, fmt.Errorf("%q needs a shell", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestCommands runs the blocks marked "run by: internal/docs TestCommands" through the
// in-process command line, from the repository's root: every command must exit 0, print a
// console block's output as shown, and pass its entry in checks.
func TestCommands(t *testing.T) {
	pages := loadAll(t)
	t.Chdir(root)
	ran := map[string]bool{}
	for _, pg := range pages {
		for _, b := range pg.blocks {
			if !shellLangs[b.lang] || testOf(b.marker) != self {
				continue
			}
			t.Run(fmt.Sprintf("%s:%d", pg.path, b.line), func(t *testing.T) {
				cmds, err := commands(b)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range cmds {
					ran[c.text] = true
					run(t, c)
				}
			})
		}
	}
	if len(ran) == 0 {
		t.Errorf("no block is marked \"run by: %s\"", self)
	}
	for text := range checks {
		if !ran[text] {
			t.Errorf("checks has %q, which no block runs any more", text)
		}
	}
}

func run(t *testing.T, c command) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := cli.RunContext(ctx, c.args, &stdout, &stderr); code != 0 {
		t.Fatalf("%s: exit %d\nstderr:\n%s", c.text, code, stderr.String())
	}
	out := stdout.String()
	if c.want != nil && strings.TrimRight(out, "\n") != strings.TrimRight(*c.want, "\n") {
		t.Errorf("%s printed\n%s\nand the block shows\n%s", c.text, out, *c.want)
	}
	if check, ok := checks[c.text]; ok {
		check(t, out)
	} else if c.want == nil && strings.TrimSpace(out) == "" {
		t.Errorf("%s printed nothing", c.text)
	}
}
