/** Sealed key as stored and returned by the gateway (hex fields). */
export interface SealedKey {
  encrypted: string;
  iv: string;
  authTag: string;
  kid?: string;
}

export declare const AAD_VERSION: 'agenthost:v1';
export declare const KEY_BYTES: 32;
export declare const IV_BYTES: 12;
export declare const TAG_BYTES: 16;
export declare const KEY_NAME_RE: RegExp;

export declare class KeyOpenError extends Error {
  constructor(message: string);
}

/** UTF-8 bytes of `agenthost:v1:${instanceId}:${keyName}`. */
export declare function aadFor(instanceId: string, keyName: string): Buffer;
/** Base64 (or raw) 32-byte instance key; throws KeyOpenError otherwise. */
export declare function decodeInstanceKey(value: string | Uint8Array): Buffer;
export declare function parseSealed(sealed: string | SealedKey): {
  encrypted: Buffer;
  iv: Buffer;
  authTag: Buffer;
  kid: string | undefined;
};
/** Decrypts one sealed key (AES-256-GCM, AAD as above); throws KeyOpenError on any failure. */
export declare function openKey(args: { instanceKey: string | Uint8Array; instanceId: string; keyName: string; sealed: string | SealedKey }): string;
