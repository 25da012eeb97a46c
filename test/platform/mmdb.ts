/**
 * A minimal MaxMind DB writer for tests: an IPv4 tree with 24-bit records and a data section of maps,
 * strings and doubles, enough for GeoIP2-City-shaped records (format: maxmind.github.io/MaxMind-DB).
 */
type Value = string | number | { [k: string]: Value } | Value[] | { uint: number; bytes: 2 | 4 | 8 };

const TYPE = { string: 2, double: 3, uint16: 5, uint32: 6, map: 7, uint64: 9, array: 11 } as const;

function control(type: number, size: number): Buffer {
  const sizeBytes = size < 29 ? [] : [size - 29];
  if (size >= 29 + 256) throw new Error('value too large for this writer');
  const head = ((type <= 7 ? type : 0) << 5) | (size < 29 ? size : 29);
  return Buffer.from([head, ...(type > 7 ? [type - 7] : []), ...sizeBytes]);
}

function encode(v: Value): Buffer {
  if (typeof v === 'string') {
    const b = Buffer.from(v, 'utf8');
    return Buffer.concat([control(TYPE.string, b.length), b]);
  }
  if (typeof v === 'number') {
    const b = Buffer.alloc(8);
    b.writeDoubleBE(v);
    return Buffer.concat([control(TYPE.double, 8), b]);
  }
  if (Array.isArray(v)) return Buffer.concat([control(TYPE.array, v.length), ...v.map(encode)]);
  if ('uint' in v && typeof v.uint === 'number') {
    const u = v as { uint: number; bytes: 2 | 4 | 8 };
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(u.uint));
    const bytes = b.subarray(8 - u.bytes);
    return Buffer.concat([control(u.bytes === 2 ? TYPE.uint16 : u.bytes === 4 ? TYPE.uint32 : TYPE.uint64, bytes.length), bytes]);
  }
  const entries = Object.entries(v as Record<string, Value>);
  return Buffer.concat([control(TYPE.map, entries.length), ...entries.flatMap(([k, x]) => [encode(k), encode(x)])]);
}

export function buildMmdb(networks: { cidr: string; record: Record<string, Value> }[]): Buffer {
  type Rec = { node: number } | { data: number } | null;
  const nodes: [Rec, Rec][] = [[null, null]];
  const data: Buffer[] = [];
  let dataSize = 0;
  for (const { cidr, record } of networks) {
    const [ip, len] = cidr.split('/') as [string, string];
    const bits = ip.split('.').reduce((n, o) => (n << 8) | Number(o), 0) >>> 0;
    const offset = dataSize;
    const encoded = encode(record);
    data.push(encoded);
    dataSize += encoded.length;
    let node = 0;
    for (let depth = 0; depth < Number(len); depth++) {
      const bit = (bits >>> (31 - depth)) & 1;
      if (depth === Number(len) - 1) nodes[node]![bit] = { data: offset };
      else {
        const next = nodes[node]![bit];
        if (next && 'node' in next) node = next.node;
        else {
          nodes.push([null, null]);
          nodes[node]![bit] = { node: nodes.length - 1 };
          node = nodes.length - 1;
        }
      }
    }
  }
  const count = nodes.length;
  const value = (r: Rec) => (r === null ? count : 'node' in r ? r.node : count + 16 + r.data);
  const tree = Buffer.alloc(count * 6);
  nodes.forEach(([l, r], i) => {
    tree.writeUIntBE(value(l), i * 6, 3);
    tree.writeUIntBE(value(r), i * 6 + 3, 3);
  });
  const metadata = encode({
    node_count: { uint: count, bytes: 4 },
    record_size: { uint: 24, bytes: 2 },
    ip_version: { uint: 4, bytes: 2 },
    database_type: 'GeoLite2-City',
    languages: ['en'],
    binary_format_major_version: { uint: 2, bytes: 2 },
    binary_format_minor_version: { uint: 0, bytes: 2 },
    build_epoch: { uint: 1_700_000_000, bytes: 8 },
    description: { en: 'pushd test database' },
  });
  return Buffer.concat([tree, Buffer.alloc(16), ...data, Buffer.from('abcdef4d61784d696e642e636f6d', 'hex'), metadata]);
}
