/**
 * Writes docs/configuration.md from the settings schema (src/platform/config.ts), so a setting cannot be missing
 * from it: `npm run docs:config`. With --check it writes nothing and exits 1 when the page differs.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { z } from 'zod';
import { envSchema } from '../src/platform/config.js';

export const CONFIGURATION_PAGE = path.resolve(import.meta.dirname, '../docs/configuration.md');

/** The page as the schema describes it; throws naming a setting that has no description. */
export function renderConfigurationPage(): string {
  const rows = Object.entries(envSchema.shape).map(([name, schema]) => {
    const meta = (schema as z.ZodType).meta() as { description?: string; defaultText?: string } | undefined;
    if (!meta?.description) throw new Error(`${name}: has no description in src/platform/config.ts (.describe())`);
    return `| \`${name}\` | ${defaultOf(schema as z.ZodType, meta.defaultText)} | ${meta.description.replaceAll('|', '\\|')} |`;
  });
  return [
    '# Configuration',
    '',
    'Every setting of pushd: the environment variables it reads, their defaults and what they do (this page is',
    'generated from `src/platform/config.ts` by `npm run docs:config`; edit the descriptions there).',
    '',
    'All settings are read once at start-up. A bad value stops start-up with a message naming the variable (exit code',
    '2); an empty value counts as unset. URL passwords are masked in the logs.',
    '',
    '| Variable | Default | Meaning |',
    '|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

function defaultOf(schema: z.ZodType, defaultText: string | undefined): string {
  if (defaultText !== undefined) return defaultText;
  const def = schema.def as { type: string; defaultValue?: unknown };
  if (def.type !== 'default') return '—';
  const value = def.defaultValue;
  if (Array.isArray(value) && value.length === 0) return '—';
  return `\`${String(value)}\``;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const page = renderConfigurationPage();
  if (process.argv.includes('--check')) {
    const same = readFileSync(CONFIGURATION_PAGE, 'utf8') === page;
    if (!same) console.error('docs/configuration.md differs from src/platform/config.ts: run npm run docs:config');
    process.exit(same ? 0 : 1);
  }
  writeFileSync(CONFIGURATION_PAGE, page);
}
