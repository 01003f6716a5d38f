//! Supervised client connections to many MCP servers.
