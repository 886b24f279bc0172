/** PDA seed label: address = PDA(["subscription", owner], programId). */
export const SUBSCRIPTION_SEED = 'subscription';

/** One billing period: 30 days in seconds. */
export const PERIOD_SECONDS = 2_592_000;

/**
 * Custom program error codes (`{ InstructionError: [index, { Custom: code }] }`),
 * Anchor-style numbering from 6000.
 */
export const ProgramErrorCode = {
  InvalidTier: 6000,
  InvalidSubscriptionAddress: 6001,
  InvalidTreasury: 6002,
  MissingSignature: 6003,
  OwnerMismatch: 6004,
  SubscriptionNotFound: 6005,
  InsufficientFunds: 6006,
  NotExpired: 6007,
  InvalidInstructionData: 6008,
  AlreadyCancelled: 6009,
  SubscriptionInactive: 6010,
  InvalidAmount: 6011,
  InvalidAccounts: 6012,
} as const;

export type ProgramErrorName = keyof typeof ProgramErrorCode;

const MESSAGES: Record<ProgramErrorName, string> = {
  InvalidTier: 'Tier must be 0 (free), 1 (pro) or 2 (enterprise)',
  InvalidSubscriptionAddress: 'Subscription account is not the PDA of ["subscription", owner]',
  InvalidTreasury: 'Treasury account does not match the program treasury',
  MissingSignature: 'Owner or caller did not sign the transaction',
  OwnerMismatch: 'Subscription belongs to another owner',
  SubscriptionNotFound: 'Subscription account does not exist',
  InsufficientFunds: 'Insufficient lamports',
  NotExpired: 'Subscription has not expired yet',
  InvalidInstructionData: 'Instruction data could not be decoded',
  AlreadyCancelled: 'Subscription is already cancelled',
  SubscriptionInactive: 'Subscription is not active',
  InvalidAmount: 'Amount must be greater than zero',
  InvalidAccounts: 'Wrong number, order or flags of accounts',
};

export function programErrorName(code: number): ProgramErrorName | undefined {
  for (const [name, c] of Object.entries(ProgramErrorCode)) if (c === code) return name as ProgramErrorName;
  return undefined;
}

export function programErrorMessage(code: number): string | undefined {
  const name = programErrorName(code);
  return name === undefined ? undefined : MESSAGES[name];
}
