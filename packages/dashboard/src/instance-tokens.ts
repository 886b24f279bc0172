/**
 * The access tokens of the user's instances, kept in this browser so that "Open" signs in to the agent's Control UI.
 * The API returns a token once (at create, and when a start or restart issues a new one), so the page keeps what it
 * was shown, per instance, in localStorage beside the session (the same exposure as the session token); the user can
 * paste one the browser lost. Signing out forgets them all, deleting an instance forgets its own.
 */
const STORE = 'agenthost.instance-tokens';

function all(): Record<string, string> {
  try {
    const v = JSON.parse(localStorage.getItem(STORE) ?? '{}');
    return v && typeof v === 'object' ? v : {};
  } catch {
    return {};
  }
}

export const instanceToken = (id: string): string | undefined => all()[id];

export function keepInstanceToken(id: string, token: string): void {
  localStorage.setItem(STORE, JSON.stringify({ ...all(), [id]: token }));
}

export function forgetInstanceToken(id: string): void {
  const { [id]: _gone, ...rest } = all();
  localStorage.setItem(STORE, JSON.stringify(rest));
}

export const forgetInstanceTokens = (): void => localStorage.removeItem(STORE);

/**
 * The instance's address with its token in the fragment (`#token=`, OpenClaw's hand-off, which the edge's wake page
 * passes on too): a fragment is never sent to a server, so it reaches no log, and the links that carry it send no
 * Referer (rel="noreferrer").
 */
export function openUrl(url: string, token: string | undefined): string {
  if (!token) return url;
  const u = new URL(url);
  u.hash = `token=${encodeURIComponent(token)}`;
  return u.href;
}
