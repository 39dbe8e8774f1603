package toolhooks

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// verdict is what classify found in one string.
type verdict struct {
	// secret: the string holds a known secret or a secret-shaped token and
	// is replaced whole.
	secret bool
	// awsKeyID: the string holds an AWS access key id, so a secret-looking
	// 40-character base64 string next to it is an AWS secret access key.
	awsKeyID bool
	// awsSecret: the string holds a run of exactly 40 base64 characters
	// mixing upper case, lower case and digits or '+' '/' — the shape of an
	// AWS secret access key, redacted only next to an access key id (see
	// redactor.container) because on its own the shape is too common.
	awsSecret bool
}

// classify applies every redaction rule that looks at one string alone.
//
// Token shapes, each at the start of a word (after the start of the string
// or a character that is not an ASCII letter or digit), except long hex:
//
//   - sk-…: "sk-" and at least 20 of [A-Za-z0-9_-] (OpenAI, Anthropic and
//     similar API keys);
//   - Bearer: "bearer" in any case, blanks, then a token68 credential of at
//     least 8 characters that is not all letters ("Bearer of bad news" is
//     prose, "Bearer 3f9a…" is not);
//   - long hex: any run of 32 or more hex digits, wherever it is;
//   - JWT: three base64url segments joined by '.', the first decoding to a
//     JSON object with an "alg" member (the last two may be empty, as in
//     unsecured or detached tokens);
//   - AWS access key id: "AKIA" or "ASIA" and exactly 16 of [A-Z0-9];
//   - Slack: "xox" and one of a b p r o s, '-', at least 10 of [A-Za-z0-9-];
//     "xapp-" and at least 10 of the same;
//   - GitHub: "ghp_" "gho_" "ghu_" "ghs_" "ghr_" and at least 30 of
//     [A-Za-z0-9]; "github_pat_" and at least 22 of [A-Za-z0-9_].
func (r *redactor) classify(s string) verdict {
	words := wordTokens(s)
	v := verdict{
		secret:    r.holdsKnown(s) || hasHexRun(s) || words.secret,
		awsKeyID:  words.awsKeyID,
		awsSecret: hasAWSSecretShape(s),
	}
	// Last and only when needed: it is the one rule that decodes.
	if !v.secret && strings.Count(s, ".") >= 2 && hasJWT(s) {
		v.secret = true
	}
	return v
}

// holdsKnown reports whether s contains one of the call's known secrets.
func (r *redactor) holdsKnown(s string) bool {
	for _, k := range r.known {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

// minHexRun is the shortest run of hex digits taken for a secret: 128 bits
// (a UUID's longest run is 12).
const minHexRun = 32

// hasHexRun reports whether s holds minHexRun or more hex digits in a row,
// wherever they are.
func hasHexRun(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			run = 0
			continue
		}
		if run++; run >= minHexRun {
			return true
		}
	}
	return false
}

// hasAWSSecretShape reports whether s holds a run of exactly 40 base64
// characters with upper case, lower case and at least one digit, '+' or
// '/'.
func hasAWSSecretShape(s string) bool {
	for i := 0; i < len(s); {
		n := runLen(s[i:], isBase64)
		if n == 0 {
			i++
			continue
		}
		if n == 40 && mixesBase64Classes(s[i:i+n]) {
			return true
		}
		i += n
	}
	return false
}

// mixesBase64Classes reports whether run, all base64 characters, has a lower
// case letter, an upper case letter and a character that is neither.
func mixesBase64Classes(run string) bool {
	var lower, upper, other bool
	for i := 0; i < len(run); i++ {
		switch c := run[i]; {
		case 'a' <= c && c <= 'z':
			lower = true
		case 'A' <= c && c <= 'Z':
			upper = true
		default:
			other = true
		}
	}
	return lower && upper && other
}

// wordTokens applies the token shapes that must start a word (see classify)
// at every word start of s. It looks at every word, even after a secret is
// found, because an access key id later in s still matters to its siblings.
func wordTokens(s string) verdict {
	var v verdict
	for i := 0; i < len(s); i++ {
		if i > 0 && isAlnum(s[i-1]) {
			continue
		}
		t := tokenAt(s[i:])
		v.secret = v.secret || t.secret
		v.awsKeyID = v.awsKeyID || t.awsKeyID
	}
	return v
}

// tokenAt reports which word-start token shape s, a non-empty string,
// begins with; the first byte selects the only shape that can match.
func tokenAt(s string) verdict {
	switch s[0] {
	case 's':
		return verdict{secret: isAPIKey(s)}
	case 'b', 'B':
		return verdict{secret: isBearer(s)}
	case 'A':
		id := isAWSKeyID(s)
		return verdict{secret: id, awsKeyID: id}
	case 'x':
		return verdict{secret: isSlackToken(s)}
	case 'g':
		return verdict{secret: isGitHubToken(s)}
	}
	return verdict{}
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isBase64(c byte) bool { return isAlnum(c) || c == '+' || c == '/' }

func isBase64URL(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

func isKeyChar(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

func isUpperAlnum(c byte) bool { return 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }

// isToken68 is RFC 7235's token68 alphabet, without the trailing '='.
func isToken68(c byte) bool {
	return isAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
}

// runLen is the length of the prefix of s whose bytes satisfy ok.
func runLen(s string, ok func(byte) bool) int {
	n := 0
	for n < len(s) && ok(s[n]) {
		n++
	}
	return n
}

func isBearer(s string) bool {
	if len(s) < 6 || !strings.EqualFold(s[:6], "bearer") {
		return false
	}
	s = s[6:]
	blanks := runLen(s, func(c byte) bool { return c == ' ' || c == '\t' })
	if blanks == 0 {
		return false
	}
	tok := s[blanks : blanks+runLen(s[blanks:], isToken68)]
	if len(tok) < 8 {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return true
		}
	}
	return false
}

func isAPIKey(s string) bool {
	return strings.HasPrefix(s, "sk-") && runLen(s[3:], isKeyChar) >= 20
}

func isAWSKeyID(s string) bool {
	if !strings.HasPrefix(s, "AKIA") && !strings.HasPrefix(s, "ASIA") {
		return false
	}
	if runLen(s[4:], isUpperAlnum) < 16 {
		return false
	}
	return len(s) == 20 || !isAlnum(s[20])
}

func isSlackToken(s string) bool {
	body := func(rest string) bool {
		return runLen(rest, func(c byte) bool { return isAlnum(c) || c == '-' }) >= 10
	}
	if strings.HasPrefix(s, "xapp-") {
		return body(s[5:])
	}
	return len(s) >= 5 && strings.HasPrefix(s, "xox") && strings.IndexByte("abpros", s[3]) >= 0 && s[4] == '-' && body(s[5:])
}

func isGitHubToken(s string) bool {
	if strings.HasPrefix(s, "github_pat_") {
		return runLen(s[11:], func(c byte) bool { return isAlnum(c) || c == '_' }) >= 22
	}
	return len(s) >= 4 && s[:2] == "gh" && strings.IndexByte("pousr", s[2]) >= 0 && s[3] == '_' &&
		runLen(s[4:], isAlnum) >= 30
}

// hasJWT reports whether s holds a compact JWS or JWE: base64url runs
// header.payload.signature (JWE has more segments; its first three match
// too) whose header decodes to a JSON object with an "alg" member.
func hasJWT(s string) bool {
	for i := 0; i < len(s); {
		if !isBase64URL(s[i]) {
			i++
			continue
		}
		j := i + runLen(s[i:], isBase64URL)
		if j < len(s) && s[j] == '.' {
			k := j + 1 + runLen(s[j+1:], isBase64URL)
			if k < len(s) && s[k] == '.' && isJOSEHeader(s[i:j]) {
				return true
			}
		}
		i = j
	}
	return false
}

// maxJOSEHeader bounds the segment decoded as a header, so that a long
// dotted string costs no more than a scan.
const maxJOSEHeader = 4096

func isJOSEHeader(seg string) bool {
	if len(seg) < 4 || len(seg) > maxJOSEHeader {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return false
	}
	var header map[string]json.RawMessage
	if json.Unmarshal(raw, &header) != nil {
		return false
	}
	_, ok := header["alg"]
	return ok
}
