package nodestatus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unsafe"
)

// scanner walks a JSON text without decoding it: it checks the syntax as
// encoding/json does (the same grammar, bytes below 0x20 refused in
// strings, invalid UTF-8 let through, at most maxDepth nested arrays and
// objects) and finds where the values it is asked for lie, so that
// ParseNode pays a byte loop for the node's images and the rest it does
// not read, instead of encoding/json's scanner and reflection.
type scanner struct {
	b     []byte
	i     int
	depth int
}

// maxDepth is encoding/json's limit on nesting.
const maxDepth = 10000

// syntaxError is a JSON syntax error at a byte offset.
type syntaxError struct {
	what string
	off  int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.what, e.off) }

func (s *scanner) fail(what string) error { return &syntaxError{what, s.i} }

// unexpected is the error for the byte at s.i (or the end) where a value
// or a delimiter was wanted.
func (s *scanner) unexpected(want string) error {
	if s.i >= len(s.b) {
		return s.fail("unexpected end of JSON, looking for " + want)
	}
	return s.fail(fmt.Sprintf("invalid character %q looking for %s", s.b[s.i], want))
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// at skips whitespace and tells whether the next byte is c.
func (s *scanner) at(c byte) bool {
	s.ws()
	return s.i < len(s.b) && s.b[s.i] == c
}

// plain marks the bytes that a string holds as they are: not '"', not
// '\\', not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return
}()

// str passes the string at s.i (its opening quote).
func (s *scanner) str() error {
	b, i := s.b, s.i+1
	for {
		for i+8 <= len(b) && plainWord(*(*uint64)(unsafe.Pointer(&b[i]))) {
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			s.i = i
			return s.fail("unexpected end of JSON in a string")
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return nil
		case '\\':
			i++
			if i >= len(b) {
				s.i = i
				return s.fail("unexpected end of JSON in a string escape")
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(b) || !isHex(b[i]) {
						s.i = i
						return s.fail("invalid \\u escape in a string")
					}
					i++
				}
			default:
				s.i = i
				return s.fail("invalid escape in a string")
			}
		default:
			s.i = i
			return s.fail("control character in a string")
		}
	}
}

// simple is whether a string's JSON text (quotes included) holds only
// ASCII and no escape: its bytes between the quotes are its value.
func simple(text []byte) bool {
	for _, c := range text {
		if c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

// plainWord is whether the 8 bytes of w (loaded from memory) are all
// plain: no byte is '"', '\\' or below 0x20. (A zero byte of x sets its
// high bit in x-0x01..01 & ^x; a byte below n, in x-n..n & ^x, with n
// at most 0x80.)
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	return ((quote-ones)&^quote|(backslash-ones)&^backslash|(w-ones*0x20)&^w)&highs == 0
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number passes the number at s.i.
func (s *scanner) number() error {
	b, i := s.b, s.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		s.i = i
		return s.unexpected("a digit")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			s.i = i
			return s.unexpected("a digit after the decimal point")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			s.i = i
			return s.unexpected("a digit in the exponent")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.i = i
	return nil
}

// literal passes true, false or null at s.i.
func (s *scanner) literal() error {
	for _, w := range [...]string{"true", "false", "null"} {
		if s.b[s.i] == w[0] {
			if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
				s.i += len(w)
				return nil
			}
			break
		}
	}
	return s.unexpected("a value")
}

// push enters an array or object (s.i at its bracket).
func (s *scanner) push() error {
	s.depth++
	if s.depth > maxDepth {
		return s.fail("nested deeper than 10000")
	}
	s.i++
	return nil
}

// skip passes the value at s.i (whitespace first), whatever it holds.
func (s *scanner) skip() error {
	// stack holds the kinds ('[' or '{') of the arrays and objects open
	// within the value; its first 64 on the goroutine's stack.
	var inline [64]byte
	stack := inline[:0]
value:
	s.ws()
	if s.i >= len(s.b) {
		return s.unexpected("a value")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		if err := s.str(); err != nil {
			return err
		}
	case c == '{' || c == '[':
		if err := s.push(); err != nil {
			return err
		}
		if s.at(c + 2) { // '}' or ']': empty
			s.i++
			s.depth--
			break
		}
		stack = append(stack, c)
		if c == '{' {
			goto key
		}
		goto value
	case c == '-' || isDigit(c):
		if err := s.number(); err != nil {
			return err
		}
	default:
		if err := s.literal(); err != nil {
			return err
		}
	}
	// A value has ended: the next member or element, or the end of
	// containers.
	for len(stack) > 0 {
		s.ws()
		if s.i >= len(s.b) {
			return s.unexpected("',' or the end of an array or object")
		}
		top := stack[len(stack)-1]
		switch c := s.b[s.i]; {
		case c == ',':
			s.i++
			if top == '{' {
				goto key
			}
			goto value
		case c == '}' && top == '{', c == ']' && top == '[':
			s.i++
			stack = stack[:len(stack)-1]
			s.depth--
		default:
			return s.unexpected("',' or the end of an array or object")
		}
	}
	return nil
key:
	if !s.at('"') {
		return s.unexpected("an object key")
	}
	if err := s.str(); err != nil {
		return err
	}
	if !s.at(':') {
		return s.unexpected("':' after an object key")
	}
	s.i++
	goto value
}

// members walks the object at s.i (whitespace first): for each member, f
// gets the key's JSON text (quotes included) with s.i at the value, and
// must pass the value (s.skip, or a value of its own).
func (s *scanner) members(f func(key []byte) error) error {
	if !s.at('{') {
		return s.unexpected("'{'")
	}
	if err := s.push(); err != nil {
		return err
	}
	if s.at('}') {
		s.i++
		s.depth--
		return nil
	}
	for {
		if !s.at('"') {
			return s.unexpected("an object key")
		}
		start := s.i
		if err := s.str(); err != nil {
			return err
		}
		key := s.b[start:s.i]
		if !s.at(':') {
			return s.unexpected("':' after an object key")
		}
		s.i++
		s.ws()
		if err := f(key); err != nil {
			return err
		}
		if s.at(',') {
			s.i++
			continue
		}
		if s.at('}') {
			s.i++
			s.depth--
			return nil
		}
		return s.unexpected("',' or '}' after an object member")
	}
}

// value passes the value at s.i and returns its JSON text.
func (s *scanner) value() ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skip(); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// unquote is the string whose JSON text (quotes included) is text, as
// encoding/json decodes it.
func unquote(text []byte) string {
	if simple(text) {
		return string(text[1 : len(text)-1])
	}
	var v string
	_ = json.Unmarshal(text, &v)
	return v
}

// field is which of names (a struct's JSON field names) a key (its JSON
// text) names, as encoding/json matches them: exactly, else without
// regard to case; -1 for none.
func field(key []byte, names ...string) int {
	k := key[1 : len(key)-1]
	if !simple(key) {
		k = []byte(unquote(key))
	}
	for i, n := range names {
		if string(k) == n {
			return i
		}
	}
	for i, n := range names {
		if bytes.EqualFold(k, []byte(n)) {
			return i
		}
	}
	return -1
}
