import { createAgenthost, type Agenthost } from '@agenthost/sdk';
import { readJson } from './state.ts';

export interface Env {
  apiUrl: string;
  rpcUrl: string;
  out: (line: string) => void;
}

export interface Session {
  token: string;
  user_id: string;
  wallet_address: string;
  expires_at: string;
}

/** The SDK client for the API at env.apiUrl; `signedIn` requires the saved session and sends its token. */
export function client(env: Env, signedIn = false): Agenthost {
  let token: string | undefined;
  if (signedIn) {
    const s = readJson<Session>('session.json');
    if (!s) throw new Error('not signed in: run `agenthost login`');
    token = s.token;
  }
  return createAgenthost({ baseUrl: env.apiUrl, ...(token ? { token } : {}) });
}
