package mapping

// ValidTraceParent reports whether v is a W3C traceparent this version
// can vouch for (W3C Trace Context §3.2): "00-" 32 lower-case hex digits
// (not all zero) "-" 16 hex digits (not all zero) "-" 2 hex digits; a
// version above 00 with at least these fields (future versions may append
// "-..."). Version ff is invalid.
func ValidTraceParent(v []byte) bool {
	if len(v) < 55 {
		return false
	}
	if !hex(v[0:2]) || v[2] != '-' || !hex(v[3:35]) || v[35] != '-' || !hex(v[36:52]) || v[52] != '-' || !hex(v[53:55]) {
		return false
	}
	if v[0] == 'f' && v[1] == 'f' {
		return false
	}
	if v[0] == '0' && v[1] == '0' && len(v) != 55 {
		return false
	}
	if len(v) > 55 && v[55] != '-' {
		return false
	}
	return !zero(v[3:35]) && !zero(v[36:52])
}

// ValidTraceState reports whether v is a plausible W3C tracestate (§3.3):
// at most 512 bytes, at most 32 comma-separated list members, each
// key=value with a non-empty key of [a-z0-9_*/@-] and a value of printable
// ASCII without ',' and '='. Empty members (",,") are allowed.
func ValidTraceState(v []byte) bool {
	if len(v) > 512 {
		return false
	}
	members := 0
	start := 0
	for i := 0; i <= len(v); i++ {
		if i < len(v) && v[i] != ',' {
			continue
		}
		m := trim(v[start:i])
		start = i + 1
		if len(m) == 0 {
			continue
		}
		members++
		eq := -1
		for k, c := range m {
			if c == '=' {
				eq = k
				break
			}
		}
		if eq <= 0 || eq == len(m)-1 {
			return false
		}
		for _, c := range m[:eq] {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/' || c == '@') {
				return false
			}
		}
		for _, c := range m[eq+1:] {
			if c < 0x20 || c > 0x7e || c == ',' || c == '=' {
				return false
			}
		}
	}
	return members <= 32
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func hex(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}
