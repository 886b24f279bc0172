// Prints the settings tables of docs/configuration.md from the services' config schemas, where the settings live:
// each variable's accepted values, default and description (the schema's `.describe()`). `node deploy/config-doc.ts
// --write` rewrites the part between the markers in docs/configuration.md; a test checks that the page matches, so the
// tables cannot drift from the code. Settings that no schema reads (deploy/env.sh's) are in the page's hand-written head.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { baseConfig, FILE_SECRETS } from '../packages/shared/src/config.ts';
import { type ConfigField, configField, configShape } from '../packages/shared/src/config-fields.ts';
import { authConfig } from '../services/auth/src/config.ts';
import { billingConfig } from '../services/billing-chain/src/config.ts';
import { edgeConfig } from '../services/edge/src/config.ts';
import { gatewayConfig } from '../services/gateway/src/config.ts';
import { keyvaultConfig } from '../services/keyvault/src/config.ts';
import { provisionerConfig } from '../services/provisioner/src/config.ts';

export const START = '<!-- config-doc:start -->';
export const END = '<!-- config-doc:end -->';

export const SERVICES = {
  gateway: gatewayConfig,
  auth: authConfig,
  'billing-chain': billingConfig,
  provisioner: provisionerConfig,
  keyvault: keyvaultConfig,
  edge: edgeConfig,
};

/** Every service's settings beyond the shared ones: what it adds, and any shared name it redefines. */
export function serviceFields(service: keyof typeof SERVICES): ConfigField[] {
  const shared: Record<string, unknown> = baseConfig.shape;
  return Object.entries(configShape(SERVICES[service]))
    .filter(([name, field]) => shared[name] !== field)
    .map(([name, field]) => configField(name, field));
}

export function sharedFields(): ConfigField[] {
  return Object.entries(baseConfig.shape).map(([name, field]) => configField(name, field));
}

const cell = (text: string) => text.replaceAll('|', '\\|');
const fromFile = new Set<string>(FILE_SECRETS);

function table(fields: ConfigField[]): string {
  const rows = fields.map((f) => {
    const name = fromFile.has(f.name) ? `\`${f.name}\` (or \`${f.name}_FILE\`)` : `\`${f.name}\``;
    return `| ${name} | ${cell(f.accepts)} | ${cell(f.default)} | ${cell(f.description)} |`;
  });
  return ['| Variable | Accepts | Default | Meaning |', '|---|---|---|---|', ...rows].join('\n');
}

export function configDoc(): string {
  const sections = [`### Every service\n\n${table(sharedFields())}`];
  for (const service of Object.keys(SERVICES) as (keyof typeof SERVICES)[]) sections.push(`### ${service}\n\n${table(serviceFields(service))}`);
  return sections.join('\n\n');
}

export const configPagePath = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs/configuration.md');

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const doc = configDoc();
  if (process.argv.includes('--write')) {
    const page = readFileSync(configPagePath, 'utf8');
    const start = page.indexOf(START);
    const end = page.indexOf(END);
    if (start < 0 || end < 0) throw new Error('docs/configuration.md has no config-doc markers');
    writeFileSync(configPagePath, `${page.slice(0, start + START.length)}\n${doc}\n${page.slice(end)}`);
  } else {
    process.stdout.write(`${doc}\n`);
  }
}
