/**
 * The owner of the warm pool's agents until a create claims one (domain/pool.ts): a reserved user id no sign-in can
 * have (auth issues random v4 UUIDs). Its rows are instances like any other to the reconciler, the self-healing and
 * the doctor, and belong to no user: no route, no event, no credentials.
 */
export const POOL_USER = '00000000-0000-0000-0000-000000000000';

export const pooled = (row: { user_id: string }): boolean => row.user_id === POOL_USER;

/**
 * What a warm pool agent is issued: nothing. Its container starts without credentials (the handoff gives none) and its
 * bootstrap, told so by its environment (AGENTHOST_CREDENTIALS=stdin-late), starts the agent first and waits for them.
 */
export const NO_CREDENTIALS = { instance_secret: '', instance_key: '', key_id: '' };
