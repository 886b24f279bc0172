import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { docker } from './docker.ts';

/**
 * A model provider for real OpenClaw instances in tests: just enough of the Chat Completions API (streamed or not)
 * for one agent turn, answering "pong", on this host. It records the Authorization header and the messages of each
 * call, so a test sees which key a turn used and what history the agent sent.
 */
export interface TestLlm {
  port: number;
  calls: Array<{ authorization: string; messages: Array<{ role: string; content: unknown }> }>;
  stop(): void;
}

export function startTestLlm(): Promise<TestLlm> {
  const calls: TestLlm['calls'] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (!req.url?.endsWith('/chat/completions')) return res.writeHead(404).end('{}');
      let messages: TestLlm['calls'][number]['messages'] = [];
      try {
        messages = (JSON.parse(body) as { messages?: typeof messages }).messages ?? [];
      } catch {
        /* recorded without them */
      }
      calls.push({ authorization: req.headers.authorization ?? '', messages });
      const base = { id: 'chatcmpl-test', created: Math.floor(Date.now() / 1000), model: 'm1' };
      const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
      if (!/"stream":\s*true/.test(body)) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(
          JSON.stringify({
            ...base,
            object: 'chat.completion',
            choices: [{ index: 0, message: { role: 'assistant', content: 'pong' }, finish_reason: 'stop' }],
            usage,
          }),
        );
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: 'pong' }, finish_reason: null }] })}\n\n`,
      );
      res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '0.0.0.0', () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        calls,
        stop: () => {
          server.closeAllConnections();
          server.close();
        },
      }),
    ),
  );
}

/**
 * Points the instance's OpenClaw at the test model provider, its key taken from the platform's secret provider
 * (OPENAI_API_KEY) unless `apiKey` says otherwise, and turns on its OpenAI-compatible chat endpoint: the user's config, written once; the
 * instance must be restarted to start with it. The provider is reached at the host's address on the instance bridge.
 */
export async function useTestLlm(
  container: string,
  llmPort: number,
  apiKey: unknown = { source: 'exec', provider: 'agenthost', id: 'OPENAI_API_KEY' },
): Promise<void> {
  const keysUrl = (JSON.parse(await docker('inspect', '--format', '{{json .Config.Env}}', container)) as string[]).find((e) =>
    e.startsWith('AGENTHOST_KEYS_URL='),
  )!;
  const hostAddr = new URL(keysUrl.slice('AGENTHOST_KEYS_URL='.length)).hostname;
  const patch = {
    gateway: { http: { endpoints: { chatCompletions: { enabled: true } } } },
    agents: { defaults: { model: { primary: 'testllm/m1' } } },
    models: {
      mode: 'merge',
      providers: {
        testllm: {
          baseUrl: `http://${hostAddr}:${llmPort}/v1`,
          api: 'openai-completions',
          apiKey,
          models: [
            {
              id: 'm1',
              name: 'M1',
              reasoning: false,
              input: ['text'],
              cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
              contextWindow: 32000,
              maxTokens: 1000,
            },
          ],
        },
      },
    },
  };
  const script = `const fs=require("fs");const p="/data/home/.openclaw/openclaw.json";const c=JSON.parse(fs.readFileSync(p,"utf8"));const x=${JSON.stringify(patch)};c.gateway={...c.gateway,...x.gateway};c.agents=x.agents;c.models=x.models;fs.writeFileSync(p,JSON.stringify(c,null,2))`;
  await docker('exec', container, 'node', '-e', script);
}

/**
 * The long-lived processes: the bootstrap (pid 1) and the OpenClaw gateway it started (its child), with their start
 * times (clock ticks since boot) and environments. OpenClaw's own short-lived helpers come and go with each turn.
 */
export async function openclawProcesses(container: string): Promise<Array<{ pid: string; started: string; env: string }>> {
  const out = await docker(
    'exec',
    container,
    'sh',
    '-c',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell script; ${p#/proc/} is the shell's
    'for p in /proc/[0-9]*; do s=$(cat $p/stat 2>/dev/null) || continue; pp=$(echo "$s" | cut -d" " -f4); if [ "${p#/proc/}" = 1 ] || { [ "$pp" = 1 ] && grep -q openclaw $p/cmdline; }; then echo "${p#/proc/} $(echo "$s" | cut -d" " -f22) $(tr "\\0" " " < $p/environ | base64 -w0)"; fi; done',
  );
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [pid, started, env] = l.split(' ');
      return { pid: pid!, started: started!, env: Buffer.from(env ?? '', 'base64').toString() };
    });
}
