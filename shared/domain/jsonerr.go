package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSONErrorWithoutContent describes a stored record's decode error by
// position and field, never by the content (a type error can echo a
// value, and a record can hold a sealed secret's envelope): what a
// corrupt-record error may say.
func JSONErrorWithoutContent(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %s: cannot decode a JSON %s into %s", te.Field, te.Value, te.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	}
	return "cannot decode JSON"
}
