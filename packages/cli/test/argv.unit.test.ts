import { describe, expect, it } from 'vitest';
import { parseCommandLine } from '../src/argv.ts';

// The command line as node:util parseArgs reads it (src/argv.ts), against what the hand-written parser it replaced
// did: the same for every documented line, and for the lines where the two parsers differ, the answer users had, or
// (at the end) the one they have now and why.

const parse = (line: string) => parseCommandLine(line === '' ? [] : line.split(' '));

describe('the documented command lines', () => {
  it('create --name N --version V --wait', () => {
    expect(parse('create --name my-agent --version 2026.1 --wait')).toMatchObject({
      help: false,
      command: 'create',
      args: [],
      name: 'my-agent',
      version: '2026.1',
      wait: true,
    });
    expect(parse('create')).toMatchObject({ command: 'create', args: [], name: undefined, version: undefined, wait: false, follow: false });
  });

  it('logs <id> [-f] [--tail N], with the options before or after the id', () => {
    for (const line of ['logs i-1 -f --tail 20', 'logs -f i-1 --tail 20', 'logs --tail 20 --follow i-1'])
      expect(parse(line), line).toMatchObject({ command: 'logs', args: ['i-1'], follow: true, tail: '20' });
    expect(parse('logs i-1')).toMatchObject({ args: ['i-1'], follow: false, tail: undefined });
  });

  it('the other commands: their words in order, their options by name', () => {
    expect(parse('delete i-1 --wait')).toMatchObject({ command: 'delete', args: ['i-1'], wait: true });
    expect(parse('devices i-1 approve r-1')).toMatchObject({ command: 'devices', args: ['i-1', 'approve', 'r-1'] });
    expect(parse('webhooks listen --forward-to http://localhost:3000/hooks --events a,b --secret whsec_x')).toMatchObject({
      command: 'webhooks',
      args: ['listen'],
      forwardTo: 'http://localhost:3000/hooks',
      events: 'a,b',
      secret: 'whsec_x',
    });
    expect(parseCommandLine(['call', 'POST', '/keys/store', '{"instance_id":"i-1"}'])).toMatchObject({
      command: 'call',
      args: ['POST', '/keys/store', '{"instance_id":"i-1"}'],
    });
    expect(parse('subscribe pro')).toMatchObject({ command: 'subscribe', args: ['pro'] });
  });
});

describe('help: asked for is an answer, wherever it stands', () => {
  it.each(['help', 'help create', '--help', '-h', 'create --help', 'logs i-1 -f -h', 'frobnicate --help'])('`%s`', (line) => {
    expect(parse(line).help).toBe(true);
  });

  it('also where an option would take it for its value (parseArgs would make an instance named --help)', () => {
    expect(parse('create --name --help').help).toBe(true);
    expect(parse('logs i-1 --tail -h').help).toBe(true);
  });

  it('also after `--`, which ends the options', () => {
    expect(parse('call GET /x -- --help').help).toBe(true);
  });

  it('not asked for', () => {
    expect(parse('').help).toBe(false);
    expect(parse('create --name helpful').help).toBe(false);
    expect(parse('status help').help).toBe(false); // only the first word is the command `help`
  });
});

describe('what the hand parser accepted and strict parseArgs would refuse: still accepted', () => {
  it('an unknown option is ignored', () => {
    expect(parse('create --verbose --name a')).toMatchObject({ command: 'create', args: [], name: 'a' });
    expect(parse('list --json')).toMatchObject({ command: 'list', args: [] });
  });

  it('an option at the end without its value is absent, not an error', () => {
    expect(parse('create --wait --name')).toMatchObject({ command: 'create', args: [], wait: true, name: undefined });
    expect(parse('logs i-1 --tail')).toMatchObject({ args: ['i-1'], tail: undefined });
  });

  it('a value may start with a dash', () => {
    expect(parse('logs i-1 --tail -5').tail).toBe('-5');
  });

  it('an empty value is no value, and a value given to --wait or --follow does not turn them on', () => {
    expect(parseCommandLine(['create', '--name', ''])).toMatchObject({ name: undefined });
    expect(parse('create --wait=yes')).toMatchObject({ wait: false });
    expect(parse('logs i-1 --follow=1')).toMatchObject({ follow: false });
  });

  it('a repeated option: the last one counts', () => {
    expect(parse('create --name a --name b').name).toBe('b');
  });

  it('the command is the first word: a line starting with an option has none (a usage error)', () => {
    expect(parse('--wait create')).toMatchObject({ command: undefined, help: false });
    expect(parse('-- create')).toMatchObject({ command: undefined });
  });
});

describe('where the hand parser misread a line: the line as parseArgs reads it', () => {
  // The hand parser indexed the words of wallet, airdrop, subscribe, deposit, devices, webhooks and call by their
  // place on the line, options included, so `call --wait GET /x` called method "--wait"; and it kept an unknown
  // option as a word, so `status --verbose i-1` asked for instance "--verbose". Each was an error (exit 1 or 2).
  it('options may stand before the words of every command', () => {
    expect(parse('call --wait GET /x')).toMatchObject({ args: ['GET', '/x'] });
    expect(parse('devices -f i-1 approve r-1')).toMatchObject({ args: ['i-1', 'approve', 'r-1'] });
    expect(parse('webhooks --forward-to http://u listen')).toMatchObject({ args: ['listen'], forwardTo: 'http://u' });
  });

  it('an unknown option or an option without its value takes no word’s place', () => {
    expect(parse('status --verbose i-1')).toMatchObject({ args: ['i-1'] });
    expect(parse('status --verbose')).toMatchObject({ args: [] });
    expect(parse('stop --name')).toMatchObject({ args: [] });
  });

  it('--name=N and the other option=value spellings are read (the hand parser ignored them)', () => {
    expect(parse('create --name=a --tail=3')).toMatchObject({ args: [], name: 'a', tail: '3' });
  });

  it('`--` ends the options: what follows is words, even with a dash', () => {
    expect(parse('call POST /x -- -1')).toMatchObject({ args: ['POST', '/x', '-1'] });
  });

  it('short flags group: -fh is -f -h', () => {
    expect(parse('logs i-1 -fh')).toMatchObject({ follow: true, help: true });
  });
});
