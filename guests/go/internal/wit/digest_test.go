package wit

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
)

// The glue is written for one version of the world: a change to wit/controller.wit must come
// with a change to the glue (and to Digest).
func TestDigestMatchesTheWorld(t *testing.T) {
	text, err := os.ReadFile("../../../../wit/controller.wit")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(text)
	if got := hex.EncodeToString(sum[:]); got != Digest {
		t.Fatalf("wit/controller.wit has digest %s, the glue implements %s: update internal/wit", got, Digest)
	}
}
