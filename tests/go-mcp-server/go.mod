module toolgate/go-mcp-server

go 1.21
