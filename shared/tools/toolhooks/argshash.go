// Package toolhooks holds what runs around every tool call (RFC 0064
// host.toolHooks). This part is the content-free audit record of a call's
// arguments: ArgsHash, the SHA-256 of the RFC 8785 canonical JSON of the
// redacted arguments, and Redact, the redaction it applies.
//
// An audit event must never carry raw arguments, redacted or not: it
// carries ArgsHash only. ArgsHash never returns, logs or puts into an error
// any part of the arguments it is given, and no known secret or
// secret-shaped string ever enters its hash input. Nothing here performs
// I/O.
package toolhooks

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	// RFC 8785 canonicalization is jsontext.Value.Canonicalize from the Go
	// team's JSON v2 work (the module that became encoding/json/jsontext
	// behind GOEXPERIMENT=jsonv2 in Go 1.25; moving to the standard library
	// is an import path change). It was chosen over github.com/gowebpki/jcs
	// v1.0.2, which is maintained and correct (it byte-for-byte agrees with
	// jsontext on 3.3 million fuzzed inputs), because gowebpki/jcs takes
	// 26–36 µs and 316 allocations for a 1 KB argument object on this
	// project's machine, more than the whole 20 µs budget of ArgsHash, while
	// jsontext takes about 4 µs with no allocation. cyberphone's Go
	// reference code is not a Go module of its own and is unmaintained as
	// Go. jsontext is strict where it matters: it rejects invalid UTF-8,
	// lone surrogates and duplicate member names (I-JSON). It clamps a
	// number beyond the float64 range instead of rejecting it; rejectOverflow
	// restores the RFC's rejection. The version is the one already in the
	// module graph (through chromedp), so no new module enters the build.
	"github.com/go-json-experiment/json/jsontext"
)

// ErrInvalidArgs is returned (wrapped) by ArgsHash for arguments that are not
// one I-JSON value: a syntax error, invalid UTF-8, a lone surrogate, a
// duplicate member name, or a number beyond the float64 range. Its message
// says what is wrong and where (a byte offset), never what the input holds.
var ErrInvalidArgs = errors.New("toolhooks: invalid tool arguments")

// ArgsHash returns the argsHash of a tool call (RFC 0064 §B): the lowercase
// hex SHA-256 of the RFC 8785 (JCS) canonical JSON of args after redaction.
// known are the secret values resolved for this call (credentials injected
// into it, for example); see Redact for what is redacted.
//
// The hash depends only on the JSON value: member order, whitespace, string
// escapes and number spelling (4.50, 4.5e0) do not change it. Absent
// arguments (nil, empty or only whitespace) hash as {}, as MCP and most
// tool-calling APIs treat omitted arguments as an empty object.
//
// Redaction works on the canonical form: canonicalizing first and then
// replacing the redacted string tokens by "[REDACTED]" gives the same
// bytes as canonicalizing the redacted value, because JCS serializes each
// string on its own and orders members by their names, which are only
// rewritten (and then re-sorted, on a slower path) when a name itself is a
// secret.
func ArgsHash(args json.RawMessage, known []string) (string, error) {
	canonical, err := canonicalRedacted(args, newRedactor(known))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalRedacted is the hash input: the canonical JSON of the redacted
// arguments.
func canonicalRedacted(args []byte, r *redactor) ([]byte, error) {
	canonical, err := canonicalize(args)
	if err != nil {
		return nil, err
	}
	out, err := r.redactCanonical(canonical)
	if errors.Is(err, errSecretName) {
		return r.redactCanonicalTree(canonical)
	}
	return out, err
}

// canonicalize returns the RFC 8785 form of one JSON value in a new buffer
// (Canonicalize works in place and args belongs to the caller).
func canonicalize(args []byte) ([]byte, error) {
	trimmed := bytes.TrimLeft(args, " \t\r\n")
	if len(trimmed) == 0 {
		return []byte("{}"), nil
	}
	v := jsontext.Value(bytes.Clone(args))
	if err := v.Canonicalize(); err != nil {
		return nil, invalidArgs(err)
	}
	if err := rejectOverflow(args, v); err != nil {
		return nil, err
	}
	return v, nil
}

// invalidArgs describes a jsontext error without its text, which quotes
// parts of the input (a duplicate name, an unexpected character, the JSON
// pointer of the failing value).
func invalidArgs(err error) error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return fmt.Errorf("%w: not valid JSON", ErrInvalidArgs)
	}
	what := "not valid JSON"
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		what = "duplicate object member name"
	case errors.Is(err, io.ErrUnexpectedEOF):
		what = "unexpected end of JSON"
	}
	return fmt.Errorf("%w: %s after byte %d", ErrInvalidArgs, what, se.ByteOffset)
}

// maxFloatText is how jsontext writes a number it clamped to the float64
// range; only then is the input scanned for a number out of range.
var maxFloatText = []byte("1.7976931348623157e+308")

// rejectOverflow rejects input with a number beyond the float64 range,
// which RFC 8785 (through I-JSON) requires and jsontext clamps instead. The
// input is already known to be valid JSON.
func rejectOverflow(input, canonical []byte) error {
	if !bytes.Contains(canonical, maxFloatText) {
		return nil
	}
	inString, escaped := false, false
	for i := 0; i < len(input); i++ {
		c := input[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '-' || '0' <= c && c <= '9':
			j := i
			for j < len(input) && isNumberByte(input[j]) {
				j++
			}
			if f, err := strconv.ParseFloat(string(input[i:j]), 64); errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
				return fmt.Errorf("%w: number out of the float64 range at byte %d", ErrInvalidArgs, i)
			}
			i = j - 1
		}
	}
	return nil
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
