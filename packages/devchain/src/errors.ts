/**
 * Error shapes as Solana's JSON-RPC returns them.
 * TransactionError / InstructionError are serialized exactly like agave's serde JSON:
 * unit variants are strings ("BlockhashNotFound"), others single-key objects.
 */

export type InstructionError = string | { Custom: number } | Record<string, unknown>;
export type TransactionError = string | { InstructionError: [number, InstructionError] } | Record<string, unknown>;

const TX_MESSAGES: Record<string, string> = {
  AccountNotFound: 'Attempt to debit an account but found no record of a prior credit.',
  InsufficientFundsForFee: 'Insufficient funds for fee',
  InvalidAccountForFee: 'This account may not be used to pay transaction fees',
  AlreadyProcessed: 'This transaction has already been processed',
  BlockhashNotFound: 'Blockhash not found',
  ProgramAccountNotFound: 'Attempt to load a program that does not exist',
  SanitizeFailure: 'Transaction failed to sanitize accounts offsets correctly',
  SignatureFailure: 'Transaction did not pass signature verification',
  UnsupportedVersion: 'Transaction version is unsupported',
  AddressLookupTableNotFound: "Transaction loads an address table account that doesn't exist",
  AccountLoadedTwice: 'Account loaded twice',
};

const IX_MESSAGES: Record<string, string> = {
  GenericError: 'generic instruction error',
  InvalidArgument: 'invalid program argument',
  InvalidInstructionData: 'invalid instruction data',
  InvalidAccountData: 'invalid account data for instruction',
  InsufficientFunds: 'insufficient funds for instruction',
  MissingRequiredSignature: 'missing required signature for instruction',
  NotEnoughAccountKeys: 'insufficient account keys for instruction',
  ReadonlyLamportChange: 'instruction changed the balance of a read-only account',
  ReadonlyDataModified: 'instruction modified data of a read-only account',
  UnbalancedInstruction: 'sum of account balances before and after instruction do not match',
  ExternalAccountLamportSpend: 'instruction spent from the balance of an account it does not own',
  ExternalAccountDataModified: 'instruction modified data of an account it does not own',
  InvalidAccountOwner: 'Invalid account owner',
};

export function instructionErrorMessage(e: InstructionError): string {
  if (typeof e === 'string') return IX_MESSAGES[e] ?? e;
  if ('Custom' in e && typeof e.Custom === 'number') return `custom program error: 0x${e.Custom.toString(16)}`;
  return JSON.stringify(e);
}

export function transactionErrorMessage(e: TransactionError): string {
  if (typeof e === 'string') return TX_MESSAGES[e] ?? e;
  if ('InstructionError' in e && Array.isArray(e.InstructionError)) {
    const [idx, ie] = e.InstructionError as [number, InstructionError];
    return `Error processing Instruction ${idx}: ${instructionErrorMessage(ie)}`;
  }
  if ('InsufficientFundsForRent' in e) {
    const idx = (e.InsufficientFundsForRent as { account_index: number }).account_index;
    return `Transaction results in an account (${idx}) with insufficient funds for rent`;
  }
  return JSON.stringify(e);
}

/**
 * The JSON-RPC error codes devchain answers, with agave's numbers. Codes for slots that are
 * skipped or pruned (-32001, -32007, -32009) never arise: every devchain slot is a kept block.
 */
export const RpcCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  SendTransactionPreflightFailure: -32002,
  TransactionSignatureVerificationFailure: -32003,
  BlockNotAvailable: -32004,
  NoSnapshot: -32008,
  TransactionVersionNotSupported: -32015,
  MinContextSlotNotReached: -32016,
} as const;

export class RpcError extends Error {
  readonly code: number;
  readonly data: unknown;
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

export function invalidParams(detail: string): RpcError {
  return new RpcError(RpcCode.InvalidParams, `Invalid params: ${detail}`);
}

/** The error sendTransaction returns when preflight (or loading) fails, as agave does. */
export function preflightFailure(err: TransactionError, logs: string[], unitsConsumed = 0): RpcError {
  return new RpcError(RpcCode.SendTransactionPreflightFailure, `Transaction simulation failed: ${transactionErrorMessage(err)}`, {
    accounts: null,
    err,
    innerInstructions: null,
    logs,
    replacementBlockhash: null,
    returnData: null,
    unitsConsumed,
  });
}
