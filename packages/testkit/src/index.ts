export * from './paths.ts';
export * from './nats.ts';
export * from './db.ts';
export * from './service.ts';
export * from './http.ts';
export * from './wallet.ts';
export * from './secrets.ts';
export * from './stack.ts';
