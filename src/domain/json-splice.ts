/**
 * The JSON a gateway sends for each content of one send, when the contents differ only in top-level texts (a
 * templated batch's renders, `Hi Ana` and `Hi Bo`): the first is mapped and serialised once with a placeholder per
 * text, and each content's texts are JSON-escaped into that skeleton, instead of mapping and serialising each content
 * whole. A string serialises the same wherever it stands, so the bytes are those of the content mapped alone
 * (test/domain/json-splice.test.ts); the mappings read a text's presence, never its characters, and the skeleton is
 * checked against two contents mapped whole before it is used.
 */

const PLACEHOLDER = /"\\u0000pushd-text-(\d+)\\u0000"/g;
const placeholder = (j: number) => `\u0000pushd-text-${j}\u0000`;

/** The top-level keys whose values differ between the payloads, strings in each; null when anything else differs. */
export function textsThatDiffer(payloads: Record<string, unknown>[]): string[] | null {
  const [base, ...rest] = payloads;
  if (!base) return null;
  const keys = Object.keys(base);
  const differ = new Set<string>();
  for (const p of rest) {
    const own = Object.keys(p);
    if (own.length !== keys.length) return null;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      // the same keys in the same order: a mapping that copies keys writes them in this order
      if (own[i] !== k) return null;
      if (p[k] === base[k]) continue;
      if (typeof p[k] !== 'string' || typeof base[k] !== 'string') return null;
      differ.add(k);
    }
  }
  return [...differ];
}

/**
 * Each content's JSON by its index, made once each when asked: spliced into one skeleton when the contents differ only
 * in texts (`spliced`: then all else the mapping writes is the first content's), else `json` of each content.
 */
export function contentsJson(
  payloads: Record<string, unknown>[],
  json: (payload: Record<string, unknown>) => string,
): { json: (k: number) => string; spliced: boolean } {
  const made = new Array<string | undefined>(payloads.length);
  const splice = payloads.length > 2 ? splicer(payloads, json) : null;
  return { json: (k) => (made[k] ??= splice ? splice(k) : json(payloads[k]!)), spliced: splice !== null };
}

/** The splice of each content into the skeleton, or null when the contents differ in more than texts. */
export function splicer(
  payloads: Record<string, unknown>[],
  json: (payload: Record<string, unknown>) => string,
): ((k: number) => string) | null {
  const keys = textsThatDiffer(payloads);
  if (!keys?.length) return null;
  const holed = { ...payloads[0]! };
  keys.forEach((k, j) => (holed[k] = placeholder(j)));
  const skeleton = json(holed);
  const pieces: string[] = [];
  const texts: string[] = [];
  let last = 0;
  for (const m of skeleton.matchAll(PLACEHOLDER)) {
    pieces.push(skeleton.slice(last, m.index));
    texts.push(keys[Number(m[1])]!);
    last = m.index + m[0].length;
  }
  const tail = skeleton.slice(last);
  const splice = (k: number) => {
    const p = payloads[k]!;
    let out = '';
    for (let i = 0; i < pieces.length; i++) out += pieces[i]! + JSON.stringify(p[texts[i]!]);
    return out + tail;
  };
  const lastOne = payloads.length - 1;
  return splice(0) === json(payloads[0]!) && splice(lastOne) === json(payloads[lastOne]!) ? splice : null;
}
