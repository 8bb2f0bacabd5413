package guest

import (
	"math/rand/v2"
	"unicode/utf8"
)

// nameAlphabet is the API server's alphabet for generated names: no vowels (no words), no
// look-alikes.
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// maxNameBase is the longest base kept, so that base and suffix fit in 63 characters.
const maxNameBase = 58

// GenerateName returns base followed by 5 random characters, e.g. "web-x7k2p" for "web-".
//
// Server-side apply has no generateName, so guests name new objects themselves. base is cut to
// 58 bytes (at a character boundary) as the API server does. The randomness comes from the
// WASI random source, which seeds Go's runtime; it is not meant for secrets. Check the cache
// for an object of the same name before applying: an apply to an existing name updates it.
func GenerateName(base string) string {
	if len(base) > maxNameBase {
		cut := maxNameBase
		for cut > 0 && !utf8.RuneStart(base[cut]) {
			cut--
		}
		base = base[:cut]
	}
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = nameAlphabet[rand.IntN(len(nameAlphabet))]
	}
	return base + string(suffix)
}
