// Command oracle answers what apimachinery makes of label selectors, quantities and names, for
// the differential tests of the host's parsers (tests/tests/differential.rs).
//
//	oracle          reads one JSON request a line on stdin, writes one JSON answer a line
//	oracle seeds    prints the string literals of apimachinery's own tests of these parsers
//
// Requests and answers are described by request and answer below. Answers report
// apimachinery's results and error messages as they are; classifying them is the caller's job.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// request is one line of input. Op is "selector", "quantity" or "names".
type request struct {
	Op    string `json:"op"`
	Input string `json:"input"`
	// Labels are the label sets a parsed selector is matched against.
	Labels []map[string]string `json:"labels,omitempty"`
	// Render, when set, is parsed too: the caller's rendering of the same selector.
	Render *string `json:"render,omitempty"`
}

// selectorAnswer is what labels.Parse makes of a selector.
type selectorAnswer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// String is the parsed selector's String().
	String string `json:"string,omitempty"`
	// Canonical is the parsed requirements in the host's canonical rendering (see canonical).
	Canonical string `json:"canonical,omitempty"`
	Matches   []bool `json:"matches,omitempty"`
}

// answer is one line of output; which fields are set depends on the request's op.
type answer struct {
	Selector *selectorAnswer `json:"selector,omitempty"`
	// Rendered is what labels.Parse makes of the request's Render.
	Rendered *selectorAnswer `json:"rendered,omitempty"`
	Quantity *quantityAnswer `json:"quantity,omitempty"`
	Names    *namesAnswer    `json:"names,omitempty"`
	Error    string          `json:"error,omitempty"`
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "seeds" {
		if err := printSeeds(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: oracle [seeds]")
		os.Exit(2)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	encoder := json.NewEncoder(out)
	encoder.SetEscapeHTML(false)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if err := encoder.Encode(serve(line)); err != nil {
				fmt.Fprintln(os.Stderr, "oracle:", err)
				os.Exit(1)
			}
		}
		if err != nil {
			break
		}
		// Answer as soon as no more input is waiting, so that callers may go line by line.
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				fmt.Fprintln(os.Stderr, "oracle:", err)
				os.Exit(1)
			}
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(1)
	}
}

func serve(line []byte) answer {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return answer{Error: "bad request: " + err.Error()}
	}
	switch req.Op {
	case "selector":
		a := answer{Selector: parseSelector(req.Input, req.Labels)}
		if req.Render != nil {
			a.Rendered = parseSelector(*req.Render, req.Labels)
		}
		return a
	case "quantity":
		return answer{Quantity: parseQuantity(req.Input)}
	case "names":
		return answer{Names: checkNames(req.Input)}
	}
	return answer{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

func parseSelector(input string, sets []map[string]string) *selectorAnswer {
	selector, err := labels.Parse(input)
	if err != nil {
		return &selectorAnswer{Error: err.Error()}
	}
	requirements, _ := selector.Requirements()
	a := &selectorAnswer{
		OK:        true,
		String:    selector.String(),
		Canonical: canonical(requirements),
		Matches:   make([]bool, len(sets)),
	}
	for i, set := range sets {
		a.Matches[i] = selector.Matches(labels.Set(set))
	}
	return a
}

// quantityAnswer is what resource.ParseQuantity makes of a quantity. An accepted quantity's
// exact value is Unscaled × 10^-Scale, with no trailing zeros in Unscaled (zero is "0", 0).
type quantityAnswer struct {
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
	Sign     int    `json:"sign,omitempty"`
	Unscaled string `json:"unscaled,omitempty"`
	Scale    int64  `json:"scale,omitempty"`
	// Skipped is set, and nothing else, for a quantity ParseQuantity would not finish with in
	// bounded time and memory (see unbounded).
	Skipped bool `json:"skipped,omitempty"`
}

// exponentForm is a number with a decimal exponent that strconv.ParseInt may read.
var exponentForm = regexp.MustCompile(`^[+-]?[0-9]*(\.[0-9]*)?[eE]([+-]?[0-9]+)$`)

// unbounded reports whether ParseQuantity may need unbounded time or memory for text: a
// non-zero number whose exponent, as ParseQuantity reads it (an int64 cut to int32), is beyond
// ±100000. Rounding such a value to nanos computes powers of ten with that many digits (for
// exponents near ±2^31, for minutes and gigabytes).
func unbounded(text string) bool {
	m := exponentForm.FindStringSubmatchIndex(text)
	if m == nil {
		return false
	}
	exponent, err := strconv.ParseInt(text[m[4]:m[5]], 10, 64)
	if err != nil {
		return false
	}
	e := int32(exponent)
	nonZero := strings.ContainsAny(text[:m[4]], "123456789")
	return nonZero && (e > 100000 || e < -100000)
}

func parseQuantity(text string) *quantityAnswer {
	if unbounded(text) {
		return &quantityAnswer{Skipped: true}
	}
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return &quantityAnswer{Error: err.Error()}
	}
	d := q.AsDec()
	if d.Sign() == 0 {
		return &quantityAnswer{OK: true, Unscaled: "0"}
	}
	unscaled := d.UnscaledBig().String()
	trimmed := strings.TrimRight(unscaled, "0")
	scale := int64(d.Scale()) - int64(len(unscaled)-len(trimmed))
	return &quantityAnswer{OK: true, Sign: q.Sign(), Unscaled: trimmed, Scale: scale}
}

// namesAnswer holds the error messages of apimachinery's name checks (none: valid).
type namesAnswer struct {
	DNS1123Label     []string `json:"dns1123_label"`
	DNS1123Subdomain []string `json:"dns1123_subdomain"`
	QualifiedName    []string `json:"qualified_name"`
	LabelValue       []string `json:"label_value"`
}

func checkNames(text string) *namesAnswer {
	return &namesAnswer{
		DNS1123Label:     nonNil(validation.IsDNS1123Label(text)),
		DNS1123Subdomain: nonNil(validation.IsDNS1123Subdomain(text)),
		QualifiedName:    nonNil(validation.IsQualifiedName(text)),
		LabelValue:       nonNil(validation.IsValidLabelValue(text)),
	}
}

func nonNil(errs []string) []string {
	if errs == nil {
		return []string{}
	}
	return errs
}
