import { recordSecret } from '@agenthost/testkit';
import { type Actors, type Case, UNKNOWN_INSTANCE } from './types.ts';
import { instanceKeyCases } from './instance-key-cases.ts';
import { deviceCases } from './device-cases.ts';

const UNKNOWN_BACKUP = 'bk-0123456789abcdef0123';
/** Long enough (the most the API allows) for a loaded engine to create and start the stand-in agent; the wait answers as soon as it runs. */
const running = (s: { instance: string }) => `/instance/wait/${s.instance}?state=running&timeout=60`;

/**
 * An instance's whole life against the live provisioner (stand-in agent image, real Docker engine): create, wait,
 * read, keys, backup, restore, clone, stop, start, restart, upgrade, delete. Each success answer and each error answer a
 * client meets is validated against the document by the contract test.
 */
export function instanceCases(a: Actors): Case[] {
  const mine = (s: { instance: string }) => s.instance;
  return [
    {
      operationId: 'createInstance',
      why: 'accepted',
      as: 'subscriber',
      path: '/instance/create',
      body: { framework: 'openclaw', name: 'contract agent' },
      status: 200,
      documented: true,
      keep: (b, s) => {
        recordSecret(b.access_token);
        s.instance = b.instance_id;
      },
    },
    { operationId: 'createInstance', why: 'no framework', as: 'subscriber', path: '/instance/create', body: { name: 'x' }, status: 400 },
    {
      operationId: 'createInstance',
      why: 'no subscription',
      as: 'user',
      path: '/instance/create',
      body: { framework: 'openclaw' },
      status: 402,
      documented: true,
    },
    { operationId: 'waitForInstance', why: 'until running', as: 'subscriber', path: running, status: 200, documented: true },
    { operationId: 'waitForInstance', why: 'an unknown state', as: 'subscriber', path: (s) => `/instance/wait/${s.instance}?state=asleep`, status: 400 },
    {
      operationId: 'waitForInstance',
      why: 'not mine',
      as: 'subscriber',
      path: `/instance/wait/${UNKNOWN_INSTANCE}?state=running&timeout=1`,
      status: 404,
      documented: true,
    },
    { operationId: 'getInstance', why: 'running', as: 'subscriber', path: (s) => `/instance/status/${mine(s)}`, status: 200, documented: true },
    { operationId: 'getInstance', why: 'not mine', as: 'subscriber', path: `/instance/status/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    { operationId: 'listInstances', why: 'one instance', as: 'subscriber', path: '/instance/list', status: 200, documented: true },
    {
      operationId: 'getInstanceLogs',
      why: 'the last lines',
      as: 'subscriber',
      path: (s) => `/instance/logs/${mine(s)}?tail=50`,
      status: 200,
      documented: true,
    },
    { operationId: 'getInstanceLogs', why: 'a tail out of range', as: 'subscriber', path: (s) => `/instance/logs/${mine(s)}?tail=-1`, status: 400 },
    {
      operationId: 'streamInstanceEvents',
      why: 'the current status first',
      as: 'subscriber',
      path: (s) => `/instance/events/${mine(s)}`,
      status: 200,
      documented: true,
    },
    { operationId: 'streamInstanceEvents', why: 'not mine', as: 'subscriber', path: `/instance/events/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    // Keys of the instance (instance-key-cases.ts): the owner's calls, then the instance's own.
    ...instanceKeyCases(a),
    ...deviceCases(),
    // Backups: taken, listed, restored in place, cloned into a new instance.
    {
      operationId: 'createBackup',
      why: 'of a running instance',
      as: 'subscriber',
      path: (s) => `/instance/backup/${mine(s)}`,
      status: 200,
      documented: true,
      keep: (b, s) => void (s.backup = b.backup_id),
    },
    { operationId: 'createBackup', why: 'not mine', as: 'subscriber', path: `/instance/backup/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    { operationId: 'listBackups', why: 'one backup', as: 'subscriber', path: (s) => `/instance/backups/${mine(s)}`, status: 200, documented: true },
    {
      operationId: 'restoreBackup',
      why: 'the backup',
      as: 'subscriber',
      path: (s) => `/instance/restore/${mine(s)}`,
      body: (s) => ({ backup_id: s.backup }),
      status: 200,
      documented: true,
      keep: (b) => recordSecret(b.access_token),
    },
    {
      operationId: 'restoreBackup',
      why: 'no such backup',
      as: 'subscriber',
      path: (s) => `/instance/restore/${mine(s)}`,
      body: { backup_id: UNKNOWN_BACKUP },
      status: 404,
      documented: true,
    },
    { operationId: 'restoreBackup', why: 'no backup id', as: 'subscriber', path: (s) => `/instance/restore/${mine(s)}`, body: {}, status: 400 },
    { operationId: 'waitForInstance', why: 'restored and running', as: 'subscriber', path: running, status: 200, documented: true },
    {
      operationId: 'cloneInstance',
      why: 'a new instance from the backup',
      as: 'subscriber',
      path: (s) => `/instance/clone/${mine(s)}`,
      body: (s) => ({ backup_id: s.backup, name: 'contract clone' }),
      status: 200,
      documented: true,
      keep: (b, s) => {
        recordSecret(b.access_token);
        s.clone = b.instance_id;
      },
    },
    {
      operationId: 'cloneInstance',
      why: 'no such backup',
      as: 'subscriber',
      path: (s) => `/instance/clone/${mine(s)}`,
      body: { backup_id: UNKNOWN_BACKUP },
      status: 404,
      documented: true,
    },
    {
      operationId: 'waitForInstance',
      why: 'the clone running',
      as: 'subscriber',
      path: (s) => `/instance/wait/${s.clone}?state=running&timeout=60`,
      status: 200,
      documented: true,
    },
    // Lifecycle verbs, each answered once the instance is in a state that allows it.
    { operationId: 'stopInstance', why: 'running', as: 'subscriber', path: (s) => `/instance/stop/${mine(s)}`, status: 200, documented: true },
    { operationId: 'startInstance', why: 'stopped', as: 'subscriber', path: (s) => `/instance/start/${mine(s)}`, status: 200, documented: true },
    { operationId: 'waitForInstance', why: 'started', as: 'subscriber', path: running, status: 200, documented: true },
    { operationId: 'restartInstance', why: 'running', as: 'subscriber', path: (s) => `/instance/restart/${mine(s)}`, status: 200, documented: true },
    { operationId: 'restartInstance', why: 'not mine', as: 'subscriber', path: `/instance/restart/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    // Upgrade: the stand-in's build is tagged both latest (the default version) and 1 (deploy/images/versions.env).
    { operationId: 'waitForInstance', why: 'restarted', as: 'subscriber', path: running, status: 200, documented: true },
    {
      operationId: 'upgradeInstance',
      why: 'to another version',
      as: 'subscriber',
      path: (s) => `/instance/upgrade/${mine(s)}`,
      body: { version: '1' },
      status: 200,
      documented: true,
    },
    {
      operationId: 'upgradeInstance',
      why: 'while upgrading',
      as: 'subscriber',
      path: (s) => `/instance/upgrade/${mine(s)}`,
      body: { version: '1' },
      status: 409,
      documented: true,
    },
    { operationId: 'upgradeInstance', why: 'no version', as: 'subscriber', path: (s) => `/instance/upgrade/${mine(s)}`, body: {}, status: 400 },
    {
      operationId: 'upgradeInstance',
      why: 'not mine',
      as: 'subscriber',
      path: `/instance/upgrade/${UNKNOWN_INSTANCE}`,
      body: { version: '1' },
      status: 404,
      documented: true,
    },
    { operationId: 'waitForInstance', why: 'upgraded', as: 'subscriber', path: running, status: 200, documented: true },
    { operationId: 'deleteBackup', why: 'the backup', as: 'subscriber', path: (s) => `/instance/backup/${mine(s)}/${s.backup}`, status: 200, documented: true },
    {
      operationId: 'deleteBackup',
      why: 'already deleted',
      as: 'subscriber',
      path: (s) => `/instance/backup/${mine(s)}/${s.backup}`,
      status: 404,
      documented: true,
    },
    { operationId: 'deleteInstance', why: 'the clone', as: 'subscriber', path: (s) => `/instance/delete/${s.clone}`, status: 200, documented: true },
    { operationId: 'deleteInstance', why: 'the instance', as: 'subscriber', path: (s) => `/instance/delete/${mine(s)}`, status: 200, documented: true },
    { operationId: 'deleteInstance', why: 'not mine', as: 'subscriber', path: `/instance/delete/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
  ];
}
