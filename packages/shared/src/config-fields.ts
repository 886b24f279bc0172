import { z } from 'zod';

// Reads a config schema back as the rows an operator needs (deploy/config-doc.ts prints docs/configuration.md
// from them), so the page cannot drift from what the services accept.

export interface ConfigField {
  name: string;
  /** What the variable accepts: a type, a range, or the allowed values. */
  accepts: string;
  /** The default as an operator would write it, or "required" / "unset". */
  default: string;
  description: string;
}

/**
 * What a field's metadata may add to its description: `shownDefault` when its own default would mislead on the page
 * (one computed at start, a path from the module's location, or "required" by a check across fields), and `accepts`
 * when the type under a transform says too little (a comma-separated list is a string to zod).
 */
export interface ConfigFieldMeta {
  description: string;
  shownDefault: string;
  accepts: string;
}

// The config schemas are built with zod's classic API, so every inner schema is a classic z.ZodType too (zod types
// a pipe's input and a wrapper's inner schema as the core type).

/** The variables a config schema reads: the object under its refinements and any final transform (auth's). */
export function configShape(schema: z.ZodType): Record<string, z.ZodType> {
  if (schema instanceof z.ZodObject) return schema.shape;
  if (schema instanceof z.ZodPipe) return configShape(schema.in as z.ZodType);
  throw new Error(`not a config object schema: ${schema.def.type}`);
}

export function configField(name: string, field: z.ZodType): ConfigField {
  let description: string | undefined;
  let shown: string | undefined;
  let accepted: string | undefined;
  let optional = false;
  let s = field;
  // Wrappers from the outside in: the first description and default found are the field's own.
  for (;;) {
    const meta = s.meta() as Partial<ConfigFieldMeta> | undefined;
    description ??= meta?.description;
    shown ??= meta?.shownDefault;
    accepted ??= meta?.accepts;
    if (s instanceof z.ZodDefault) {
      shown ??= showValue(s.def.defaultValue);
      s = s.unwrap() as z.ZodType;
    } else if (s instanceof z.ZodOptional) {
      optional = true;
      s = s.unwrap() as z.ZodType;
    } else if (s instanceof z.ZodPipe) {
      // A transform's input is what the environment holds.
      s = s.in as z.ZodType;
    } else break;
  }
  return { name, accepts: accepted ?? accepts(s), default: shown ?? (optional ? 'unset' : 'required'), description: description ?? '' };
}

function showValue(value: unknown): string {
  if (value === '') return 'empty';
  return `\`${typeof value === 'object' ? JSON.stringify(value) : String(value)}\``;
}

function accepts(s: z.ZodType): string {
  if (s instanceof z.ZodEnum) return s.options.map((o) => `\`${String(o)}\``).join(', ');
  if (s instanceof z.ZodLiteral) return [...s.values].map((v) => (v === '' ? 'empty' : `\`${String(v)}\``)).join(', ');
  if (s instanceof z.ZodNumber) return `${s.isInt ? 'integer' : 'number'}${range(s)}`;
  // z.url() is a string format of its own, not a ZodString.
  if (s.def.type === 'string') return (s as { format?: unknown }).format === 'url' ? 'URL' : 'string';
  if (s instanceof z.ZodUnion) {
    // '' in a union is "empty means none", which the default and description say; the other option is the type.
    const options = (s.options as z.ZodType[]).filter((o) => !(o instanceof z.ZodLiteral && o.values.size === 1 && o.values.has('')));
    return [...new Set(options.map(accepts))].join(' or ');
  }
  return s.def.type;
}

/** The bounds of a number check, e.g. " 0–65535" or " > 0"; the integer format's own safe-integer bounds are left out. */
function range(s: z.ZodNumber): string {
  let low: { value: number; inclusive: boolean } | undefined;
  let high: { value: number; inclusive: boolean } | undefined;
  for (const check of s.def.checks ?? []) {
    const def = check._zod.def as { check: string; value?: number; inclusive?: boolean };
    if (def.check === 'greater_than') low = { value: Number(def.value), inclusive: Boolean(def.inclusive) };
    if (def.check === 'less_than') high = { value: Number(def.value), inclusive: Boolean(def.inclusive) };
  }
  if (low?.inclusive && high?.inclusive) return ` ${low.value}–${high.value}`;
  const parts = [low && `${low.inclusive ? '≥' : '>'} ${low.value}`, high && `${high.inclusive ? '≤' : '<'} ${high.value}`];
  const text = parts.filter(Boolean).join(', ');
  return text ? ` ${text}` : '';
}
