package docs

import (
	"reflect"
	"strings"
	"testing"
)

// TestParse checks the markdown reader on what the pages use: fences inside list items, markers
// across a blank line, links split over lines, brackets in inline code, repeated headings.
func TestParse(t *testing.T) {
	src := strings.Join([]string{
		"# A `code` title", //  1
		"",
		"- item",
		"  <!-- run by: internal/cli TestDemo (note) -->",
		"",
		"  ```sh", //  6
		"  vllmstat demo",
		"  ```",
		"",
		"See [the other", // 10
		"page](other.md#a-b) and `[not](a-link.md)` and ![img](p.png).",
		"~~~~text",
		"```sh",
		"[inside](a-fence.md)",
		"~~~~",
		"## Twice",
		"## Twice",
		`<a id="kept"></a>`,
		"[ref]: ref.md",
	}, "\n")
	pg := parse("x.md", []byte(src))
	wantBlocks := []block{
		{line: 6, lang: "sh", marker: "run by: internal/cli TestDemo (note)", body: []string{"vllmstat demo"}},
		{line: 12, lang: "text", body: []string{"```sh", "[inside](a-fence.md)"}},
	}
	if !reflect.DeepEqual(pg.blocks, wantBlocks) {
		t.Errorf("blocks\n%+v\nwant\n%+v", pg.blocks, wantBlocks)
	}
	wantLinks := []link{{10, "other.md#a-b"}, {11, "p.png"}, {19, "ref.md"}}
	if !reflect.DeepEqual(pg.links, wantLinks) {
		t.Errorf("links %+v, want %+v", pg.links, wantLinks)
	}
	for _, a := range []string{"a-code-title", "twice", "twice-1", "kept"} {
		if !pg.anchors[a] {
			t.Errorf("no anchor %q in %v", a, pg.anchors)
		}
	}
}

// TestCheckMarker checks that a marker names a test that exists, or gives a reason.
func TestCheckMarker(t *testing.T) {
	for _, tt := range []struct {
		marker string
		ok     bool
	}{
		{"", false},
		{"not run: needs a GPU fleet", true},
		{"not run:", false},
		{"run by: " + self, true},
		{"run by: internal/cli TestDemo", true},
		{"run by: internal/cli TestDemo (a smaller demo)", true},
		{"run by: internal/cli TestDemo a smaller demo", false},
		{"run by: internal/cli TestNoSuchTest", false},
		{"run by: internal/nosuch TestDemo", false},
		{"run by: internal/cli", false},
		{"run by: clients/python/examples_test.py Examples.test_plain_loop", true},
		{"run by: clients/python/examples_test.py Examples.test_no_such", false},
		{"run by: clients/python/examples_test.py NoSuch.test_plain_loop", false},
		{"run by: examples/plain_loop.py Examples.test_plain_loop", false},
	} {
		if err := checkMarker(tt.marker); (err == nil) != tt.ok {
			t.Errorf("checkMarker(%q) = %v, want ok %v", tt.marker, err, tt.ok)
		}
	}
}

// TestCommandsOfABlock checks what TestCommands runs of a block, and that it refuses what
// needs a shell or is not vllmstat.
func TestCommandsOfABlock(t *testing.T) {
	console := block{lang: "console", body: []string{"$ vllmstat help", "Usage:", "", "$ vllmstat 'a b' # c"}}
	cmds, err := commands(console)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 2 || cmds[0].text != "vllmstat help" || *cmds[0].want != "Usage:\n\n" ||
		!reflect.DeepEqual(cmds[1].args, []string{"a b"}) || cmds[1].want != nil {
		t.Errorf("console block read as %+v", cmds)
	}
	for _, body := range []string{
		"vllmstat sim &", "vllmstat replay x | head", "vllmstat report > f", "vllmstat run --out $HOME",
		`vllmstat run --out "$HOME"`, "go run ./cmd/vllmstat demo", "vllmstat 'open", "# only a comment",
	} {
		if _, err := commands(block{lang: "sh", body: []string{body}}); err == nil {
			t.Errorf("%q: run in-process, want it refused", body)
		}
	}
}
