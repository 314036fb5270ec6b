// A strict MCP client: the TypeScript SDK's Client (it checks each tool result against the
// tool's outputSchema), plus Ajv in strict mode compiling every schema the server lists and
// checking each default against its own property. Prints one JSON line for the e2e test.
//     node strict_client.mjs http://127.0.0.1:<port>/mcp
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import Ajv from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const client = new Client({ name: "strict-client", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
const { tools } = await client.listTools();
const ajv = new Ajv({ strict: true, allErrors: true });
addFormats(ajv);
const problems = [];
for (const tool of tools) {
  for (const kind of ["inputSchema", "outputSchema"]) {
    if (!tool[kind]) continue;
    try {
      ajv.compile(tool[kind]);
    } catch (error) {
      problems.push(`${tool.name}.${kind}: ${error.message}`);
    }
  }
  for (const [name, property] of Object.entries(tool.inputSchema.properties ?? {})) {
    if (!("default" in property)) continue;
    const { default: value, ...rest } = property;
    const own = { ...rest, $defs: tool.inputSchema.$defs ?? {} }; // its $refs resolve
    if (!ajv.validate(own, value)) {
      problems.push(`${tool.name}.${name}: default ${JSON.stringify(value)} is not valid`);
    }
  }
}
const search = await client.callTool({ name: "memory_search", arguments: { query: "tea" } });
console.log(JSON.stringify({ tools: tools.map((t) => t.name), problems, search }));
await client.close();
