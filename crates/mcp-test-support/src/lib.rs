//! Test MCP servers.
