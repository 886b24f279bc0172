import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

// How deploy/test/readme.test.ts reads the README's shell lines and pastes them into bash.

const run = promisify(execFile);

/** The ```sh blocks of a Markdown text under their `## ` headings: a command per line, a line ending in `\` continued. */
export function shellBlocks(md: string): Map<string, string[]> {
  const blocks = new Map<string, string[]>();
  let section = '';
  let inSh = false;
  for (const line of md.split('\n')) {
    if (!inSh && line.startsWith('## ')) section = line.slice(3).trim();
    else if (!inSh && line.trim() === '```sh') inSh = true;
    else if (inSh && line.trim() === '```') inSh = false;
    else if (inSh && line.trim()) {
      const commands = blocks.get(section) ?? [];
      const prev = commands.at(-1);
      if (prev?.endsWith('\\')) commands[commands.length - 1] = `${prev}\n${line}`;
      else commands.push(line);
      blocks.set(section, commands);
    }
  }
  return blocks;
}

/** A command without its trailing comment. */
export const bare = (command: string): string => command.replace(/\s+#[^'"]*$/, '').trim();

export interface Step {
  /** The exit status, -1 when the session did not reach the step. */
  rc: number;
  /** $ID in the session after the step. */
  id: string;
  out: string;
  err: string;
}

const MARK = /\n?@@readme-step (\d+) (\d+) ID=(\S*)@@\n/g;

/** Each step's part of a stream that the session marked after every step. */
function parts(text: string): Map<number, { rc: number; id: string; text: string }> {
  const got = new Map<number, { rc: number; id: string; text: string }>();
  let from = 0;
  for (const m of text.matchAll(MARK)) {
    got.set(Number(m[1]), { rc: Number(m[2]), id: m[3]!, text: text.slice(from, m.index) });
    from = m.index + m[0].length;
  }
  return got;
}

/**
 * The commands pasted into one bash session, verbatim, in the repository's root: after each, a mark of its exit
 * status (and of $ID) on stdout and stderr; the session stops at the first that fails, as a reader would.
 */
export async function session(commands: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }): Promise<Step[]> {
  const script = commands
    .map(
      (c, i) =>
        `${c}\n__rc=$?; for fd in 1 2; do printf '\\n@@readme-step %d %d ID=%s@@\\n' ${i} "$__rc" "\${ID:-}" >&$fd; done; [ "$__rc" = 0 ] || exit "$__rc"`,
    )
    .join('\n');
  const r = await run('bash', ['-c', script], { ...opts, maxBuffer: 16 << 20, timeout: 300_000 }).catch((e: { stdout?: string; stderr?: string }) => ({
    stdout: e.stdout ?? '',
    stderr: e.stderr ?? '',
  }));
  const [out, err] = [parts(r.stdout), parts(r.stderr)];
  return commands.map((_, i) => ({ rc: out.get(i)?.rc ?? -1, id: out.get(i)?.id ?? '', out: out.get(i)?.text ?? '', err: err.get(i)?.text ?? '' }));
}

/** A server-sent event stream's whole frames (heartbeats left out): each one's event and parsed data. */
export const frames = (text: string): { event: string; data: { instance_id: string; status?: string } }[] =>
  text
    .split('\n\n')
    .slice(0, -1) // what follows the last blank line is a frame still arriving (or curl's write-out)
    .map((f) => ({ event: /^event: (.*)$/m.exec(f)?.[1], data: /^data: (.*)$/m.exec(f)?.[1] }))
    .filter((f) => f.event && f.data)
    .map((f) => ({ event: f.event!, data: JSON.parse(f.data!) }));
