package client

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"text/tabwriter"
)

// Format is how a command prints state: -o/--output table|json.
type Format int

const (
	FormatTable Format = iota // aligned columns for people
	FormatJSON                // one JSON document, stable, for scripts
)

// FormatNames are the values ParseFormat accepts, for help texts.
const FormatNames = "table|json"

// ParseFormat reads the value of -o/--output; anything but "table" or
// "json" is a usage error.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "table", "":
		return FormatTable, nil
	case "json":
		return FormatJSON, nil
	}
	return 0, Usagef("--output: unknown format %q (want table or json)", s)
}

func (f Format) String() string {
	if f == FormatJSON {
		return "json"
	}
	return "table"
}

// WriteTable writes header and rows as columns aligned with two spaces
// between them, and no trailing blanks. A nil header writes the rows only.
// Tabs and newlines inside cells become spaces.
func WriteTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				io.WriteString(tw, "\t")
			}
			io.WriteString(tw, cellReplacer.Replace(c))
		}
		io.WriteString(tw, "\n")
	}
	if header != nil {
		line(header)
	}
	for _, r := range rows {
		line(r)
	}
	return tw.Flush()
}

var cellReplacer = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")

// WriteJSON writes v as one compact JSON document and a newline. Struct
// fields come in declaration order and map keys sorted, so the output is
// stable; HTML characters are not escaped.
func WriteJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}
