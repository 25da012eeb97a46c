import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIGURATION_PAGE, renderConfigurationPage } from '../../scripts/gen-config-docs.js';
import { envSchema } from '../../src/platform/config.js';

describe('docs/configuration.md', () => {
  it('is what the generator prints from the settings schema (npm run docs:config writes it)', () => {
    expect(readFileSync(CONFIGURATION_PAGE, 'utf8')).toBe(renderConfigurationPage());
  });

  it('has a row for every setting, each with its description', () => {
    const page = readFileSync(CONFIGURATION_PAGE, 'utf8');
    const names = Object.keys(envSchema.shape);
    expect(names.length).toBeGreaterThan(40);
    for (const name of names) expect(page, name).toMatch(new RegExp(`^\\| \`${name}\` \\| [^|]+ \\| .{10,}`, 'm'));
  });
});
