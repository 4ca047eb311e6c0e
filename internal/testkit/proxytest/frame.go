package proxytest

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// Request is one request the client sent, as framed by the proxy's
// protocol.
type Request struct {
	// Args is, for RESP, the command and its arguments (Args[0]
	// upper-cased).
	Args []string
	// Payload is, for MySQL, the packet payload (the first byte is the
	// command, 0x03 = COM_QUERY); for Kafka, the request frame without its
	// 4-byte size (api key int16, api version int16, correlation id int32,
	// ...).
	Payload []byte
}

// Matcher picks requests.
type Matcher func(Request) bool

// Kafka API keys, for KafkaRequest.
const (
	KafkaProduce      int16 = 0
	KafkaFetch        int16 = 1
	KafkaMetadata     int16 = 3
	KafkaOffsetCommit int16 = 8
)

// RedisCommand matches the Redis command name (case-insensitive).
func RedisCommand(name string) Matcher {
	return func(r Request) bool { return len(r.Args) > 0 && strings.EqualFold(r.Args[0], name) }
}

// RedisScript matches the script src run by EVALSHA (of sha1(src)) or EVAL,
// as go-redis's Script.Run sends it (and the _RO variants).
func RedisScript(src string) Matcher {
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	return func(r Request) bool {
		if len(r.Args) < 2 {
			return false
		}
		switch r.Args[0] {
		case "EVALSHA", "EVALSHA_RO":
			return strings.EqualFold(r.Args[1], sha)
		case "EVAL", "EVAL_RO":
			return r.Args[1] == src
		}
		return false
	}
}

// MySQLQuery matches a COM_QUERY whose SQL text starts with prefix
// (case-insensitive, leading white space ignored), e.g. "COMMIT".
func MySQLQuery(prefix string) Matcher {
	return func(r Request) bool {
		if len(r.Payload) == 0 || r.Payload[0] != 0x03 {
			return false
		}
		q := bytes.TrimLeft(r.Payload[1:], " \t\r\n")
		return len(q) >= len(prefix) && strings.EqualFold(string(q[:len(prefix)]), prefix)
	}
}

// KafkaRequest matches a Kafka request of the API apiKey (KafkaProduce, ...).
func KafkaRequest(apiKey int16) Matcher {
	return func(r Request) bool {
		return len(r.Payload) >= 8 && int16(binary.BigEndian.Uint16(r.Payload[0:2])) == apiKey
	}
}

var errFraming = errors.New("proxytest: cannot frame the stream")

// maxFrame bounds what the proxy buffers for one request or reply line.
const maxFrame = 256 << 20

// parseRequest frames one request at the start of b: its length (0 when b
// holds only part of it), the request, and whether it is a request to match
// (a MySQL packet of the handshake is not).
func parseRequest(proto Protocol, b []byte) (int, Request, bool, error) {
	switch proto {
	case RESP:
		return parseRESPRequest(b)
	case MySQL:
		if len(b) < 4 {
			return 0, Request{}, false, nil
		}
		size := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		if len(b) < 4+size {
			return 0, Request{}, false, nil
		}
		// A command starts a sequence (seq 0); handshake and auth packets
		// do not.
		return 4 + size, Request{Payload: b[4 : 4+size]}, b[3] == 0, nil
	case Kafka:
		if len(b) < 4 {
			return 0, Request{}, false, nil
		}
		size := int64(int32(binary.BigEndian.Uint32(b[0:4])))
		if size < 8 || size > maxFrame {
			return 0, Request{}, false, errFraming
		}
		if int64(len(b)) < 4+size {
			return 0, Request{}, false, nil
		}
		return int(4 + size), Request{Payload: b[4 : 4+size]}, true, nil
	}
	return len(b), Request{}, false, nil
}

func parseRESPRequest(b []byte) (int, Request, bool, error) {
	if len(b) == 0 {
		return 0, Request{}, false, nil
	}
	if b[0] != '*' { // an inline command: one line of words
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(b) > 64<<10 {
				return 0, Request{}, false, errFraming
			}
			return 0, Request{}, false, nil
		}
		args := strings.Fields(string(b[:i]))
		if len(args) == 0 {
			return i + 1, Request{}, false, nil
		}
		args[0] = strings.ToUpper(args[0])
		return i + 1, Request{Args: args}, true, nil
	}
	n, err := respValue(b, 0)
	if err != nil || n == 0 {
		return 0, Request{}, false, err
	}
	// A whole array: read its bulk strings.
	i := bytes.Index(b, crlf)
	count, _ := strconv.Atoi(string(b[1:i]))
	pos := i + 2
	args := make([]string, 0, max(count, 0))
	for range count {
		if b[pos] != '$' {
			return 0, Request{}, false, errFraming
		}
		j := pos + bytes.Index(b[pos:], crlf)
		l, _ := strconv.Atoi(string(b[pos+1 : j]))
		if l < 0 {
			args = append(args, "")
			pos = j + 2
			continue
		}
		args = append(args, string(b[j+2:j+2+l]))
		pos = j + 2 + l + 2
	}
	if len(args) > 0 {
		args[0] = strings.ToUpper(args[0])
	}
	return n, Request{Args: args}, len(args) > 0, nil
}

var crlf = []byte("\r\n")

// respValue returns the length of the RESP2/RESP3 value at the start of b,
// 0 when b holds only part of it.
func respValue(b []byte, depth int) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if depth > 64 {
		return 0, errFraming
	}
	i := bytes.Index(b, crlf)
	if i < 0 {
		if len(b) > 64<<10 {
			return 0, errFraming
		}
		return 0, nil
	}
	switch t := b[0]; t {
	case '+', '-', ':', '_', ',', '#', '(':
		return i + 2, nil
	case '$', '!', '=':
		l, err := strconv.Atoi(string(b[1:i]))
		if err != nil || l > maxFrame {
			return 0, errFraming
		}
		if l < 0 {
			return i + 2, nil
		}
		need := i + 2 + l + 2
		if len(b) < need {
			return 0, nil
		}
		if !bytes.Equal(b[need-2:need], crlf) {
			return 0, errFraming
		}
		return need, nil
	case '*', '~', '>', '%', '|':
		count, err := strconv.Atoi(string(b[1:i]))
		if err != nil || count > maxFrame {
			return 0, errFraming
		}
		if count < 0 {
			return i + 2, nil
		}
		if t == '%' || t == '|' {
			count *= 2
		}
		if t == '|' { // attributes come before the value they describe
			count++
		}
		pos := i + 2
		for range count {
			n, err := respValue(b[pos:], depth+1)
			if err != nil || n == 0 {
				return 0, err
			}
			pos += n
		}
		return pos, nil
	}
	return 0, errFraming
}
