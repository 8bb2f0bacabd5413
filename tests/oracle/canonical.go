package main

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// requirement is a parsed requirement in the host's normal form: `=` and `==` are a one-value
// `in`, `!=` a one-value `notin`, and `>`/`<` hold their integer.
type requirement struct {
	key    string
	rank   int // the host's operator order: in, notin, exists, !exists, >, <
	values []string
	bound  int64
}

// canonical renders requirements as the host's LabelSelector Display documents its canonical
// form: sorted by key, then operator, then values (sets compared element by element, as Rust's
// BTreeSet), duplicates dropped, one-value sets written with `=`/`!=`, joined by ",".
func canonical(requirements labels.Requirements) string {
	var normal []requirement
	for _, r := range requirements {
		n := requirement{key: r.Key(), values: r.Values().List()}
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			n.rank = 0
		case selection.NotIn, selection.NotEquals:
			n.rank = 1
		case selection.Exists:
			n.rank = 2
		case selection.DoesNotExist:
			n.rank = 3
		case selection.GreaterThan, selection.LessThan:
			n.rank = 4
			if r.Operator() == selection.LessThan {
				n.rank = 5
			}
			// labels.Parse accepted it, so it is an int64.
			n.bound, _ = strconv.ParseInt(n.values[0], 10, 64)
			n.values = nil
		}
		normal = append(normal, n)
	}
	slices.SortFunc(normal, compare)
	normal = slices.CompactFunc(normal, func(a, b requirement) bool { return compare(a, b) == 0 })
	rendered := make([]string, len(normal))
	for i, n := range normal {
		rendered[i] = n.render()
	}
	return strings.Join(rendered, ",")
}

func compare(a, b requirement) int {
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	if a.rank != b.rank {
		return a.rank - b.rank
	}
	if c := slices.Compare(a.values, b.values); c != 0 {
		return c
	}
	switch {
	case a.bound < b.bound:
		return -1
	case a.bound > b.bound:
		return 1
	}
	return 0
}

func (n requirement) render() string {
	set := func(single, word string) string {
		if len(n.values) == 1 {
			return n.key + single + n.values[0]
		}
		return n.key + " " + word + " (" + strings.Join(n.values, ",") + ")"
	}
	switch n.rank {
	case 0:
		return set("=", "in")
	case 1:
		return set("!=", "notin")
	case 2:
		return n.key
	case 3:
		return "!" + n.key
	case 4:
		return n.key + ">" + strconv.FormatInt(n.bound, 10)
	}
	return n.key + "<" + strconv.FormatInt(n.bound, 10)
}
