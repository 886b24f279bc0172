export {
  createAgenthost,
  type Agenthost,
  type AgenthostOptions,
  type InstanceEvent,
  type InstanceState,
  type LogLine,
  type StreamOptions,
  type WaitResult,
} from './client.ts';
export { AgenthostError, unwrap } from './errors.ts';
export { parseSse, type SseMessage } from './sse.ts';
export type { components, operations, paths } from './schema.ts';
