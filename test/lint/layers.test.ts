import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/** The layering rule of eslint.config.js, run on sources placed in the layers (ARCHITECTURE.md). */
describe('lint: imports follow the layers', () => {
  const eslint = new ESLint({ cwd: path.resolve(import.meta.dirname, '../..') });
  const problems = async (file: string, code: string) =>
    (await eslint.lintText(code, { filePath: path.resolve(file) }))[0]!.messages.filter((m) => m.ruleId === 'layers/imports');

  it('refuses an arrow up: domain -> db, delivery -> services, gateways -> platform config is fine', async () => {
    expect(await problems('src/domain/x.ts', "import { a } from '../db/schema.js';\nexport const b = a;\n")).toHaveLength(1);
    expect(await problems('src/delivery/x.ts', "import { a } from '../services/notifications.js';\nexport const b = a;\n")).toHaveLength(1);
    expect(await problems('src/gateways/x.ts', "import { a } from '../platform/logger.js';\nexport const b = a;\n")).toHaveLength(0);
  });

  it('lets http see db row types, never db values', async () => {
    expect(await problems('src/http/x.ts', "import type { Device } from '../db/schema.js';\nexport type D = Device;\n")).toHaveLength(0);
    expect(
      await problems('src/http/x.ts', "import { listDevices } from '../db/repositories/devices.js';\nexport const l = listDevices;\n"),
    ).toHaveLength(1);
  });

  it('names the two layers in its message', async () => {
    const [p] = await problems('src/db/x.ts', "import { a } from '../http/server.js';\nexport const b = a;\n");
    expect(p?.message).toBe('src/db may not import src/http (../http/server.js): see ARCHITECTURE.md');
  });
});
