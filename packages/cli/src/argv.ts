import { parseArgs } from 'node:util';

/**
 * Every option of every command, in one table: a command ignores the ones it has no use for, as the CLI always has,
 * so `--wait` on `list` or `--tail` on `create` is not a mistake.
 */
const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  follow: { type: 'boolean', short: 'f' },
  wait: { type: 'boolean' },
  name: { type: 'string' },
  version: { type: 'string' },
  tail: { type: 'string' },
  'forward-to': { type: 'string' },
  events: { type: 'string' },
  secret: { type: 'string' },
} as const;

/** A command line as main.ts dispatches it. An option given without a value, or with an empty one, is absent. */
export interface CommandLine {
  /** `help`, `--help` or `-h` anywhere: the commands on stdout, and that is a success. */
  help: boolean;
  /** The first word; none when the line starts with an option (`agenthost --wait create` is a usage error). */
  command: string | undefined;
  /** The words after the command, wherever the options stand among them. */
  args: string[];
  follow: boolean;
  wait: boolean;
  name: string | undefined;
  version: string | undefined;
  tail: string | undefined;
  forwardTo: string | undefined;
  events: string | undefined;
  secret: string | undefined;
}

/**
 * --help and -h ask for help wherever they stand, as they always have: also where an option takes them for its value
 * (`create --name --help` must not make an instance named --help) and after `--`.
 */
const HELP = new Set(['--help', '-h']);

export function parseCommandLine(argv: string[]): CommandLine {
  // Not strict, because the CLI never refused these and scripts may pass them: an unknown option is ignored, an
  // option at the end without its value is ignored, and a value may start with a dash (`--tail -5`).
  const { values, positionals, tokens } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: false, tokens: true });
  // Not strict, a boolean may come as `--wait=x` and a string option without its value as true: neither counts.
  const on = (v: string | boolean | undefined) => v === true;
  const text = (v: string | boolean | undefined) => (typeof v === 'string' && v !== '' ? v : undefined);
  const command = tokens[0]?.kind === 'positional' ? tokens[0].value : undefined;
  return {
    help: command === 'help' || tokens.some((t) => (t.kind === 'option' && t.name === 'help') || (t.kind !== 'option-terminator' && HELP.has(t.value ?? ''))),
    command,
    args: positionals.slice(command === undefined ? 0 : 1),
    follow: on(values.follow),
    wait: on(values.wait),
    name: text(values.name),
    version: text(values.version),
    tail: text(values.tail),
    forwardTo: text(values['forward-to']),
    events: text(values.events),
    secret: text(values.secret),
  };
}
