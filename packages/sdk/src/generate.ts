// Regenerates src/schema.ts, the SDK's types, from a running gateway's OpenAPI document:
//   pnpm --filter @agenthost/sdk generate [http://127.0.0.1:8080/api/openapi.json]
// packages/sdk/test/schema.test.ts fails when the file differs from what the served document generates.
import { writeFile } from 'node:fs/promises';
import { render } from './render.ts';

const url = process.argv[2] ?? `${process.env.AGENTHOST_API_URL ?? 'http://127.0.0.1:8080/api'}/openapi.json`;
const res = await fetch(url);
if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
const file = new URL('./schema.ts', import.meta.url);
await writeFile(file, await render(await res.json()));
console.log(`wrote ${file.pathname} from ${url}`);
