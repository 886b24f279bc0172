import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Session } from '@agenthost/testkit';

/**
 * A fresh AGENTHOST_HOME holding the session `agenthost login` would have saved for `who` (the sign-in itself is
 * cli.test.ts's), so a test drives the CLI as that signed-in user.
 */
export function signedInHome(who: Session, name: string): string {
  const home = mkdtempSync(path.join(os.tmpdir(), `agenthost-${name}-`));
  writeFileSync(
    path.join(home, 'session.json'),
    JSON.stringify({ token: who.token, user_id: who.user_id, wallet_address: who.wallet.address, expires_at: '' }),
    { mode: 0o600 },
  );
  return home;
}
