import { type Case, UNKNOWN_INSTANCE } from './types.ts';

/**
 * Device pairing, in the middle of the instance's life in instance-cases.ts (running, on the stand-in agent, which has
 * no OpenClaw CLI): the answers a client meets without a real OpenClaw. The approval itself is shown with a real
 * browser and a real OpenClaw instance in services/edge/test/control-ui.e2e.test.ts.
 */
export function deviceCases(): Case[] {
  const mine = (s: { instance: string }) => s.instance;
  return [
    {
      operationId: 'listDevices',
      why: 'a framework without pairing',
      as: 'subscriber',
      path: (s) => `/instance/devices/${mine(s)}`,
      status: 501,
      documented: true,
    },
    { operationId: 'listDevices', why: 'not mine', as: 'subscriber', path: `/instance/devices/${UNKNOWN_INSTANCE}`, status: 404, documented: true },
    { operationId: 'listDevices', why: 'no subscription', as: 'user', path: `/instance/devices/${UNKNOWN_INSTANCE}`, status: 402, documented: true },
    {
      operationId: 'approveDevice',
      why: 'a framework without pairing',
      as: 'subscriber',
      path: (s) => `/instance/devices/approve/${mine(s)}`,
      body: { request_id: 'req-1' },
      status: 501,
      documented: true,
    },
    { operationId: 'approveDevice', why: 'no request id', as: 'subscriber', path: (s) => `/instance/devices/approve/${mine(s)}`, body: {}, status: 400 },
    {
      operationId: 'approveDevice',
      why: 'a request id that is no id',
      as: 'subscriber',
      path: (s) => `/instance/devices/approve/${mine(s)}`,
      body: { request_id: 'a b; rm -rf /' },
      status: 400,
    },
    {
      operationId: 'rejectDevice',
      why: 'not mine',
      as: 'subscriber',
      path: `/instance/devices/reject/${UNKNOWN_INSTANCE}`,
      body: { request_id: 'req-1' },
      status: 404,
      documented: true,
    },
  ];
}
