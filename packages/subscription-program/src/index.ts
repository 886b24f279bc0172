export { TIERS, tierName, tierId, isTierId, isTierName } from './tiers.ts';
export type { TierName, TierId } from './tiers.ts';
export { accountDiscriminator, instructionDiscriminator } from './discriminator.ts';
export { SUBSCRIPTION_SEED, PERIOD_SECONDS, ProgramErrorCode, programErrorName, programErrorMessage } from './constants.ts';
export type { ProgramErrorName } from './constants.ts';
export { SUBSCRIPTION_ACCOUNT_SIZE, findSubscriptionAddress, encodeSubscription, decodeSubscription } from './layout.ts';
export type { Subscription } from './layout.ts';
export {
  INSTRUCTION_NAMES,
  subscribeInstruction,
  depositInstruction,
  cancelInstruction,
  renewInstruction,
  decodeInstruction,
} from './instructions.ts';
export type { InstructionName, DecodedInstruction, OwnerInstructionParams } from './instructions.ts';
export { waitConfirmed } from './confirm.ts';
