/**
 * The floor under bench/unicast: the least a durable 201 costs on this stack and this machine. One Fastify route
 * takes the benchmark's `device_id` body, validates it with zod, and commits it with one INSERT for each group of
 * concurrent requests (grouped as pushd groups its unicast creates) before it answers 201. Nothing is enqueued or
 * delivered, no key is looked up, no audience resolved: what pushd's POST does beyond this is its own cost.
 * bench/unicast runs it as its own process (PORT, DATABASE_URL), with production's node flags, as it runs the service.
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';
import { z } from 'zod';
import { GroupRunner } from '../../src/platform/group-runner.js';
import { CREATION_GROUPS } from '../../src/services/notifications.js';

const TABLE = `
  create table if not exists floor_notifications (
    id uuid primary key,
    target jsonb not null,
    payload jsonb not null,
    created_at timestamptz not null default now())`;

const body = z.object({
  notification: z.object({
    to: z.array(z.object({ name: z.string(), criteria: z.array(z.string()).min(1).max(100) })).min(1),
    payload: z.object({ alert: z.string().max(4096), badge: z.number().int().min(0).optional() }).loose(),
  }),
});
type Row = { id: string; target: string; payload: string };

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
await pool.query(TABLE);
const inserts = new GroupRunner<Row, void>(async (rows) => {
  await pool.query('insert into floor_notifications (id, target, payload) select * from unnest($1::uuid[], $2::jsonb[], $3::jsonb[])', [
    rows.map((r) => r.id),
    rows.map((r) => r.target),
    rows.map((r) => r.payload),
  ]);
  return rows.map(() => ({ status: 'fulfilled', value: undefined }));
}, CREATION_GROUPS);

const app = Fastify();
app.get('/ready', async () => ({ ok: true }));
app.post('/v6/notifications', async (request, reply) => {
  if (!request.headers.authorization) return reply.code(401).send({ error: 'unauthorized' });
  const parsed = body.safeParse(request.body);
  if (!parsed.success) return reply.code(400).send({ error: parsed.error.issues[0]?.path.join('.') ?? 'body' });
  const { to, payload } = parsed.data.notification;
  const id = randomUUID();
  await inserts.submit({ id, target: JSON.stringify(to), payload: JSON.stringify(payload) });
  return reply.code(201).send({ notification: { id, state: 'scheduled' } });
});
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => pool.end()));
