// A minimal MCP server (JSON-RPC 2.0 over HTTP POST) that reads its requests the way Go MCP servers
// do: Go's encoding/json, decoding into structs with `json:"..."` tags. encoding/json matches an
// object key to a field case-insensitively (with Unicode folding: "Name", "NAME", "nam\u017fe"...
// read as "name") and the last duplicate wins. The end-to-end test tests/e2e/test_go_decoder.py puts
// it behind Envoy and Toolgate to check that Toolgate reads every message it lets through as this
// decoder does: a tool call Toolgate denies never runs here.
//
// Standard library only (built offline by build.sh). Command line, output and execution log match the
// sample server (tests/mcp-server) where the harness reads them:
//
//	toolgate-go-mcp-server --listen 127.0.0.1:0 --log FILE [--name NAME]
//
// prints "listening on HOST:PORT" once ready, then appends one JSON object per executed tool call or
// resource read to FILE: {"server","http_method","path","jsonrpc_method","id","tool","args","uri"}
// ("path" with its query, where the harness tags requests).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
)

// message is a JSON-RPC request as Go MCP servers declare it.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// callParams are tools/call's params, resources/read's uri included (one struct: a message whose
// params carry both reads both).
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	URI       string          `json:"uri"`
}

// Each tool decodes its arguments into its own struct, as Go tools do.
type sumArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type envArgs struct {
	Name string `json:"name"`
}

// Note's tag is not ASCII: Go's folding reads "straẞe" (capital sharp s) as it.
type echoArgs struct {
	Message string `json:"message"`
	Note    string `json:"straße,omitempty"`
}

type server struct {
	name string
	mu   sync.Mutex
	log  *os.File
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

var tools = []map[string]any{
	{"name": "get-sum", "description": "a + b", "inputSchema": map[string]any{"type": "object"}},
	{"name": "get-env", "description": "an environment variable", "inputSchema": map[string]any{"type": "object"}},
	{"name": "echo", "description": "echoes message", "inputSchema": map[string]any{"type": "object"}},
}

func text(s string) map[string]any {
	return map[string]any{"content": []map[string]any{{"type": "text", "text": s}}}
}

// record logs a call before it runs; `args` is what the tool decoded from its arguments.
func (s *server) record(r *http.Request, m *message, p *callParams, args any) {
	entry := map[string]any{
		"server": s.name, "http_method": r.Method, "path": r.URL.RequestURI(), "jsonrpc_method": m.Method,
		"id": m.ID, "tool": p.Name, "args": args, "uri": p.URI,
	}
	line, err := json.Marshal(entry)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.Write(append(line, '\n'))
}

// handle answers one message; nil for a notification.
func (s *server) handle(r *http.Request, raw json.RawMessage) *response {
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return &response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{-32700, err.Error()}}
	}
	if m.ID == nil {
		return nil
	}
	out := &response{JSONRPC: "2.0", ID: m.ID}
	var p callParams
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			out.Error = &rpcError{-32602, err.Error()}
			return out
		}
	}
	switch m.Method {
	case "initialize":
		out.Result = map[string]any{
			"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": s.name, "version": "1"},
		}
	case "ping":
		out.Result = map[string]any{}
	case "tools/list":
		out.Result = map[string]any{"tools": tools}
	case "tools/call":
		var args any
		switch p.Name {
		case "get-sum":
			args = &sumArgs{}
		case "get-env":
			args = &envArgs{}
		case "echo":
			args = &echoArgs{}
		}
		if args != nil && len(p.Arguments) > 0 {
			if err := json.Unmarshal(p.Arguments, args); err != nil {
				out.Error = &rpcError{-32602, err.Error()}
				return out
			}
		}
		s.record(r, &m, &p, args)
		switch a := args.(type) {
		case *sumArgs:
			out.Result = text(fmt.Sprint(a.A + a.B))
		case *envArgs:
			out.Result = text(os.Getenv(a.Name))
		case *echoArgs:
			out.Result = text(a.Message)
		default:
			out.Error = &rpcError{-32602, "unknown tool " + p.Name}
		}
	case "resources/read":
		s.record(r, &m, &p, nil)
		out.Result = map[string]any{"contents": []map[string]any{{"uri": p.URI, "text": "contents of " + p.URI}}}
	default:
		out.Error = &rpcError{-32601, "method not found: " + m.Method}
	}
	return out
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var out any
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(body, &batch); err != nil {
			out = &response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{-32700, err.Error()}}
		} else {
			answers := []*response{}
			for _, raw := range batch {
				if a := s.handle(r, raw); a != nil {
					answers = append(answers, a)
				}
			}
			if len(answers) > 0 {
				out = answers
			}
		}
	} else if a := s.handle(r, body); a != nil {
		out = a
	}
	if out == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	logPath := flag.String("log", "", "execution log (JSON lines)")
	name := flag.String("name", "go-mcp-server", "server name in the log")
	flag.Parse()
	if *logPath == "" {
		fmt.Fprintln(os.Stderr, "--log is required")
		os.Exit(2)
	}
	f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	os.Stdout.Sync()
	if err := http.Serve(ln, &server{name: *name, log: f}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
