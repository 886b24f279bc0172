import { z } from 'zod';
import { userContract, userRead } from './contract.ts';
import { instanceId, uuid } from './common.ts';

// Device pairing of an OpenClaw instance: OpenClaw asks its operator to approve each browser (or app) it has not
// seen before, even one that presented the instance's token. On a hosted instance the operator is its owner, who
// has no shell on the host: these calls run the instance's own `openclaw devices` inside its container for them.

const owned = z.object({ user_id: uuid, instance_id: instanceId });

/** OpenClaw's request ids and device ids: opaque, but only these characters reach its command line. */
const opaqueId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9._:-]+$/, 'must be an id from the device list');

/** What is shown of a device or a request: who asks for what, never a token. */
export const device = z.object({
  request_id: z.string().optional(),
  device_id: z.string().optional(),
  name: z.string().optional(),
  platform: z.string().optional(),
  client: z.string().optional(),
  role: z.string().optional(),
  scopes: z.array(z.string()).optional(),
  remote_ip: z.string().optional(),
  /** When it asked (pending) or was approved (paired). */
  at: z.string().optional(),
});
export type Device = z.infer<typeof device>;

export const list = userRead(
  'provisioner.v1.instances.devices',
  owned,
  z.object({ instance_id: instanceId, pending: z.array(device), paired: z.array(device) }),
);

export const decide = userContract(
  'provisioner.v1.instances.device_decide',
  owned.extend({ request_id: opaqueId, decision: z.enum(['approve', 'reject']) }),
  z.object({ success: z.boolean(), instance_id: instanceId, request_id: z.string(), decision: z.enum(['approve', 'reject']) }),
);
