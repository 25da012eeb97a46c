/**
 * Reads a V8 .cpuprofile (`node --cpu-prof`) and prints where the time went per request: the functions with the most
 * self time and the most total time (self and what they called, a sample counted once however often the function is
 * on its stack), in µs per request, and the same by package or source file.
 *
 *   npx tsx bench/lib/cpuprofile-summary.ts <file.cpuprofile> <requests> [--top 25] [--from-ms 0] [--to-ms Infinity]
 *
 * --from-ms / --to-ms keep the samples of that window (ms from the profile's start): the load, not the start-up.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, requestsArg] = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
if (!file || !requestsArg) throw new Error('usage: cpuprofile-summary <file.cpuprofile> <requests> [--top N] [--from-ms A] [--to-ms B]');
const requests = Number(requestsArg);
const top = option('top', 25);
const fromUs = option('from-ms', 0) * 1000;
const toUs = option('to-ms', Infinity) * 1000;

const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);

/** A function's name, and where it is: a package's name, or the path under the repository */
const where = (url: string) => {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  const own = /\/(dist\/.*|src\/.*)$/.exec(url)?.[1];
  return own ?? (url.startsWith('node:') ? url : url || '(native)');
};
const keyOf = (n: ProfileNode) =>
  `${n.callFrame.functionName || '(anonymous)'} ${where(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`;

const self = new Map<string, number>();
const total = new Map<string, number>();
const selfWhere = new Map<string, number>();
let elapsed = 0;
let counted = 0;
for (let i = 0; i < profile.samples.length; i++) {
  elapsed += profile.timeDeltas[i] ?? 0;
  if (elapsed < fromUs || elapsed > toUs) continue;
  const us = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0;
  const leaf = byId.get(profile.samples[i]!)!;
  if (leaf.callFrame.functionName === '(idle)') continue;
  counted += us;
  self.set(keyOf(leaf), (self.get(keyOf(leaf)) ?? 0) + us);
  selfWhere.set(where(leaf.callFrame.url), (selfWhere.get(where(leaf.callFrame.url)) ?? 0) + us);
  const seen = new Set<string>();
  for (let id: number | undefined = leaf.id; id !== undefined; id = parentOf.get(id)) {
    const key = keyOf(byId.get(id)!);
    if (seen.has(key)) continue;
    seen.add(key);
    total.set(key, (total.get(key) ?? 0) + us);
  }
}

const print = (title: string, map: Map<string, number>) => {
  console.log(`\n${title} (µs per request)`);
  for (const [key, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${(us / requests).toFixed(1).padStart(9)}  ${key}`);
};
console.log(
  `${file}: ${(counted / 1000).toFixed(0)} ms of CPU sampled (not idle), ${requests} requests: ${(counted / requests).toFixed(1)} µs each`,
);
print('self time, by function', self);
print('self time, by package or file', selfWhere);
print('total time, by function', total);
