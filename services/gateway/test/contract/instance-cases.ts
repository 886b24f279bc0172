import { recordSecret } from '@agenthost/testkit';
import { UNKNOWN_INSTANCE, type Actors, type Case } from './cases.ts';

const UNKNOWN_BACKUP = 'bk-0123456789abcdef0123';
/** Long enough (the most the API allows) for a loaded engine to create and start the stand-in agent; the wait answers as soon as it runs. */
const running = (s: { instance: string }) => `/instance/wait/${s.instance}?state=running&timeout=60`;

/**
 * An instance's whole life against the live provisioner (stand-in agent image, real Docker engine): create, wait,
 * read, keys, backup, restore, clone, stop, start, restart, delete. Each success answer and each error answer a
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
      then: (b, s) => {
        recordSecret(b.access_token);
        s.instance = b.instance_id;
      },
    },
    { operationId: 'createInstance', why: 'no framework', as: 'subscriber', path: '/instance/create', body: { name: 'x' }, status: 400 },
    { operationId: 'createInstance', why: 'no subscription', as: 'user', path: '/instance/create', body: { framework: 'openclaw' }, status: 402, documented: true },
    { operationId: 'waitForInstance', why: 'until running', as: 'subscriber', path: running, status: 200, documented: true },
    { operationId: 'waitForInstance', why: 'an unknown state', as: 'subscriber', path: (s) => `/instance/wait/${s.instance}?state=asleep`, status: 400 },
    { operationId: 'waitForInstance', why: 'not mine', as: 'subscriber', path: `/instance/wait/${UNKNOWN_INSTANCE}?state=running&timeout=1`, status: 404, documented: true },
    { operationId: 'getInstance', why: 'running', as: 'subscriber', path: (s) => `/instance/status/${mine(s)}`, status: 200, documented: true },
    { operationId: 'getInstance', why: 'not mine', as: 'subscriber', path: `/instance/status/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    { operationId: 'listInstances', why: 'one instance', as: 'subscriber', path: '/instance/list', status: 200, documented: true },
    { operationId: 'getInstanceLogs', why: 'the last lines', as: 'subscriber', path: (s) => `/instance/logs/${mine(s)}?tail=50`, status: 200, documented: true },
    { operationId: 'getInstanceLogs', why: 'a tail out of range', as: 'subscriber', path: (s) => `/instance/logs/${mine(s)}?tail=-1`, status: 400 },
    { operationId: 'streamInstanceEvents', why: 'the current status first', as: 'subscriber', path: (s) => `/instance/events/${mine(s)}`, status: 200, documented: true },
    { operationId: 'streamInstanceEvents', why: 'not mine', as: 'subscriber', path: `/instance/events/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    // Keys of the instance: the owner's calls, then the instance's own (credentials as its bootstrap holds them).
    { operationId: 'storeKeys', why: 'keys for my instance', as: 'subscriber', path: '/keys/store', body: (s) => ({ instance_id: mine(s), keys: { OPENAI_API_KEY: 'sk-contract-1' } }), status: 200, documented: true },
    { operationId: 'storeKeys', why: 'not my instance', as: 'subscriber', path: '/keys/store', body: { instance_id: UNKNOWN_INSTANCE, keys: { OPENAI_API_KEY: 'sk-test' } }, status: 404, documented: true },
    { operationId: 'storeKeys', why: 'a reserved name', as: 'subscriber', path: '/keys/store', body: (s) => ({ instance_id: mine(s), keys: { AGENTHOST_X: 'v' } }), status: 400 },
    { operationId: 'updateKey', why: 'a stored key', as: 'subscriber', path: '/keys/update', body: (s) => ({ instance_id: mine(s), key_name: 'OPENAI_API_KEY', key_value: 'sk-contract-2' }), status: 200, documented: true },
    { operationId: 'updateKey', why: 'a key never stored', as: 'subscriber', path: '/keys/update', body: (s) => ({ instance_id: mine(s), key_name: 'NEVER_STORED', key_value: 'v' }), status: 404, documented: true },
    {
      operationId: 'listKeys',
      why: 'the names',
      as: 'subscriber',
      path: (s) => `/keys/list?instance_id=${mine(s)}`,
      status: 200,
      documented: true,
      // Credentials for the instance's own calls below (the agent's are replaced, as a foreign start would).
      then: async (_b, s) => void (s.secret = await a.issue(a.subscriber.user_id, s.instance)),
    },
    { operationId: 'listKeys', why: 'not my instance', as: 'subscriber', path: `/keys/list?instance_id=${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    { operationId: 'listKeyAudit', why: 'the changes', as: 'subscriber', path: (s) => `/keys/audit?instance_id=${mine(s)}&limit=10`, status: 200, documented: true },
    { operationId: 'listKeyAudit', why: 'not my instance', as: 'subscriber', path: `/keys/audit?instance_id=${UNKNOWN_INSTANCE}&limit=10`, status: 404, documented: true },
    {
      operationId: 'retrieveKeys',
      why: "the instance's credentials",
      as: 'anyone',
      path: '/keys/retrieve',
      headers: (s) => ({ 'X-Instance-ID': s.instance, 'X-Instance-Secret': s.secret }),
      status: 200,
      documented: true,
    },
    { operationId: 'retrieveKeys', why: 'unknown instance', as: 'anyone', path: '/keys/retrieve', headers: { 'X-Instance-ID': UNKNOWN_INSTANCE, 'X-Instance-Secret': 'nope' }, status: 401, documented: true },
    { operationId: 'watchKeys', why: 'the keys first', as: 'anyone', path: '/keys/watch', headers: (s) => ({ 'X-Instance-ID': s.instance, 'X-Instance-Secret': s.secret }), status: 200, documented: true },
    { operationId: 'watchKeys', why: 'unknown instance', as: 'anyone', path: '/keys/watch', headers: { 'X-Instance-ID': UNKNOWN_INSTANCE, 'X-Instance-Secret': 'nope' }, status: 401, documented: true },
    { operationId: 'deleteKeys', why: 'a stored key', as: 'subscriber', path: '/keys/delete', body: (s) => ({ instance_id: mine(s), key_names: ['OPENAI_API_KEY'] }), status: 200, documented: true },
    { operationId: 'deleteKeys', why: 'not my instance', as: 'subscriber', path: '/keys/delete', body: { instance_id: UNKNOWN_INSTANCE, key_names: ['OPENAI_API_KEY'] }, status: 404, documented: true },
    // Backups: taken, listed, restored in place, cloned into a new instance.
    { operationId: 'createBackup', why: 'of a running instance', as: 'subscriber', path: (s) => `/instance/backup/${mine(s)}`, status: 200, documented: true, then: (b, s) => void (s.backup = b.backup_id) },
    { operationId: 'createBackup', why: 'not mine', as: 'subscriber', path: `/instance/backup/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    { operationId: 'listBackups', why: 'one backup', as: 'subscriber', path: (s) => `/instance/backups/${mine(s)}`, status: 200, documented: true },
    { operationId: 'restoreBackup', why: 'the backup', as: 'subscriber', path: (s) => `/instance/restore/${mine(s)}`, body: (s) => ({ backup_id: s.backup }), status: 200, documented: true, then: (b) => recordSecret(b.access_token) },
    { operationId: 'restoreBackup', why: 'no such backup', as: 'subscriber', path: (s) => `/instance/restore/${mine(s)}`, body: { backup_id: UNKNOWN_BACKUP }, status: 404, documented: true },
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
      then: (b, s) => {
        recordSecret(b.access_token);
        s.clone = b.instance_id;
      },
    },
    { operationId: 'cloneInstance', why: 'no such backup', as: 'subscriber', path: (s) => `/instance/clone/${mine(s)}`, body: { backup_id: UNKNOWN_BACKUP }, status: 404, documented: true },
    { operationId: 'waitForInstance', why: 'the clone running', as: 'subscriber', path: (s) => `/instance/wait/${s.clone}?state=running&timeout=60`, status: 200, documented: true },
    // Lifecycle verbs, each answered once the instance is in a state that allows it.
    { operationId: 'stopInstance', why: 'running', as: 'subscriber', path: (s) => `/instance/stop/${mine(s)}`, status: 200, documented: true },
    { operationId: 'startInstance', why: 'stopped', as: 'subscriber', path: (s) => `/instance/start/${mine(s)}`, status: 200, documented: true },
    { operationId: 'waitForInstance', why: 'started', as: 'subscriber', path: running, status: 200, documented: true },
    { operationId: 'restartInstance', why: 'running', as: 'subscriber', path: (s) => `/instance/restart/${mine(s)}`, status: 200, documented: true },
    { operationId: 'restartInstance', why: 'not mine', as: 'subscriber', path: `/instance/restart/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    { operationId: 'deleteBackup', why: 'the backup', as: 'subscriber', path: (s) => `/instance/backup/${mine(s)}/${s.backup}`, status: 200, documented: true },
    { operationId: 'deleteBackup', why: 'already deleted', as: 'subscriber', path: (s) => `/instance/backup/${mine(s)}/${s.backup}`, status: 404, documented: true },
    { operationId: 'deleteInstance', why: 'the clone', as: 'subscriber', path: (s) => `/instance/delete/${s.clone}`, status: 200, documented: true },
    { operationId: 'deleteInstance', why: 'the instance', as: 'subscriber', path: (s) => `/instance/delete/${mine(s)}`, status: 200, documented: true },
    { operationId: 'deleteInstance', why: 'not mine', as: 'subscriber', path: `/instance/delete/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
  ];
}
