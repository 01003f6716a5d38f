// A large-payload upstream on the official TypeScript SDK v2
// (`@modelcontextprotocol/server`, pinned in scripts/node/package.json), for
// scripts/large-payloads.sh (docs/BENCHMARKS.md, "Large payloads"). Needs
// Node 22 (.tools/node/node_modules/.bin/node).
//
//     node scripts/large-payloads/ts_upstream.mjs [--json]
//
// `--json` answers as JSON (`responseMode: 'json'`), else as event streams.
// Prints "listening on URL". Tools: `echo` {text, pad} (a short answer),
// `echo_back` {text, pad} (its arguments back, as JSON text and structured
// content, as the SDK's typed tools answer), `add` {a, b}.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const MODULES = join(dirname(fileURLToPath(import.meta.url)), '../../.tools/node/node_modules');

async function load(name, subpath = '.') {
    const root = join(MODULES, name);
    const exported = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).exports[subpath];
    const entry = typeof exported.import === 'string' ? exported.import : exported.import.default;
    return import(pathToFileURL(join(root, entry)).href);
}

const { McpServer, createMcpHandler } = await load('@modelcontextprotocol/server');
const z = await load('zod');
const json = process.argv.includes('--json');

function factory() {
    const server = new McpServer({ name: 'large-payloads-ts', version: '1.0.0' });
    const args = z.object({ text: z.string(), pad: z.array(z.record(z.string(), z.any())).optional() });
    server.registerTool(
        'echo',
        { description: 'Echoes text and says how many pad items came.', inputSchema: args },
        async ({ text, pad }) => ({ content: [{ type: 'text', text: `${text} (${(pad ?? []).length} pad items)` }] })
    );
    server.registerTool(
        'echo_back',
        {
            description: 'Returns all its arguments back.',
            inputSchema: args,
            outputSchema: z.object({ text: z.string(), pad: z.array(z.record(z.string(), z.any())) })
        },
        async ({ text, pad }) => {
            const out = { text, pad: pad ?? [] };
            return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
        }
    );
    server.registerTool(
        'add',
        { description: 'a + b', inputSchema: z.object({ a: z.number().int(), b: z.number().int() }) },
        async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] })
    );
    return server;
}

const handler = createMcpHandler(factory, { responseMode: json ? 'json' : 'sse' });
const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = ['GET', 'HEAD'].includes(req.method) ? undefined : Buffer.concat(chunks);
    const request = new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers: req.headers, body });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) for await (const chunk of response.body) res.write(chunk);
    res.end();
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${server.address().port}/mcp\n`));
