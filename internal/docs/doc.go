// Package docs holds the tests of the repository's documentation, README.md and docs/*.md:
// every shell block is run by a test or says why not, the blocks that the tests of this package
// run print what they should, and every relative link and #anchor resolves. The convention is
// described in docs/development.md ("Commands in the docs").
package docs
