import { unwrap } from '@agenthost/sdk';
import { client, type Env } from './client.ts';

/**
 * An OpenClaw instance's pairing requests: OpenClaw asks its owner to approve each browser that opens its Control
 * UI for the first time. `devices <id>` lists them; approve or reject one by its request id.
 */
export async function devices(env: Env, id: string, decision?: 'approve' | 'reject', requestId?: string): Promise<void> {
  const { api } = client(env, true);
  const params = { params: { path: { instanceId: id } } };
  if (!decision) {
    const { pending, paired } = unwrap(await api.GET('/instance/devices/{instanceId}', params));
    env.out(pending.length ? 'pending (approve with: agenthost devices <id> approve <request_id>):' : 'no pending request');
    for (const d of pending) env.out(`  ${d.request_id ?? '?'}  ${[d.name, d.platform, d.client, d.remote_ip, d.at].filter(Boolean).join('  ')}`);
    env.out(`paired: ${paired.length}`);
    for (const d of paired) env.out(`  ${d.device_id ?? '?'}  ${[d.name, d.platform, d.client, d.at].filter(Boolean).join('  ')}`);
    return;
  }
  const body = { request_id: requestId ?? '' };
  const answer =
    decision === 'approve'
      ? unwrap(await api.POST('/instance/devices/approve/{instanceId}', { ...params, body }))
      : unwrap(await api.POST('/instance/devices/reject/{instanceId}', { ...params, body }));
  env.out(`${answer.request_id} ${answer.decision === 'approve' ? 'approved' : 'rejected'}`);
}
