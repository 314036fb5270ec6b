"""Tools of remote MCP (Model Context Protocol) servers, over Streamable HTTP.

    client.McpClient               one server: initialize, tools/list, tools/call (httpx)
    remote_tools.RemoteToolServers  every configured server, for the agent: listings cached
                                   per container, calls returned as text, never raising

This module imports nothing on purpose: a handler's import must not pay for MCP code, which
the agent imports on the first turn that has servers configured.
"""
