export * from './contract.ts';
export * from './common.ts';
export * as auth from './auth.ts';
export * as billing from './billing.ts';
export * as provisioner from './provisioner.ts';
export * as keyvault from './keyvault.ts';
export * as keys from './keys.ts';
export * as ping from './ping.ts';
export * as api from './api.ts';
