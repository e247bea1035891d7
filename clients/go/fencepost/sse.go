package fencepost

import (
	"bufio"
	"io"
	"strings"
)

// sseMessage is one Server-Sent Events message.
type sseMessage struct {
	id, event, data string
}

// readSSE reads messages from r and calls emit for each until r ends or fails; it returns the
// error that ended it (nil at a clean EOF). Comments (": ping") and retry fields are ignored.
func readSSE(r io.Reader, emit func(sseMessage)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var m sseMessage
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 || m.event != "" {
				m.data = strings.Join(data, "\n")
				if m.event == "" {
					m.event = "message"
				}
				emit(m)
			}
			m, data = sseMessage{id: m.id}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			m.event = value
		case "data":
			data = append(data, value)
		case "id":
			m.id = value
		}
	}
	return sc.Err()
}
