import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { OUTCOME_TABLE, type OutcomeRule } from '../../src/gateways/outcomes.js';

const source = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

/** The doc comment's table as OUTCOME_TABLE makes it: one line a rule, in the order they are tried. */
function renderedTable(rules: readonly OutcomeRule[]): string[] {
  const header = ['gateway', 'answer', 'outcome', 'renews auth', 'note'];
  const rows = [header, ...rules.map((r) => [r.gateway, r.when, r.kind, r.refreshAuth ? 'first' : '', r.note ?? ''])];
  const widths = header.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)];
}

/** The table in the doc comment of src/gateways/outcomes.ts: its ` * |` lines. */
const documentedTable = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith(' * |'))
    .map((l) => l.slice(3));

describe('the outcome table as documented', () => {
  it("src/gateways/outcomes.ts's doc comment is OUTCOME_TABLE, row for row", () => {
    const expected = renderedTable(OUTCOME_TABLE);
    // on a change of the table, paste the expected lines (printed on failure) into the comment, each after ' * '
    expect(documentedTable(source('src/gateways/outcomes.ts')), expected.map((l) => ` * ${l}`).join('\n')).toEqual(expected);
  });

  it('fails when a rule changes and its doc line does not', () => {
    const changed = OUTCOME_TABLE.map((r) => (r.when === '429 TooManyRequests' ? { ...r, kind: 'failed' as const } : r));
    expect(renderedTable(changed)).not.toEqual(documentedTable(source('src/gateways/outcomes.ts')));
  });

  it("docs/concepts.md's table gives each answer code it names the outcome of its rule", () => {
    const section = source('docs/concepts.md').split('**Gateway answers**')[1]!.split('\n\n')[1]!;
    const outcomes: Array<[RegExp, OutcomeRule['kind'], boolean]> = [
      [/^delivered/, 'ok', false],
      [/^token invalidated/, 'invalid_token', false],
      [/^retried/, 'retry', false],
      [/^a new JWT/, 'retry', true],
      [/^failed/, 'failed', false],
    ];
    const rows = section.split('\n').slice(2);
    expect(rows).toHaveLength(outcomes.length);
    let codes = 0;
    for (const row of rows) {
      const [answer, outcome] = row
        .split('|')
        .slice(1, 3)
        .map((c) => c.trim()) as [string, string];
      const [, kind, refreshes] = outcomes.find(([text]) => text.test(outcome))!;
      for (const [, code] of answer.matchAll(/`([A-Za-z_]+)`/g)) {
        const rule = OUTCOME_TABLE.find((r) => new RegExp(`\\b${code}\\b`).test(r.when))!;
        expect(rule, code).toBeDefined();
        expect([rule.kind, rule.refreshAuth === true], `${code} in "${answer}"`).toEqual([kind, refreshes]);
        codes++;
      }
    }
    expect(codes).toBeGreaterThanOrEqual(6);
  });
});
