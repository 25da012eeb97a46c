/**
 * A deterministic generator of realistic devices for the audience benchmark: the same seed and count give the
 * same rows. Skewed like real apps: a few locales, models, versions and tags dominate; most devices have a
 * plan and open the app, few buy; locations cluster around cities.
 */
export function rng(seed: number): () => number {
  // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Index in [0, n) with Zipf-like weights 1/(i+1)^s. */
function zipf(n: number, s = 1.1): (r: number) => number {
  const cum: number[] = [];
  let total = 0;
  for (let i = 0; i < n; i++) cum.push((total += 1 / (i + 1) ** s));
  return (r) => {
    const x = r * total;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cum[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

// name, lat, lng, country, locale, time zone
export const CITIES: [string, number, number, string, string, string][] = [
  ['New York', 40.7128, -74.006, 'US', 'en_US', 'America/New_York'],
  ['Paris', 48.8566, 2.3522, 'FR', 'fr_FR', 'Europe/Paris'],
  ['London', 51.5074, -0.1278, 'GB', 'en_GB', 'Europe/London'],
  ['Los Angeles', 34.0522, -118.2437, 'US', 'en_US', 'America/Los_Angeles'],
  ['Berlin', 52.52, 13.405, 'DE', 'de_DE', 'Europe/Berlin'],
  ['Madrid', 40.4168, -3.7038, 'ES', 'es_ES', 'Europe/Madrid'],
  ['Tokyo', 35.6762, 139.6503, 'JP', 'ja_JP', 'Asia/Tokyo'],
  ['Sao Paulo', -23.5505, -46.6333, 'BR', 'pt_BR', 'America/Sao_Paulo'],
  ['Chicago', 41.8781, -87.6298, 'US', 'en_US', 'America/Chicago'],
  ['Rome', 41.9028, 12.4964, 'IT', 'it_IT', 'Europe/Rome'],
  ['Lyon', 45.764, 4.8357, 'FR', 'fr_FR', 'Europe/Paris'],
  ['Toronto', 43.6532, -79.3832, 'CA', 'en_CA', 'America/Toronto'],
  ['Munich', 48.1351, 11.582, 'DE', 'de_DE', 'Europe/Berlin'],
  ['Mexico City', 19.4326, -99.1332, 'MX', 'es_MX', 'America/Mexico_City'],
  ['Sydney', -33.8688, 151.2093, 'AU', 'en_AU', 'Australia/Sydney'],
  ['Amsterdam', 52.3676, 4.9041, 'NL', 'nl_NL', 'Europe/Amsterdam'],
  ['Barcelona', 41.3851, 2.1734, 'ES', 'es_ES', 'Europe/Madrid'],
  ['Milan', 45.4642, 9.19, 'IT', 'it_IT', 'Europe/Rome'],
  ['Seoul', 37.5665, 126.978, 'KR', 'ko_KR', 'Asia/Seoul'],
  ['Mumbai', 19.076, 72.8777, 'IN', 'en_IN', 'Asia/Kolkata'],
  ['Marseille', 43.2965, 5.3698, 'FR', 'fr_FR', 'Europe/Paris'],
  ['Brussels', 50.8503, 4.3517, 'BE', 'fr_BE', 'Europe/Brussels'],
  ['San Francisco', 37.7749, -122.4194, 'US', 'en_US', 'America/Los_Angeles'],
  ['Lisbon', 38.7223, -9.1393, 'PT', 'pt_PT', 'Europe/Lisbon'],
  ['Dublin', 53.3498, -6.2603, 'IE', 'en_IE', 'Europe/Dublin'],
  ['Stockholm', 59.3293, 18.0686, 'SE', 'sv_SE', 'Europe/Stockholm'],
  ['Warsaw', 52.2297, 21.0122, 'PL', 'pl_PL', 'Europe/Warsaw'],
  ['Vienna', 48.2082, 16.3738, 'AT', 'de_AT', 'Europe/Vienna'],
  ['Zurich', 47.3769, 8.5417, 'CH', 'de_CH', 'Europe/Zurich'],
  ['Istanbul', 41.0082, 28.9784, 'TR', 'tr_TR', 'Europe/Istanbul'],
  ['Singapore', 1.3521, 103.8198, 'SG', 'en_SG', 'Asia/Singapore'],
  ['Buenos Aires', -34.6037, -58.3816, 'AR', 'es_AR', 'America/Argentina/Buenos_Aires'],
  ['Montreal', 45.5017, -73.5673, 'CA', 'fr_CA', 'America/Toronto'],
  ['Miami', 25.7617, -80.1918, 'US', 'en_US', 'America/New_York'],
  ['Seattle', 47.6062, -122.3321, 'US', 'en_US', 'America/Los_Angeles'],
  ['Oslo', 59.9139, 10.7522, 'NO', 'nb_NO', 'Europe/Oslo'],
  ['Johannesburg', -26.2041, 28.0473, 'ZA', 'en_ZA', 'Africa/Johannesburg'],
  ['Cairo', 30.0444, 31.2357, 'EG', 'ar_EG', 'Africa/Cairo'],
  ['Lagos', 6.5244, 3.3792, 'NG', 'en_NG', 'Africa/Lagos'],
  ['Delhi', 28.7041, 77.1025, 'IN', 'hi_IN', 'Asia/Kolkata'],
];

const IOS_MODELS = [
  'iPhone15,2',
  'iPhone14,5',
  'iPhone16,1',
  'iPhone13,2',
  'iPhone14,7',
  'iPhone12,1',
  'iPhone16,2',
  'iPhone15,4',
  'iPhone11,8',
  'iPad13,1',
];
const ANDROID_MODELS = [
  'SM-S918B',
  'Pixel 8',
  'SM-A546B',
  'Pixel 7a',
  'Redmi Note 12',
  'SM-G991B',
  'CPH2581',
  'moto g84',
  'Pixel 6',
  'SM-A145F',
  'M2101K6G',
  '2201117TG',
];
const IOS_VERSIONS = ['17.5.1', '17.4', '18.0', '16.7.8', '18.1', '17.2', '15.8'];
const ANDROID_VERSIONS = ['14', '13', '12', '11', '15', '10'];
const APP_VERSIONS = ['3.2.0', '3.1.4', '3.1.0', '3.0.2', '2.9.9', '2.9.0', '2.8.1', '2.5.0'];
const SDK_VERSIONS = ['6.1.0', '6.0.3', '5.9.1', '5.8.0'];
const PLANS = ['free', 'premium', 'pro', 'enterprise'];
export const TAGS = [
  'news',
  'sports',
  'deals',
  'beta',
  'music',
  'weather',
  'premium',
  'travel',
  'food',
  'tech',
  ...Array.from({ length: 190 }, (_, i) => `topic_${i}`),
];

export interface SeedDevice {
  id: string;
  platform: 'ios' | 'android';
  token: string | null;
  development: boolean;
  locale: string;
  time_zone: string;
  os_name: string;
  os_version: string;
  app_version: string;
  sdk_version: string;
  marketing_name: string;
  badge: number | null;
  user_id: string | null;
  user_email: string | null;
  tags: string[];
  country: string;
  notifications_allowed: string;
  sdk: [number, number] | null;
  ip: [number, number] | null;
  ip_address: string;
  created_at: Date;
  registered_at: Date;
  attributes: {
    name: string;
    type: string;
    position: number;
    is_array: boolean;
    str: string | null;
    num: number | null;
    date: Date | null;
    bool: boolean | null;
  }[];
  events: { source: string; name: string; count: number; first: Date; last: Date }[];
}

const DAY = 86_400_000;

/** The random draws a device is built from; every draw comes from one seeded stream, so call order matters. */
interface Draws {
  r: () => number;
  pick: <T>(xs: T[]) => T;
  gauss: () => number;
}

/** Custom attributes: most devices have a plan; fewer have an age, a lifetime value, teams and so on. */
function randomAttributes({ r, pick, gauss }: Draws, t0: number): SeedDevice['attributes'] {
  const attributes: SeedDevice['attributes'] = [];
  const attr = (name: string, type: string, values: (string | number | boolean | Date)[]) =>
    values.forEach((v, position) =>
      attributes.push({
        name,
        type,
        position,
        is_array: values.length > 1,
        str: typeof v === 'string' ? v : null,
        num: typeof v === 'number' ? v : null,
        date: v instanceof Date ? v : null,
        bool: typeof v === 'boolean' ? v : null,
      }),
    );
  if (r() < 0.95) attr('plan', 'string', [r() < 0.7 ? 'free' : pick(PLANS.slice(1))]);
  if (r() < 0.6) attr('age', 'integer', [18 + Math.floor(r() * 62)]);
  if (r() < 0.5) attr('ltv', 'float', [Math.round(Math.exp(gauss() * 1.2 + 3) * 100) / 100]);
  if (r() < 0.3) attr('last_purchase', 'date', [new Date(t0 - Math.floor(r() * 365 * DAY))]);
  if (r() < 0.8) attr('newsletter', 'boolean', [r() < 0.4]);
  if (r() < 0.25)
    attr('favorite_teams', 'string', [
      ...new Set(Array.from({ length: 1 + Math.floor(r() * 3) }, () => `team_${Math.floor(r() * r() * 100)}`)),
    ]);
  if (r() < 0.4) attr('level', 'integer', [1 + Math.floor(r() * r() * 100)]);
  return attributes;
}

/** Tracked events between the device's creation and now: nearly all open the app, few buy. */
function randomEvents({ r }: Draws, created: Date, t0: number): SeedDevice['events'] {
  const events: SeedDevice['events'] = [];
  const event = (source: string, name: string, p: number, meanCount: number, recentDays: number) => {
    if (r() >= p) return;
    const last = new Date(Math.max(created.getTime(), t0 - Math.floor(-Math.log(r() || 1e-12) * recentDays * DAY)));
    const first = new Date(created.getTime() + Math.floor(r() * (last.getTime() - created.getTime())));
    events.push({ source, name, count: 1 + Math.floor(-Math.log(r() || 1e-12) * meanCount), first, last });
  };
  event('', 'app_open', 0.97, 40, 12);
  event('', 'add_to_cart', 0.3, 4, 30);
  event('', 'level_up', 0.2, 8, 20);
  event('', 'tutorial_complete', 0.5, 1, 200);
  event('Public Api', 'purchase', 0.15, 2, 60);
  return events;
}

/** Returns a function that builds device i; the same seed and now give the same devices in the same order. */
export function deviceGenerator(seed: number, now: Date) {
  const r = rng(seed);
  const city = zipf(CITIES.length, 0.9);
  const tag = zipf(TAGS.length, 1.05);
  const model = zipf(10, 1.2);
  const version = zipf(6, 1.3);
  const pick = <T>(xs: T[], z = version) => xs[Math.min(xs.length - 1, z(r()))]!;
  const hex = (n: number) => Array.from({ length: n }, () => ((r() * 16) | 0).toString(16)).join('');
  const gauss = () => Math.sqrt(-2 * Math.log(r() || 1e-12)) * Math.cos(2 * Math.PI * r());
  const near = (c: (typeof CITIES)[number], km: number): [number, number] => [
    Math.max(-90, Math.min(90, c[1] + (gauss() * km) / 111)),
    Math.max(-180, Math.min(180, c[2] + (gauss() * km) / (111 * Math.cos((c[1] * Math.PI) / 180)))),
  ];
  const draws: Draws = { r, pick: (xs) => pick(xs), gauss };
  const t0 = now.getTime();

  return (i: number): SeedDevice => {
    const ios = r() < 0.55;
    const c = CITIES[city(r())]!;
    const created = new Date(t0 - Math.floor(r() * 730 * DAY));
    const registered = new Date(t0 - Math.floor(Math.min(t0 - created.getTime(), -Math.log(r() || 1e-12) * 20 * DAY)));
    const tags = new Set<string>();
    for (let k = Math.floor(r() * r() * 6); k > 0; k--) tags.add(TAGS[tag(r())]!);
    const attributes = randomAttributes(draws, t0);
    const events = randomEvents(draws, created, t0);

    const gps = r() < 0.55;
    const hasToken = r() < 0.92;
    return {
      id: uuid(hex(18), i),
      platform: ios ? 'ios' : 'android',
      token: hasToken ? (ios ? hex(64) : `${hex(22)}:APA91b${hex(134)}`) : null,
      development: r() < 0.01,
      locale: r() < 0.1 ? 'en_US' : c[4],
      time_zone: c[5],
      os_name: ios ? 'iOS' : 'Android',
      os_version: pick(ios ? IOS_VERSIONS : ANDROID_VERSIONS),
      app_version: pick(APP_VERSIONS),
      sdk_version: pick(SDK_VERSIONS),
      marketing_name: ios ? IOS_MODELS[model(r())]! : ANDROID_MODELS[Math.min(ANDROID_MODELS.length - 1, model(r()))]!,
      badge: r() < 0.5 ? null : Math.floor(r() * r() * 20),
      user_id: r() < 0.7 ? `user-${Math.floor(i * 0.8)}` : null,
      user_email: r() < 0.4 ? `user${i}@example.com` : null,
      tags: [...tags],
      country: c[3],
      notifications_allowed: r() < 0.7 ? 'Enabled' : r() < 0.66 ? 'Disabled' : 'Unknown',
      sdk: gps ? near(c, 15) : null,
      ip: gps || r() < 0.78 ? near(c, 3) : null,
      ip_address: `${11 + Math.floor(r() * 200)}.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}.${1 + Math.floor(r() * 254)}`,
      created_at: created,
      registered_at: registered,
      attributes,
      events,
    };
  };
}

/** A v4-shaped id: random leading digits spread ids over the keyspace; the index at the end makes it unique. */
function uuid(random: string, i: number): string {
  return `${random.slice(0, 8)}-${random.slice(8, 12)}-4${random.slice(12, 15)}-a${random.slice(15, 18)}-${i.toString(16).padStart(12, '0')}`;
}
