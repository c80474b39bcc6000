// Prints every folding orbit of Go's unicode.SimpleFold (the folding encoding/json matches object keys
// with) of two or more runes, one per line, as hex code points in orbit order. The output is checked in as
// policy/src/mcp/go_fold_orbits.txt: policy/src/mcp/tests.rs checks that Toolgate's folding of params
// keys puts every orbit together, and tests/bypass/test_go_decoder.py that the file is what this Go
// prints.
package main

import (
	"bufio"
	"fmt"
	"os"
	"unicode"
)

func main() {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	seen := map[rune]bool{}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if seen[r] || unicode.SimpleFold(r) == r {
			continue
		}
		seen[r] = true
		fmt.Fprintf(out, "%x", r)
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			seen[f] = true
			fmt.Fprintf(out, " %x", f)
		}
		fmt.Fprintln(out)
	}
}
