package guest

import (
	"strings"
	"testing"
)

func TestGenerateNameAppendsFiveCharactersFromTheAlphabet(t *testing.T) {
	name := GenerateName("web-")
	if len(name) != 9 || !strings.HasPrefix(name, "web-") {
		t.Fatalf("got %q", name)
	}
	for _, c := range name[4:] {
		if !strings.ContainsRune(nameAlphabet, c) {
			t.Fatalf("%q has %q outside the alphabet", name, c)
		}
	}
	if GenerateName("web-") == GenerateName("web-") && GenerateName("web-") == GenerateName("web-") {
		t.Fatal("names repeat")
	}
}

func TestGenerateNameTruncatesLongBases(t *testing.T) {
	if got := len(GenerateName(strings.Repeat("a", 70))); got != 63 {
		t.Fatalf("ASCII base: length %d", got)
	}
	if got := len(GenerateName(strings.Repeat("é", 40))); got != 58+5 {
		t.Fatalf("two-byte characters: length %d", got)
	}
}
