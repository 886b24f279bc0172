import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { ApiResponse } from './http.ts';

/** JSON Pointer escaping of one reference token. */
const token = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');

export interface Operation {
  method: string;
  path: string;
  operationId: string;
  op: any;
}

/**
 * Validates requests and answers against the OpenAPI document as served: its schemas are compiled by ajv (JSON Schema
 * 2020-12, what OpenAPI 3.1 uses) with the formats checked (date-time, uuid), addressed by JSON Pointer into the
 * document so every $ref resolves as a client's generator would resolve it.
 */
export function documentValidator(doc: any) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema(doc, 'openapi.json');
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>();
  const check = (pointer: string, value: unknown): string[] => {
    let validate = compiled.get(pointer);
    if (!validate) compiled.set(pointer, (validate = ajv.compile({ $ref: `openapi.json#${pointer}` })));
    return validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
  };
  const operations: Operation[] = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ method, path, operationId: op.operationId as string, op })),
  );
  // Query values arrive as strings: this instance coerces them to the documented types, as a server would.
  const queryAjv = new Ajv2020({ strict: false, allErrors: true, coerceTypes: true });
  addFormats.default(queryAjv);
  const base = (o: Operation) => `/paths/${token(o.path)}/${o.method}`;
  return {
    operations,
    /**
     * Problems of a request body against the operation's documented body ([] = documented). A field the document
     * does not name is a problem too: a generated client could not send it (how `tier` went missing from register).
     */
    body(o: Operation, value: unknown): string[] {
      const pointer = `${base(o)}/requestBody/content/application~1json/schema`;
      const schema = ajv.getSchema(`openapi.json#${pointer}`)?.schema as { $ref?: string } | undefined;
      const named = schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()!] : schema;
      const known = Object.keys((named as { properties?: object } | undefined)?.properties ?? {});
      const unknown = Object.keys(value && typeof value === 'object' ? value : {}).filter((k) => !known.includes(k));
      return [...check(pointer, value), ...unknown.map((k) => `field ${k} is not in the document`)];
    },
    /** Problems of a request's query string: each parameter documented and valid, every required one present. */
    query(o: Operation, path: string): string[] {
      const given = new URLSearchParams(path.split('?')[1] ?? '');
      const params = ((o.op.parameters ?? []) as Array<{ name: string; in: string; required: boolean; schema: object }>).filter((p) => p.in === 'query');
      const problems = [...given.keys()].filter((k) => !params.some((p) => p.name === k)).map((k) => `query ${k} is not in the document`);
      for (const p of params) {
        const value = given.get(p.name);
        if (value === null) {
          if (p.required) problems.push(`query ${p.name} is required by the document`);
          continue;
        }
        const data = { value };
        if (!queryAjv.validate({ type: 'object', properties: { value: p.schema } }, data)) problems.push(`query ${p.name}: ${queryAjv.errorsText()}`);
      }
      return problems;
    },
    /** The required fields of the operation's success answer (an object's), as the document names them. */
    required(o: Operation): string[] | undefined {
      const schema = o.op.responses['200']?.content?.['application/json']?.schema as { $ref?: string; required?: string[] } | undefined;
      return (schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()!] : schema)?.required;
    },
    /** Whether the operation's success answer is a server-sent event stream (only: GET /instance/logs answers JSON unless follow=true). */
    streams(o: Operation): boolean {
      const content = o.op.responses['200']?.content;
      return Boolean(content?.['text/event-stream']) && !content?.['application/json'];
    },
    /** Problems of a stream's opening: the documented status and type, and its first event's data valid for the schema. */
    event(o: Operation, res: ApiResponse): string[] {
      if (!o.op.responses[String(res.status)]) return [`status ${res.status} is not documented: ${res.text.slice(0, 300)}`];
      if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream'))
        return [`content-type ${res.headers.get('content-type')} is not text/event-stream`];
      if (res.body === undefined) return ['the stream ended before its first event'];
      return check(`${base(o)}/responses/${res.status}/content/text~1event-stream/schema`, res.body);
    },
    /** Problems of an answer: its status must be documented for the operation, and its body valid for that status. */
    answer(o: Operation, res: ApiResponse): string[] {
      const documented = o.op.responses[String(res.status)];
      if (!documented) return [`status ${res.status} is not documented (${Object.keys(o.op.responses).join(', ')}): ${res.text.slice(0, 300)}`];
      // Headers the document marks optional (Retry-After, Idempotency-Replayed on a replay only) may be absent.
      const headers = (documented.headers ?? {}) as Record<string, { required?: boolean }>;
      const missing = Object.keys(headers).filter((h) => h !== 'Retry-After' && headers[h]!.required !== false && !res.headers.has(h));
      const type = Object.keys(documented.content ?? {})[0];
      if (!type) return missing.map((h) => `header ${h} missing`);
      if (!(res.headers.get('content-type') ?? '').startsWith(type)) return [`content-type ${res.headers.get('content-type')} is not ${type}`];
      if (type !== 'application/json') return missing.map((h) => `header ${h} missing`);
      return [...missing.map((h) => `header ${h} missing`), ...check(`${base(o)}/responses/${res.status}/content/${token(type)}/schema`, res.body)];
    },
  };
}
