package collector

import (
	"github.com/vllmstat/vllmstat/internal/scrape"
)

// Engines keep their weight version as an opaque string: "default" until the first update
// (vLLM's EngineCore, SGLang's --weight-version), then whatever the trainer set, such as
// "step-42". versionNames matches such a string (a reading's Tag) to the trainer's versions:
//
//   - a name the trainer published a version with is that version;
//   - "default", the engines' initial weights, is the first version the trainer published;
//   - a tag that ends in a version's number (scrape.TrailingVersion: "step-42") is that
//     number, unless the trainer named that version otherwise;
//   - anything else is no version: the engine's version is inferred, as for one that reports
//     none.
//
// Names are taken when a publish is requested, not when it takes effect: the publish's
// boundary scrapes come after the request, so an engine that loaded "step-42" before
// publish(42, "step-42") holds 42 at that publish.

// initialTag is the version both engines report before any update.
const initialTag = "default"

// maxNames bounds the names kept: the latest ones published. An engine that many versions
// behind is far behind by any count; its older name is then matched as a tag without one.
const maxNames = 1024

// versionNames is what the trainer said of its versions' strings.
type versionNames struct {
	first    int64 // the first version published (or requested), for initialTag
	hasFirst bool
	byName   map[string]int64
	named    map[int64]string // the name of each named version in byName
	order    []int64          // named versions, oldest first
}

// taken returns the version a name names already.
func (n *versionNames) taken(name string) (int64, bool) {
	v, ok := n.byName[name]
	return v, ok
}

// add takes the publish of version v, named name ("" for none, or one not taken).
func (n *versionNames) add(v int64, name string) {
	if !n.hasFirst {
		n.first, n.hasFirst = v, true
	}
	if name == "" {
		return
	}
	if n.byName == nil {
		n.byName, n.named = map[string]int64{}, map[int64]string{}
	}
	n.byName[name], n.named[v] = v, name
	n.order = append(n.order, v)
	for len(n.order) > maxNames {
		old := n.order[0]
		n.order = n.order[1:]
		if nm, ok := n.named[old]; ok {
			delete(n.named, old)
			if n.byName[nm] == old {
				delete(n.byName, nm)
			}
		}
	}
}

// resolve returns the version an engine's tag is, and whether it is one.
func (n *versionNames) resolve(tag string) (int64, bool) {
	if v, ok := n.byName[tag]; ok {
		return v, true
	}
	if tag == initialTag {
		return n.first, n.hasFirst
	}
	if v, ok := scrape.TrailingVersion(tag); ok {
		if _, named := n.named[v]; !named {
			return v, true
		}
	}
	return 0, false
}
